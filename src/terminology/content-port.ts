import type { CanonicalSource } from './canonical-index';

/**
 * What the engine needs of the content it does not hold itself (the resources projects stored),
 * declared here and implemented outside the engine (src/content, over storage): no SQL and no
 * store type on this side. The bundled R4 content comes in as a CanonicalIndex.
 */
export interface TerminologySource {
  /** One project's stored terminology (the system scope's under SYSTEM_PROJECT). */
  of(project: string): ProjectTerminology;
}

/** The CodeSystems, ValueSets and ConceptMaps one project stored, found by canonical and kept current. */
export interface ProjectTerminology {
  /** The stored resources, looked up by canonical url like any other source. */
  readonly index: CanonicalSource;
  /** Grows whenever the stored content changes; caches built on the content compare generations. */
  readonly generation: number;
  /**
   * Brings the index up to date with every write committed before the call; undefined when it
   * already is (so a caller that finds nothing changed has no promise to wait for).
   */
  refresh(): Promise<void> | undefined;
}
