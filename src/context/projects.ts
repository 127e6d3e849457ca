/**
 * The project (tenant) ids every layer names. Each project's resources, versions, index rows and
 * change marks are its own; ids are unique within a project. The system project holds what every
 * project reads (imported terminology, definitions).
 */
export const SYSTEM_PROJECT = 'system';
/** Data from before projects existed, and the project static-token callers act in. */
export const DEFAULT_PROJECT = 'default';
