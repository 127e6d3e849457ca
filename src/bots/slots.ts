import { fhirError } from '../fhir/errors';

/**
 * The sandbox's execution slots, shared fairly between projects. A bot may run for up to 900 s,
 * so one project starting many would otherwise hold every slot and queue everyone else behind it:
 * here a project holds at most its share of the slots, its further executions wait in its own
 * queue (refused with 429 once that queue is full), and a freed slot goes to the next project in
 * turn (round-robin), not to whoever queued first.
 */

export interface FairSlotsOptions {
  /** Executions at once, all projects together. */
  slots: number;
  /** Executions at once of one project (BOT_SLOTS_PER_PROJECT). */
  perProject: number;
  /** Executions of one project that may wait for a slot (BOT_QUEUE_PER_PROJECT); more are refused. */
  queuePerProject: number;
}

/** Seconds a refused caller is told to wait (Retry-After): about one short bot's run. */
const RETRY_AFTER_S = 5;

type Release = () => void;

export class FairSlots {
  private total = 0;
  private readonly running = new Map<string, number>();
  /** Waiting executions by project; the map's order is the turn (a served project goes last). */
  private readonly waiting = new Map<string, ((release: Release) => void)[]>();

  constructor(private readonly options: FairSlotsOptions) {}

  /**
   * Waits for a slot for the project; the answer frees it (once, however often it is called).
   * Throws ERR_BOT_BUSY (429, Retry-After) when the project's queue is already full.
   */
  acquire(project: string): Promise<Release> {
    if (!this.waiting.has(project) && this.canStart(project)) return Promise.resolve(this.start(project));
    const queue = this.waiting.get(project) ?? [];
    if (queue.length >= this.options.queuePerProject) {
      const running = this.running.get(project) ?? 0;
      return Promise.reject(
        fhirError(
          'ERR_BOT_BUSY',
          { running, waiting: queue.length },
          { headers: { 'retry-after': String(RETRY_AFTER_S) } },
        ),
      );
    }
    return new Promise<Release>((resolve) => {
      queue.push(resolve);
      if (!this.waiting.has(project)) this.waiting.set(project, queue);
    });
  }

  private canStart(project: string): boolean {
    return this.total < this.options.slots && (this.running.get(project) ?? 0) < this.options.perProject;
  }

  private start(project: string): Release {
    this.total++;
    this.running.set(project, (this.running.get(project) ?? 0) + 1);
    let freed = false;
    return () => {
      if (freed) return;
      freed = true;
      this.total--;
      const left = (this.running.get(project) ?? 1) - 1;
      if (left === 0) this.running.delete(project);
      else this.running.set(project, left);
      this.dispatch();
    };
  }

  /**
   * Keeps the rule acquire() relies on: no waiting project could start. Hands freed slots to waiters: each turn the first project in order that is under its share
   * gets one and goes to the back of the order (round-robin), until no waiter can start.
   */
  private dispatch(): void {
    for (;;) {
      const next = [...this.waiting.keys()].find((project) => this.canStart(project));
      if (next === undefined) return;
      const queue = this.waiting.get(next) as ((release: Release) => void)[];
      const wake = queue.shift() as (release: Release) => void;
      this.waiting.delete(next);
      if (queue.length > 0) this.waiting.set(next, queue);
      wake(this.start(next));
    }
  }
}
