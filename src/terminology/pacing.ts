/**
 * Cooperative time slicing for the engine's long loops. The engine runs on the one event loop
 * that serves every request: a loop that works for seconds without giving it back stalls them
 * all. Loops ask `due()` per step (a clock read and the budget check) and, when the slice is
 * spent, await `pause()`, which lets pending I/O (other requests, signals) run before going on.
 */

import { nextTurn, SLICE_MS } from '../context/budget';

export class Pacer {
  private sliceEnd = Date.now() + SLICE_MS;

  constructor(private readonly checkBudget: () => void) {}

  /** Throws too-costly when the budget is spent; true when the slice is and the loop should pause. */
  due(): boolean {
    this.checkBudget();
    return Date.now() >= this.sliceEnd;
  }

  /** Gives the event loop back once, then starts a new slice. */
  async pause(): Promise<void> {
    await nextTurn();
    this.sliceEnd = Date.now() + SLICE_MS;
    this.checkBudget();
  }

  /** The step of a long loop: the budget checked, and the event loop given back when the slice is spent. */
  async step(): Promise<void> {
    if (this.due()) await this.pause();
  }
}
