import { randomUUID } from 'node:crypto';

/**
 * The rows of the durable job queue (src/jobs/ runs them): one `jobs` table in the database the
 * resources live in, so a job can be enqueued in the transaction of the write that causes it.
 * A worker claims a ready job with a lease (PostgreSQL: `FOR UPDATE SKIP LOCKED`, so processes
 * never wait on each other; SQLite: one UPDATE, atomic under the database's single writer),
 * renews it by heartbeats, and ends it done, queued again for a retry, or dead with its last
 * error. A lease that runs out makes the job claimable again (at-least-once). Times are epoch ms.
 * The SQL is the same on both backends but for the lock clause.
 */

export type JobState = 'queued' | 'running' | 'done' | 'dead';

/** The notice channel on which a database announces new jobs (PostgreSQL: a trigger on `jobs`). */
export const JOBS_NOTICE_CHANNEL = 'fhir_jobs';

export interface NewJob {
  kind: string;
  project: string;
  /** Who asked, as JSON (the work runs as them). */
  principal: string;
  /** The job's input, as JSON. */
  input: string;
  /** Attempts before the job is dead (default 5). */
  maxAttempts?: number;
  /** Not before this instant (default now). */
  runAt?: number;
  /** A chosen id (default a random UUID). */
  id?: string;
}

export interface JobRow {
  id: string;
  kind: string;
  project: string;
  principal: string;
  input: string;
  state: JobState;
  attempts: number;
  maxAttempts: number;
  runAt: number;
  leaseUntil?: number;
  worker?: string;
  progress?: string;
  result?: string;
  lastError?: string;
  createdAt: number;
  finishedAt?: number;
}

export interface JobStore {
  enqueue(job: NewJob): Promise<string>;
  /** Takes the oldest ready job of these kinds (queued and due, or running with its lease run out). */
  claim(kinds: string[], worker: string, leaseMs: number): Promise<JobRow | undefined>;
  /** Up to `limit` more ready jobs of one kind, claimed together (one statement: one commit for many short jobs). */
  claimMore(kind: string, worker: string, leaseMs: number, limit: number): Promise<JobRow[]>;
  /** Ends several of this worker's jobs done at once; answers the ids it ended. */
  completeMany(results: { id: string; result: string }[], worker: string): Promise<string[]>;
  /** Renews the lease (and notes progress); false when the job is no longer this worker's. */
  heartbeat(id: string, worker: string, leaseMs: number, progress?: string): Promise<boolean>;
  complete(id: string, worker: string, result: string): Promise<boolean>;
  /** Queued again at `retryAt`, or dead (retryAt undefined), with the error. */
  fail(id: string, worker: string, error: string, retryAt: number | undefined): Promise<boolean>;
  get(id: string): Promise<JobRow | undefined>;
  /** Removes a job whatever its state; its worker loses it at its next heartbeat. */
  remove(id: string): Promise<boolean>;
  /** Removes finished (done, dead) jobs that ended before `before`; answers how many. */
  purge(before: number): Promise<number>;
  /** Removes the jobs of one kind that ended done before `before` (short-lived records of many small jobs). */
  purgeDone(kind: string, before: number): Promise<number>;
  /** How many of a project's jobs of one kind are queued or running. */
  countActive(project: string, kind: string): Promise<number>;
  /** A project's newest jobs, newest first (of one kind when given). */
  list(project: string, options: { limit: number; kind?: string }): Promise<JobRow[]>;
}

export type Run = (sql: string, params: unknown[]) => Promise<Record<string, unknown>[]>;

/** The INSERT of a job, for a store's transaction to run on its own connection (the outbox). */
export async function insertJob(run: Run, job: NewJob, now = Date.now()): Promise<string> {
  const id = job.id ?? randomUUID();
  await run(
    `INSERT INTO jobs (id, kind, project, principal, input, state, attempts, max_attempts, run_at, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, 'queued', 0, ?, ?, ?, ?)`,
    [id, job.kind, job.project, job.principal, job.input, job.maxAttempts ?? 5, job.runAt ?? now, now, now],
  );
  return id;
}

export class SqlJobStore implements JobStore {
  constructor(
    private readonly write: Run,
    private readonly dialect: 'sqlite' | 'postgres',
    private readonly read: Run = write,
    private readonly now: () => number = Date.now,
  ) {}

  enqueue(job: NewJob): Promise<string> {
    return insertJob(this.write, job, this.now());
  }

  async claim(kinds: string[], worker: string, leaseMs: number): Promise<JobRow | undefined> {
    if (kinds.length === 0) return undefined;
    const now = this.now();
    const lock = this.dialect === 'postgres' ? ' FOR UPDATE SKIP LOCKED' : '';
    const rows = await this.write(
      `UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_until = ?, worker = ?, updated_at = ?
       WHERE id = (SELECT id FROM jobs WHERE kind IN (${kinds.map(() => '?').join(', ')})
         AND ((state = 'queued' AND run_at <= ?) OR (state = 'running' AND lease_until < ?))
         ORDER BY run_at, id LIMIT 1${lock})
       RETURNING *`,
      [now + leaseMs, worker, now, ...kinds, now, now],
    );
    return rows[0] ? jobFromRow(rows[0]) : undefined;
  }

  async claimMore(kind: string, worker: string, leaseMs: number, limit: number): Promise<JobRow[]> {
    if (limit <= 0) return [];
    const now = this.now();
    const lock = this.dialect === 'postgres' ? ' FOR UPDATE SKIP LOCKED' : '';
    const rows = await this.write(
      `UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_until = ?, worker = ?, updated_at = ?
       WHERE id IN (SELECT id FROM jobs WHERE kind = ?
         AND ((state = 'queued' AND run_at <= ?) OR (state = 'running' AND lease_until < ?))
         ORDER BY run_at, id LIMIT ?${lock})
       RETURNING *`,
      [now + leaseMs, worker, now, kind, now, now, limit],
    );
    return rows.map(jobFromRow);
  }

  async completeMany(results: { id: string; result: string }[], worker: string): Promise<string[]> {
    if (results.length === 0) return [];
    const now = this.now();
    const cases = results.map(() => 'WHEN ? THEN ?').join(' ');
    const rows = await this.write(
      `UPDATE jobs SET state = 'done', result = CASE id ${cases} END, lease_until = NULL, finished_at = ?, updated_at = ?
       WHERE id IN (${results.map(() => '?').join(', ')}) AND worker = ? AND state = 'running' RETURNING id`,
      [...results.flatMap((r) => [r.id, r.result]), now, now, ...results.map((r) => r.id), worker],
    );
    return rows.map((r) => String(r.id));
  }

  async heartbeat(id: string, worker: string, leaseMs: number, progress?: string): Promise<boolean> {
    const now = this.now();
    const rows = await this.write(
      `UPDATE jobs SET lease_until = ?, progress = COALESCE(?, progress), updated_at = ? WHERE id = ? AND worker = ? AND state = 'running' RETURNING id`,
      [now + leaseMs, progress ?? null, now, id, worker],
    );
    return rows.length === 1;
  }

  async complete(id: string, worker: string, result: string): Promise<boolean> {
    const now = this.now();
    const rows = await this.write(
      `UPDATE jobs SET state = 'done', result = ?, lease_until = NULL, finished_at = ?, updated_at = ? WHERE id = ? AND worker = ? AND state = 'running' RETURNING id`,
      [result, now, now, id, worker],
    );
    return rows.length === 1;
  }

  async fail(id: string, worker: string, error: string, retryAt: number | undefined): Promise<boolean> {
    const now = this.now();
    const rows =
      retryAt === undefined
        ? await this.write(
            `UPDATE jobs SET state = 'dead', last_error = ?, lease_until = NULL, finished_at = ?, updated_at = ? WHERE id = ? AND worker = ? AND state = 'running' RETURNING id`,
            [error, now, now, id, worker],
          )
        : await this.write(
            `UPDATE jobs SET state = 'queued', last_error = ?, lease_until = NULL, worker = NULL, run_at = ?, updated_at = ? WHERE id = ? AND worker = ? AND state = 'running' RETURNING id`,
            [error, retryAt, now, id, worker],
          );
    return rows.length === 1;
  }

  async get(id: string): Promise<JobRow | undefined> {
    const rows = await this.read('SELECT * FROM jobs WHERE id = ?', [id]);
    return rows[0] ? jobFromRow(rows[0]) : undefined;
  }

  async list(project: string, options: { limit: number; kind?: string }): Promise<JobRow[]> {
    const rows =
      options.kind === undefined
        ? await this.read('SELECT * FROM jobs WHERE project = ? ORDER BY created_at DESC, id LIMIT ?', [
            project,
            options.limit,
          ])
        : await this.read('SELECT * FROM jobs WHERE project = ? AND kind = ? ORDER BY created_at DESC, id LIMIT ?', [
            project,
            options.kind,
            options.limit,
          ]);
    return rows.map(jobFromRow);
  }

  async countActive(project: string, kind: string): Promise<number> {
    const rows = await this.read(
      `SELECT count(*) AS n FROM jobs WHERE project = ? AND kind = ? AND state IN ('queued', 'running')`,
      [project, kind],
    );
    return Number(rows[0]?.n ?? 0);
  }

  async remove(id: string): Promise<boolean> {
    return (await this.write('DELETE FROM jobs WHERE id = ? RETURNING id', [id])).length === 1;
  }

  async purgeDone(kind: string, before: number): Promise<number> {
    const purged = (
      await this.write(`DELETE FROM jobs WHERE kind = ? AND state = 'done' AND finished_at < ? RETURNING id`, [
        kind,
        before,
      ])
    ).length;
    if (purged > 0) await this.removeOrphanFiles();
    return purged;
  }

  async purge(before: number): Promise<number> {
    const purged = (
      await this.write(`DELETE FROM jobs WHERE state IN ('done', 'dead') AND finished_at < ? RETURNING id`, [before])
    ).length;
    if (purged > 0) await this.removeOrphanFiles();
    return purged;
  }

  /** Files of jobs that are gone (bulk export's, same migration) go with them. */
  private async removeOrphanFiles(): Promise<void> {
    await this.write('DELETE FROM bulk_files WHERE job_id NOT IN (SELECT id FROM jobs)', []);
  }
}

const optionalNumber = (value: unknown) => (value === null || value === undefined ? undefined : Number(value));
const optionalText = (value: unknown) => (value === null || value === undefined ? undefined : String(value));

function jobFromRow(row: Record<string, unknown>): JobRow {
  return {
    id: String(row.id),
    kind: String(row.kind),
    project: String(row.project),
    principal: String(row.principal),
    input: String(row.input),
    state: String(row.state) as JobState,
    attempts: Number(row.attempts),
    maxAttempts: Number(row.max_attempts),
    runAt: Number(row.run_at),
    leaseUntil: optionalNumber(row.lease_until),
    worker: optionalText(row.worker),
    progress: optionalText(row.progress),
    result: optionalText(row.result),
    lastError: optionalText(row.last_error),
    createdAt: Number(row.created_at),
    finishedAt: optionalNumber(row.finished_at),
  };
}
