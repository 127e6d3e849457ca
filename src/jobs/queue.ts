import { randomUUID } from 'node:crypto';
import type { Principal } from '../auth/principal';
import type { ContextLog } from '../context/request-context';
import { JOBS_NOTICE_CHANNEL, type JobRow, type JobStore, type NewJob } from '../storage/jobs';
import type { Notices } from '../storage/notices';
import type { StoreTx } from '../storage/store';

/**
 * The durable job queue: work that outlives a request and survives a crash (bulk export now;
 * subscriptions, reindexing, bots next). Jobs are rows of the database (src/storage/jobs.ts);
 * every process runs `workers` loops that claim ready jobs with a lease, renew it while the
 * handler runs, and end the job done, queued again with exponential backoff, or dead with its
 * last error. Several processes over one PostgreSQL share the work with no leader. Each job
 * records the project and principal that asked, and its handler runs as them. Handlers must be
 * idempotent: a job whose process died is run again once its lease runs out.
 *
 * Workers wake when this process enqueues, when the database announces a new job (`notices`:
 * PostgreSQL's LISTEN/NOTIFY from a trigger on the table, so another process's jobs start at
 * once), and otherwise poll (`pollMs`), which also covers a notice lost with its connection.
 */

export interface Job<I = unknown> {
  id: string;
  kind: string;
  project: string;
  principal: Principal;
  input: I;
  attempt: number;
  /** The attempts it has in all: a handler failing its last one may record why (a Subscription's error). */
  maxAttempts: number;
}

/** What a running handler may do: note progress (which renews its lease) and see that it lost the job. */
export interface JobControl {
  progress(note: string): Promise<void>;
  /** Aborted when the job was removed or its lease went to another worker: stop, the result is not wanted. */
  signal: AbortSignal;
}

export interface JobHandler<I = unknown> {
  kind: string;
  /** Answers the job's result (stored as JSON); throws to fail the attempt. */
  run(job: Job<I>, control: JobControl): Promise<unknown>;
  /** The delay before the retry that follows failed attempt `attempt` (default: the queue's exponential backoff). */
  backoff?(attempt: number): number;
  /**
   * For many short jobs (subscription deliveries): a worker that claims one of this kind claims up
   * to `batch - 1` more with it, runs them together and ends the successful ones in one statement
   * (on SQLite each claim and completion is a durable commit: batching is what makes 1,000/s).
   */
  batch?: number;
  /** How long this kind's done jobs are kept, when shorter than the queue's retention (dead ones keep it). */
  keepDoneMs?: number;
}

export interface JobQueueOptions {
  /** How long a claim holds before another worker may take the job (default 30 s); renewed every third of it. */
  leaseMs?: number;
  /** The first retry's delay (default 1 s), doubled each attempt up to `maxBackoffMs` (default 5 min). */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** How often idle workers look for jobs other processes enqueued (default 1 s). */
  pollMs?: number;
  /** Where the database announces new jobs (the store's notices); absent: this process's own enqueues and the poll. */
  notices?: Notices;
  /** How long finished jobs are kept (default 7 days). */
  retentionMs?: number;
  log?: ContextLog;
}

export interface JobView<I = unknown, R = unknown> {
  id: string;
  kind: string;
  project: string;
  principal: Principal;
  input: I;
  state: JobRow['state'];
  attempts: number;
  progress?: string;
  result?: R;
  lastError?: string;
  createdAt: number;
  finishedAt?: number;
}

export class JobLost extends Error {}

/** How soon a worker looks again after a claim failed, or writes again a job's end that could not be written. */
const CLAIM_RETRY_MS = 1000;
/** How many times a job's end is written before it is left to its lease running out (the job then runs again). */
const RECORD_ATTEMPTS = 3;

export class JobQueue {
  private readonly handlers = new Map<string, JobHandler>();
  private readonly workerId = `${process.pid}-${randomUUID().slice(0, 8)}`;
  private running = false;
  private loops: Promise<void>[] = [];
  private wakers: (() => void)[] = [];
  /** Counts wakes: a worker woken while it looked (no waker yet to call) sees the count moved and looks again. */
  private wakes = 0;
  private readonly active = new Map<string, AbortController>();
  private lastPurge = 0;
  /** When the lease of a job whose end could not be written (or whose claim's answer was lost) runs out: it is claimable again then. */
  private unrecordedUntil = 0;
  private readonly leaseMs: number;
  private readonly backoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly pollMs: number;
  private readonly notices?: Notices;
  /** Stops listening to the database's job notices. */
  private unlisten?: Promise<() => void>;
  private readonly retentionMs: number;
  /** Where failures are logged (the server's logger, given at construction). */
  private readonly log?: ContextLog;

  constructor(
    private readonly store: JobStore,
    options: JobQueueOptions = {},
  ) {
    this.leaseMs = options.leaseMs ?? 30_000;
    this.backoffMs = options.backoffMs ?? 1000;
    this.maxBackoffMs = options.maxBackoffMs ?? 300_000;
    this.pollMs = options.pollMs ?? 1000;
    this.notices = options.notices;
    this.retentionMs = options.retentionMs ?? 7 * 24 * 3_600_000;
    this.log = options.log;
  }

  register(handler: JobHandler<never>): void {
    if (this.handlers.has(handler.kind)) throw new Error(`two job handlers for '${handler.kind}'`);
    this.handlers.set(handler.kind, handler as JobHandler);
  }

  /** Enqueues a job, within `tx` when given (it commits with the write that causes it). */
  async enqueue<I>(
    job: {
      kind: string;
      project: string;
      principal: Principal;
      input: I;
      maxAttempts?: number;
      id?: string;
      runAt?: number;
    },
    tx?: StoreTx,
  ): Promise<string> {
    const row: NewJob = {
      kind: job.kind,
      project: job.project,
      principal: principalJson(job.principal),
      input: JSON.stringify(job.input),
      maxAttempts: job.maxAttempts,
      id: job.id,
      runAt: job.runAt,
    };
    const id = tx ? await tx.enqueue(row) : await this.store.enqueue(row);
    // A transaction's job is claimable once it commits; a worker woken early polls again.
    this.wake();
    return id;
  }

  async get<I = unknown, R = unknown>(id: string): Promise<JobView<I, R> | undefined> {
    const row = await this.store.get(id);
    return row ? viewOf<I, R>(row) : undefined;
  }

  /** A project's newest jobs (at most 1,000), newest first. */
  async list(project: string, options: { limit?: number; kind?: string } = {}): Promise<JobView[]> {
    const limit = Math.max(1, Math.min(options.limit ?? 100, 1000));
    return (await this.store.list(project, { limit, kind: options.kind })).map((row) => viewOf(row));
  }

  /** How many of a project's jobs of one kind are queued or running. */
  countActive(project: string, kind: string): Promise<number> {
    return this.store.countActive(project, kind);
  }

  /** Removes a job in any state; a handler running it here is aborted (elsewhere: at its next heartbeat). */
  async remove(id: string): Promise<boolean> {
    const removed = await this.store.remove(id);
    this.active.get(id)?.abort(new JobLost('the job was removed'));
    return removed;
  }

  /** Starts `workers` loops in this process (0: none, a web-only process). */
  start(workers: number): void {
    if (this.running || workers <= 0) return;
    this.running = true;
    // A notice that cannot be listened to leaves the poll: logged, not fatal.
    // Notices missed while the listening connection was down: the idle workers look for themselves.
    this.unlisten = this.notices
      ?.listen(
        JOBS_NOTICE_CHANNEL,
        () => this.wake(),
        () => this.wake(),
      )
      .catch((err: unknown) => {
        this.log?.warn({ err }, 'job notices unavailable; workers poll');
        return () => undefined;
      });
    for (let i = 0; i < workers; i++) this.loops.push(this.loop(`${this.workerId}-${i}`));
  }

  /** Stops claiming, aborts the handlers running here (their jobs go back to the queue when their leases run out), waits for the loops. */
  async stop(): Promise<void> {
    this.running = false;
    const unlisten = this.unlisten;
    this.unlisten = undefined;
    if (unlisten) (await unlisten)();
    for (const controller of this.active.values()) controller.abort(new JobLost('the process is stopping'));
    this.wake();
    await Promise.all(this.loops);
    this.loops = [];
  }

  wake(): void {
    this.wakes++;
    const wakers = this.wakers;
    this.wakers = [];
    for (const w of wakers) w();
  }

  private async loop(worker: string): Promise<void> {
    // Listening first: a job enqueued elsewhere after this worker's first look still wakes it.
    await this.unlisten;
    while (this.running) {
      let claimed: JobRow | undefined;
      let failed = false;
      const lookedAt = Date.now();
      const wakesBefore = this.wakes;
      try {
        await this.maybePurge();
        claimed = await this.store.claim([...this.handlers.keys()], worker, this.leaseMs);
      } catch (err) {
        failed = true;
        this.log?.error({ err: (err as Error).message }, 'job claim failed');
        // The claim may have taken a job before its answer was lost: that job is claimable when its lease runs out.
        this.unrecordedUntil = Math.max(this.unrecordedUntil, Date.now() + this.leaseMs);
      }
      if (claimed) {
        await this.runClaimed(claimed, worker);
        continue;
      }
      // A failed look (the database busy or briefly gone) is tried again soon, not after a long poll;
      // so is a job whose end could not be written, once its lease runs out.
      let wait = this.pollMs;
      if (failed) wait = Math.min(this.pollMs, CLAIM_RETRY_MS);
      else if (this.unrecordedUntil > lookedAt)
        wait = Math.min(this.pollMs, Math.max(this.unrecordedUntil - Date.now(), 0) + 10);
      else this.unrecordedUntil = 0;
      // A wake while this worker looked (a job enqueued after its claim's snapshot, or stop) came
      // before there was a waker to call: look again (or end) at once instead of sleeping the poll.
      if (!this.running) break;
      if (this.wakes !== wakesBefore && !failed) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, wait);
        this.wakers.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Runs a claimed job, with the others of its kind claimed alongside when its handler batches. */
  private async runClaimed(first: JobRow, worker: string): Promise<void> {
    const batch = this.handlers.get(first.kind)?.batch ?? 1;
    if (batch <= 1) {
      const done = await this.runJob(first, worker);
      if (done) await this.record('job completion failed', () => this.store.complete(done.id, worker, done.result));
      return;
    }
    const more = await this.store.claimMore(first.kind, worker, this.leaseMs, batch - 1).catch((err: Error) => {
      this.log?.error({ err: err.message }, 'job claim failed');
      return [] as JobRow[];
    });
    const done = (await Promise.all([first, ...more].map((row) => this.runJob(row, worker)))).filter(
      (d) => d !== undefined,
    );
    await this.record('job completion failed', () => this.store.completeMany(done, worker));
  }

  /**
   * Writes a job's end, again after CLAIM_RETRY_MS when the database is busy or briefly gone: the
   * outcome is known, and an end not written means the job runs again once its lease runs out (and
   * an idle worker looks for it then, not after its whole poll).
   */
  private async record(what: string, write: () => Promise<unknown>): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await write();
        return;
      } catch (err) {
        this.log?.error({ err: (err as Error).message, attempt }, what);
        if (attempt >= RECORD_ATTEMPTS || !this.running) {
          this.unrecordedUntil = Math.max(this.unrecordedUntil, Date.now() + this.leaseMs);
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, CLAIM_RETRY_MS));
      }
    }
  }

  /** Runs one job: answers its result to record, or undefined when it failed (recorded here) or was lost. */
  private async runJob(row: JobRow, worker: string): Promise<{ id: string; result: string } | undefined> {
    const handler = this.handlers.get(row.kind) as JobHandler;
    const controller = new AbortController();
    this.active.set(row.id, controller);
    const renew = async (note?: string) => {
      if (controller.signal.aborted) throw controller.signal.reason;
      if (!(await this.store.heartbeat(row.id, worker, this.leaseMs, note))) {
        controller.abort(new JobLost("the job is no longer this worker's"));
        throw controller.signal.reason;
      }
    };
    const beat = setInterval(() => void renew().catch(() => undefined), Math.max(10, Math.floor(this.leaseMs / 3)));
    try {
      if (row.attempts > row.maxAttempts) throw new Error(`its lease ran out ${row.attempts - 1} times`);
      const job: Job = {
        id: row.id,
        kind: row.kind,
        project: row.project,
        principal: principalFrom(row.principal),
        input: JSON.parse(row.input),
        attempt: row.attempts,
        maxAttempts: row.maxAttempts,
      };
      const result = await handler.run(job, { progress: (note) => renew(note), signal: controller.signal });
      if (controller.signal.aborted) return undefined;
      return { id: row.id, result: JSON.stringify(result ?? null) };
    } catch (err) {
      if (controller.signal.aborted) return undefined;
      const message = (err as Error).message ?? String(err);
      const delay = handler.backoff?.(row.attempts) ?? this.backoffMs * 2 ** (row.attempts - 1);
      const retry =
        row.attempts < row.maxAttempts ? Date.now() + Math.round(Math.min(this.maxBackoffMs, delay)) : undefined;
      this.log?.warn(
        { job: row.id, kind: row.kind, attempt: row.attempts, err: message, dead: retry === undefined },
        'job failed',
      );
      await this.record('job failure not recorded', () => this.store.fail(row.id, worker, message, retry));
      // A retry sooner than the next poll is claimed on time (short backoffs: subscription deliveries).
      if (retry !== undefined && retry - Date.now() < this.pollMs)
        setTimeout(() => this.wake(), Math.max(0, retry - Date.now())).unref();
      return undefined;
    } finally {
      clearInterval(beat);
      this.active.delete(row.id);
    }
  }

  private async maybePurge(): Promise<void> {
    const now = Date.now();
    if (now - this.lastPurge < 60_000) return;
    this.lastPurge = now;
    await this.store.purge(now - this.retentionMs);
    for (const handler of this.handlers.values())
      if (handler.keepDoneMs !== undefined) await this.store.purgeDone(handler.kind, now - handler.keepDoneMs);
  }
}

/** A principal as JSON (its scopes' permission sets as lists). */
export function principalJson(principal: Principal): string {
  return JSON.stringify(principal, (_key, value: unknown) => (value instanceof Set ? { $set: [...value] } : value));
}

export function principalFrom(text: string): Principal {
  return JSON.parse(text, (_key, value: unknown) =>
    value && typeof value === 'object' && '$set' in value && Array.isArray((value as { $set: unknown }).$set)
      ? new Set((value as { $set: unknown[] }).$set)
      : value,
  ) as Principal;
}

function viewOf<I = unknown, R = unknown>(row: JobRow): JobView<I, R> {
  return {
    id: row.id,
    kind: row.kind,
    project: row.project,
    principal: principalFrom(row.principal),
    input: JSON.parse(row.input) as I,
    state: row.state,
    attempts: row.attempts,
    progress: row.progress,
    result: row.result === undefined ? undefined : (JSON.parse(row.result) as R),
    lastError: row.lastError,
    createdAt: row.createdAt,
    finishedAt: row.finishedAt,
  };
}
