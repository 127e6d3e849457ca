/**
 * Whether the change marks a process read (per project and type, see ResourceStore.changeMarks)
 * may have moved since, known without asking the database. Everything kept in memory from storage
 * (stored terminology, search parameters, profiles) checks the marks before it is used; with a
 * watch that says "nothing changed", that check costs no query.
 *
 * Two ways to learn of other processes' writes (FRESHNESS_CHECK):
 * - `notify` (default): this process's own commits move the epoch before they are acknowledged;
 *   other processes' commits move it when their notice arrives (PostgreSQL LISTEN/NOTIFY, sent by
 *   the commit itself; over one SQLite file, a check of the file's commit counter every
 *   POLL_MS). A request never waits on the database when nothing changed; a write through another
 *   process is seen here after the notice's delay (milliseconds; at most POLL_MS on SQLite).
 * - `request`: every use asks the database (one query on PostgreSQL): a write acknowledged by any
 *   process is seen by the very next request in every other one.
 */
export type FreshnessCheck = 'notify' | 'request';

export const FRESHNESS_CHECKS: readonly FreshnessCheck[] = ['notify', 'request'];

/** The notice channel of "this process committed resources" (PostgreSQL's trigger; SQLite workers). */
export const CHANGES_NOTICE_CHANNEL = 'fhir_changes';

export interface ChangeWatch {
  /** The same number as long as marks read under it are still current; read it before reading them. */
  readonly epoch: number;
}

/** `request`: every reading is a new epoch, so marks are always read again. */
export class CheckEveryTime implements ChangeWatch {
  private count = 0;

  get epoch(): number {
    return ++this.count;
  }
}

/**
 * `notify`: the epoch moves when told something changed. While the notices cannot be trusted
 * (the listening connection is down, so messages may be lost) it behaves like CheckEveryTime.
 */
export class NotifiedChanges implements ChangeWatch {
  private count = 0;
  private timer?: NodeJS.Timeout;

  constructor(private readonly trusted: () => boolean = () => true) {}

  get epoch(): number {
    return this.trusted() ? this.count : ++this.count;
  }

  /** Something may have changed: marks read before are stale. */
  changed(): void {
    this.count++;
  }

  /** Calls `check` every `ms` (unreferenced: it keeps no process alive) until closed. */
  every(ms: number, check: () => void): void {
    clearInterval(this.timer);
    this.timer = setInterval(check, ms);
    this.timer.unref();
  }

  close(): void {
    clearInterval(this.timer);
  }
}

/**
 * Change marks read through a watch: a project's marks are read again only when the watch's
 * epoch moved since they were (the epoch is taken before the read, so a change during it is not
 * missed).
 */
export class ChangeMarksCache {
  private readonly byProject = new Map<string, { epoch: number; rows: { type: string; seq: number }[] }>();

  constructor(
    private readonly watch: ChangeWatch,
    private readonly readAll: (project: string) => Promise<{ type: string; seq: number }[]>,
  ) {}

  async marks(project: string, types: string[]): Promise<Map<string, number>> {
    let known = this.byProject.get(project);
    const epoch = this.watch.epoch;
    if (known?.epoch !== epoch) {
      known = { epoch, rows: await this.readAll(project) };
      // Projects that stop asking give their rows back.
      if (this.byProject.size >= 1000 && !this.byProject.has(project))
        this.byProject.delete(this.byProject.keys().next().value as string);
      this.byProject.set(project, known);
    }
    const marks = new Map<string, number>(types.map((t) => [t, 0]));
    for (const row of known.rows) if (marks.has(row.type)) marks.set(row.type, row.seq);
    return marks;
  }
}
