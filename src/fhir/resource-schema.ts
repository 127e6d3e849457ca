import type { Resource } from 'fhir/r4';

/**
 * The structural check every create and update passes (and every resource given as an operation
 * parameter): what the HTTP and REST layers need of it. The check itself is the validation
 * engine's (`StructuralCheck` in src/validation/write-checks.ts), against the R4 definitions.
 */
export interface ResourceSchema {
  readonly resourceTypes: ReadonlySet<string>;
  isResourceType(type: string): boolean;
  /**
   * Throws ERR_RESOURCE_INVALID naming the first problem's FHIRPath. `partial`: missing required
   * elements are let through (a resource given to an operation, like the HL7 terminology suite's
   * code systems without a status); the shape of what is there is still checked.
   */
  check(type: string, resource: Resource, options?: { partial?: boolean }): void;
}
