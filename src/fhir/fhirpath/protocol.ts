/** What the main thread and a FHIRPath worker (worker.ts) say to each other. */

/** One expression to evaluate against one focus. */
export interface FhirPathJob {
  expression: string;
  focus: unknown;
  /** Environment variables (`%current`, `%resource` ...); plain data, cloned into the worker. */
  vars?: Record<string, unknown>;
  /** Evaluate as a profile invariant: at the element path `base`, with resolve() answered locally. */
  invariant?: { base: string };
  /** Send the result back too, as JSON (measure criteria use the values; others only the summary). */
  values?: boolean;
}

/**
 * What an expression answered, summed up rather than sent back whole (a result may be most of a
 * large resource, and every caller only needs its truth): how many items, the first one when it
 * is a boolean, whether any item is `false`.
 */
export interface FhirPathSummary {
  length: number;
  first?: boolean;
  hasFalse: boolean;
}

export type FhirPathAnswer =
  | { ok: true; summary: FhirPathSummary; values?: unknown[] }
  /**
   * `invalid`: the expression does not compile or fails to evaluate; `budget`: it ran out of time
   * or memory; `unavailable`: the pool could not evaluate it (closed as the server shuts down, or
   * its worker did not start), which says nothing about the expression.
   */
  | { ok: false; error: 'invalid' | 'budget' | 'unavailable'; message: string };

export interface BatchRequest {
  id: number;
  jobs: FhirPathJob[];
}

export interface BatchReply {
  id: number;
  answers: FhirPathAnswer[];
}

/** The worker's start: `progress[0]` is the index of the job it is evaluating, -1 before the first (read by the pool's watchdog). */
export interface WorkerData {
  progress: SharedArrayBuffer;
}

/** The worker's first message: the engine is loaded, batches may come. */
export interface WorkerReady {
  ready: true;
}
