import { fhirError } from '../fhir/errors';
import type { RequestContext } from './request-context';

/**
 * The one budget for work whose size a client decides: FHIRPath a user wrote (subscription
 * criteria, profile invariants, `fhirpath:` arguments, FHIRPath Patch), GraphQL, search planning,
 * bundles, `$everything`, measures. Every such loop runs on the one event loop that serves all
 * requests, so the budget does two things: it ends the work with a too-costly OperationOutcome when
 * its time or its step allowance is spent, and it gives the event loop back every `SLICE_MS` so
 * other requests (a /metadata probe, a SIGTERM) are never held up for longer than that.
 */

/** How long one piece of client-sized work may hold the event loop at a stretch. */
export const SLICE_MS = 4;

export interface BudgetOptions {
  /** Epoch milliseconds after which the work stops (usually the request's deadline). */
  deadline: number;
  /** Most steps the work may take (a step is what the caller counts: an entry, a node, a row). */
  maxSteps?: number;
  /** What is being done, for the too-costly message ("the GraphQL query", "the transaction"). */
  what: string;
}

/** The next turn of the event loop: pending I/O, timers and signals run before this resolves. */
export function nextTurn(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve));
}

/**
 * The turn of the event loop the process is in, as seen by `yieldIfHeld`: when it started (the first
 * call in it), and whether a setImmediate is queued to mark its end (it runs once the loop has
 * moved on through pending I/O, so a call after it starts a new turn).
 */
const turn = { started: 0, marked: false };

/** How long the current turn of the event loop has been held, counted from the first call in it. */
function heldFor(): number {
  const now = performance.now();
  if (!turn.marked) {
    turn.marked = true;
    turn.started = now;
    setImmediate(() => (turn.marked = false));
  }
  return now - turn.started;
}

/**
 * Gives the event loop back once the current turn has held it for `SLICE_MS`, whatever work held
 * it: for code below the requests (the embedded database, whose calls are synchronous, so a
 * request's awaits on it never let another request in) that has no budget of its own to step.
 * A call early in a turn costs a clock read; no yield when nothing held the loop.
 */
export async function yieldIfHeld(): Promise<void> {
  if (heldFor() >= SLICE_MS) await nextTurn();
}

export class Budget {
  private steps = 0;
  private sliceEnd = Date.now() + SLICE_MS;

  constructor(private readonly options: BudgetOptions) {}

  /** A budget that ends with the request's deadline. */
  static of(ctx: Pick<RequestContext, 'deadline'>, what: string, maxSteps?: number): Budget {
    return new Budget({ deadline: ctx.deadline, what, maxSteps });
  }

  /** Counts `n` steps; throws too-costly when the step allowance or the time is spent. */
  spend(n = 1): void {
    this.steps += n;
    if (this.options.maxSteps !== undefined && this.steps > this.options.maxSteps) {
      throw fhirError('ERR_OP_TOO_COSTLY', {
        what: `${this.options.what} takes more than ${this.options.maxSteps} steps`,
      });
    }
    this.check();
  }

  /** Throws too-costly when the time is spent. */
  check(): void {
    if (Date.now() > this.options.deadline) {
      throw fhirError('ERR_OP_TOO_COSTLY', {
        what: `${this.options.what} did not finish within the time budget of the request`,
      });
    }
  }

  /** True when this slice of the event loop is spent and the work should `pause()`. */
  due(): boolean {
    return Date.now() >= this.sliceEnd;
  }

  /** Gives the event loop back once, then starts a new slice (the time checked after). */
  async pause(): Promise<void> {
    await nextTurn();
    this.sliceEnd = Date.now() + SLICE_MS;
    this.check();
  }

  /** The step of a long loop: counted, checked, and the event loop given back when the slice is spent. */
  async step(n = 1): Promise<void> {
    this.spend(n);
    if (this.due()) await this.pause();
  }
}
