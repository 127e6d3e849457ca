/** What $expand is asked for, beyond the shared terminology parameters (TxParams). */
export interface ExpandOptions {
  /** Text filter: the words a display, designation or code must contain. */
  filter?: string;
  count?: number;
  offset?: number;
  includeDesignations?: boolean;
  /** Designations wanted (`system|code` of a use, or `urn:ietf:bcp:47|<lang>`). */
  designations: string[];
  includeDefinition?: boolean;
  excludeNested?: boolean;
  excludeNotForUI?: boolean;
  excludePostCoordinated?: boolean;
  /** Properties to return per concept (`*` for all). */
  properties: string[];
  /** The largest expansion to build before answering too-costly. */
  limit: number;
  /** displayLanguage as the request wrote it, to echo in the expansion parameters. */
  displayLanguage?: string;
  acceptLanguage?: string;
}

/** Imports are expanded with more room than the answer itself: they are only used to filter. */
export const INTERNAL_LIMIT = 100_000;
