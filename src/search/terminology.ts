/**
 * What search needs from the terminology engine for the token modifiers `:in`, `:not-in`,
 * `:below` and `:above`: a membership test it can apply to the codes actually present in the
 * index (a value set is never expanded for this, so SNOMED-sized value sets cost the same as
 * small ones).
 */
export interface CodeMatcher {
  /** Membership in a value set; undefined when the value set is not known. */
  valueSet(url: string, project: string): Promise<((system: string | null, code: string) => boolean) | undefined>;
  /**
   * `below`: codes subsumed by `code` (itself included); `above`: codes that subsume it.
   * Undefined when the code system is not known or has no content.
   */
  hierarchy(
    system: string,
    code: string,
    direction: 'below' | 'above',
    project: string,
  ): Promise<((code: string) => boolean) | undefined>;
}
