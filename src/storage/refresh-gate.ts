/**
 * Coalesces the refreshes of something kept in memory from storage (stored terminology, stored
 * search parameters) so that every caller is served by a refresh that read the change marks after
 * it asked: one already running may have read them before a write the caller has seen
 * acknowledged (by another process), so it cannot answer for that caller. The callers that arrive
 * while one runs share the one refresh queued behind it.
 */
export class RefreshGate {
  /** The refresh running now: it read the change marks before some of its callers asked. */
  private running?: Promise<void>;
  /** The refresh that starts when the running one ends, shared by everyone who asked meanwhile. */
  private queued?: Promise<void>;

  constructor(private readonly work: () => Promise<void>) {}

  refresh(): Promise<void> {
    if (this.queued) return this.queued;
    if (!this.running) return this.start();
    const after = this.running.then(
      () => undefined,
      () => undefined,
    );
    this.queued = after.then(() => {
      this.queued = undefined;
      return this.start();
    });
    return this.queued;
  }

  private start(): Promise<void> {
    const run = this.work().finally(() => {
      if (this.running === run) this.running = undefined;
    });
    this.running = run;
    return run;
  }
}
