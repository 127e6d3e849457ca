import { LocalNotices, type Notices } from '../notices';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { yieldIfHeld } from '../../context/budget';
import { Mutex } from '../mutex';
import {
  ChangeMarksCache,
  CHANGES_NOTICE_CHANNEL,
  NotifiedChanges,
  type ChangeWatch,
  type FreshnessCheck,
} from '../change-watch';
import { SqlEphemeralStore, type EphemeralStore } from '../ephemeral';
import { SqlJobStore, type JobStore } from '../jobs';
import { SqlBulkStore, type BulkStore } from '../bulk';
import { MIGRATIONS, LATEST_VERSION, runMigrations } from '../migrations';
import {
  changeFromRow,
  StorageFullError,
  type Change,
  type ResourceStore,
  type StoredVersion,
  type StoreTx,
  type VersionRow,
  type WriteOp,
  type WriteResult,
} from '../store';
import { beginImmediate, migrationTarget, open, writeFailure } from './connection';
import {
  cachedStatement,
  CURRENT,
  readerOf,
  readStatements,
  runOn,
  writeStatements,
  type ReadStatements,
  type WriteStatements,
} from './statements';
import { transactionOn, writeVersion, type TxState } from './writes';

/**
 * The embedded default: one SQLite file under DATA_DIR, in WAL mode with synchronous=FULL so a
 * write is on disk before its 2xx leaves. Two connections: one writer, used by one transaction
 * at a time, and one reader, which sees only committed state (WAL gives it a snapshot per
 * statement), so a transaction that awaits between its statements is never seen half-done.
 * `:memory:` (tests) is a private temporary file, removed on close. All of this backend's SQL
 * is in this folder, src/storage/migrations and index-schema.ts.
 *
 * better-sqlite3 answers synchronously, so a request that awaits this store never lets another
 * in by itself: a Bundle of 10,000 writes, or a measure reading 3,000 patients, held the event loop
 * for seconds. Every call first gives the loop back when the current turn has held it for a slice
 * (`yieldIfHeld`), inside a transaction too: other writers wait their turn on the mutex, readers
 * use the reader connection and see only what is committed.
 */

/** How often another process's commits to the file are looked for (FRESHNESS_CHECK=notify). */
export const POLL_MS = 50;

/** SQLite's own most pages of a database (no cap). */
const UNLIMITED_PAGES = 4_294_967_294;

/** What the space probe allocates (and frees again): about what a small write needs. */
const SPACE_PROBE_BYTES = 65_536;

/** How many written resources between two `PRAGMA optimize`. */
const OPTIMIZE_EVERY = 2000;

export class SqliteStore implements ResourceStore {
  readonly kind = 'sqlite' as const;
  private readonly writer: Database.Database;
  private reader?: Database.Database;
  private readonly file: string;
  private readonly temporaryDir?: string;
  private readonly mutex = new Mutex();
  private reads?: ReadStatements;
  private txReads?: ReadStatements;
  private writes?: WriteStatements;
  /** Writes on the writer connection, in turn with the store's other writes; reads on the reader. */
  readonly ephemeral: EphemeralStore = new SqlEphemeralStore(
    (sql, params) => this.locked(() => runOn(this.writer, sql, params)),
    async (sql, params) => cachedStatement(this.sql.reader, sql).all(...params) as Record<string, unknown>[],
  );

  /** Job rows: written on the writer connection in turn with the store's other writes (so a claim is atomic), read on the reader. */
  readonly jobs: JobStore = new SqlJobStore(
    (sql, params) => this.locked(() => runOn(this.writer, sql, params)),
    'sqlite',
    async (sql, params) => cachedStatement(this.sql.reader, sql).all(...params) as Record<string, unknown>[],
  );

  /** In-process, or between the workers of one server (ClusterNotices); other processes' commits are found by the file. */
  readonly notices: Notices;

  readonly bulk: BulkStore = new SqlBulkStore(
    (sql, params) => this.locked(() => runOn(this.writer, sql, params)),
    async (sql, params) => cachedStatement(this.sql.reader, sql).all(...params) as Record<string, unknown>[],
  );

  /** A write failed for want of space (SQLITE_FULL) and none has succeeded since. */
  private full = false;
  /** The most the database may grow to (SQLITE_MAX_SIZE_MB; tests), or unlimited. */
  private maxSizeBytes?: number;

  constructor(dataDir: string, options: { freshness?: FreshnessCheck; notices?: Notices; maxSizeBytes?: number } = {}) {
    this.maxSizeBytes = options.maxSizeBytes;
    this.notices = options.notices ?? new LocalNotices();
    // Only other workers need to hear of this process's commits (in one process the watch moves itself).
    this.relaysCommits = options.notices !== undefined;
    if (options.freshness === 'request') {
      const dataVersion = () => this.dataVersion();
      const everyRequest: ChangeWatch = {
        get epoch() {
          return dataVersion();
        },
      };
      this.changes = everyRequest;
    } else {
      this.notified = new NotifiedChanges();
      this.changes = this.notified;
    }
    this.marksCache = new ChangeMarksCache(
      this.changes,
      async (project) =>
        cachedStatement(this.sql.reader, 'SELECT type, seq FROM change_marks WHERE project = ?').all(project) as {
          type: string;
          seq: number;
        }[],
    );
    if (dataDir === ':memory:') {
      this.temporaryDir = mkdtempSync(join(tmpdir(), 'fhir-sqlite-'));
      this.file = join(this.temporaryDir, 'fhir.sqlite');
    } else {
      mkdirSync(dataDir, { recursive: true });
      this.file = join(dataDir, 'fhir.sqlite');
    }
    this.writer = open(this.file, this.temporaryDir === undefined);
    this.limitSize(this.maxSizeBytes);
  }

  /**
   * Caps the database at `bytes` (rounded to whole pages; never below its present size), or lifts
   * the cap: beyond it a write fails as on a full disk (SQLITE_FULL), which is how the tests make one.
   */
  limitSize(bytes: number | undefined): void {
    this.maxSizeBytes = bytes;
    const pageSize = this.writer.pragma('page_size', { simple: true }) as number;
    this.writer.pragma(
      `max_page_count = ${bytes === undefined ? UNLIMITED_PAGES : Math.max(1, Math.ceil(bytes / pageSize))}`,
    );
  }

  /**
   * After a write failed for want of space: a small write of its own (64 KiB allocated and freed in
   * one committed transaction, so both new pages and the write-ahead log's append are tried), which
   * clears the state when it succeeds. Readiness asks this, so a server whose disk filled leaves the
   * load balancer and comes back once space is freed, even with no client write to notice it.
   */
  async writable(): Promise<void> {
    if (!this.full) return;
    await this.locked(() => {
      runOn(
        this.writer,
        `INSERT INTO settings (key, value) VALUES ('space-probe', zeroblob(${SPACE_PROBE_BYTES})) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
        [],
      );
      runOn(this.writer, "DELETE FROM settings WHERE key = 'space-probe'", []);
    });
  }

  /**
   * What a failed write is reported as (see writeFailure); a full disk is remembered until a write commits.
   */
  private failure(err: unknown): unknown {
    const failure = writeFailure(err);
    if (failure instanceof StorageFullError) this.full = true;
    return failure;
  }

  async migrate(options: { upTo?: number } = {}): Promise<void> {
    const db = this.writer;
    await runMigrations(migrationTarget(db), MIGRATIONS, options);
    // A store left at an older schema (a test of a migration) is only closed again.
    if (options.upTo !== undefined && options.upTo < LATEST_VERSION) return;
    // Statistics for tables that have none or grew a lot since (SQLite decides; cheap otherwise).
    db.exec('PRAGMA optimize=0x10002');
    // From here on the writer waits for another process's write lock in beginImmediate(), not in SQLite.
    db.pragma('busy_timeout = 0');
    this.reader = open(this.file, this.temporaryDir === undefined);
    this.reads = readStatements(this.reader);
    this.txReads = readStatements(db);
    this.writes = writeStatements(db);
    if (this.notified) {
      const notified = this.notified;
      // Another worker of this server says it committed (at once; the file is looked at as well).
      if (this.relaysCommits) void this.notices.listen(CHANGES_NOTICE_CHANNEL, () => notified.changed());
      const reader = this.reader;
      let seen = this.dataVersion();
      notified.every(POLL_MS, () => {
        if (!reader.open) return;
        const now = this.dataVersion();
        if (now !== seen) notified.changed();
        seen = now;
      });
    }
  }

  private get sql() {
    if (!this.reads || !this.writes || !this.txReads || !this.reader)
      throw new Error('SqliteStore used before migrate()');
    return { reads: this.reads, txReads: this.txReads, writes: this.writes, reader: this.reader };
  }

  read(project: string, type: string, id: string): Promise<StoredVersion | undefined> {
    return readerOf(this.sql.reads, this.sql.reader).read(project, type, id);
  }

  readVersion(project: string, type: string, id: string, versionId: number): Promise<StoredVersion | undefined> {
    return readerOf(this.sql.reads, this.sql.reader).readVersion(project, type, id, versionId);
  }

  history(project: string, type: string, id: string): Promise<StoredVersion[]> {
    return readerOf(this.sql.reads, this.sql.reader).history(project, type, id);
  }

  query<R extends object>(sql: string, params: readonly unknown[]): Promise<R[]> {
    return readerOf(this.sql.reads, this.sql.reader).query<R>(sql, params);
  }

  async write(op: WriteOp): Promise<WriteResult> {
    await yieldIfHeld();
    const result = await this.locked(() => writeVersion(this.sql.writes, op));
    this.committed();
    this.noteWrites(1);
    return result;
  }

  /**
   * `work` in a write transaction of its own (BEGIN IMMEDIATE ... COMMIT), in turn with this
   * store's other writes; rolled back when it throws.
   */
  private async locked<T>(work: () => T): Promise<T> {
    await yieldIfHeld();
    return this.mutex.run(async () => {
      const db = this.writer;
      await beginImmediate(db);
      try {
        const result = work();
        db.exec('COMMIT');
        this.full = false;
        return result;
      } catch (err) {
        if (db.inTransaction) db.exec('ROLLBACK');
        throw this.failure(err);
      }
    });
  }

  async transaction<T>(work: (tx: StoreTx) => Promise<T>): Promise<T> {
    await yieldIfHeld();
    return this.mutex.run(async () => {
      const db = this.writer;
      await beginImmediate(db);
      const state: TxState = { active: true, writes: 0 };
      const tx = transactionOn(db, { writes: this.sql.writes, reads: this.sql.txReads }, state);
      try {
        const result = await work(tx);
        state.active = false;
        db.exec('COMMIT');
        this.full = false;
        if (state.writes > 0) this.committed();
        this.noteWrites(state.writes);
        return result;
      } catch (err) {
        state.active = false;
        if (db.inTransaction) db.exec('ROLLBACK');
        throw this.failure(err);
      }
    });
  }

  /**
   * Every request that may reuse answers asks for these (terminology's freshness check): read
   * again only when the watch says some commit may have moved them (see ChangeWatch).
   */
  changeMarks(project: string, types: string[]): Promise<Map<string, number>> {
    return this.marksCache.marks(project, types);
  }

  private readonly marksCache: ChangeMarksCache;

  /**
   * `request`: the reader's `PRAGMA data_version`, which moves with every commit but its own (it
   * makes none): this process's writer and other processes alike; a cheap pragma per use.
   * `notify`: this process's commits move it at once; the same pragma, read every POLL_MS, tells of
   * other processes' commits (another worker, an import), so a use costs nothing.
   */
  readonly changes: ChangeWatch;
  private readonly notified?: NotifiedChanges;

  /** A commit of resources: this process's watch moves before the write is acknowledged; other workers (if any) are told. */
  private committed(): void {
    if (!this.notified) return;
    this.notified.changed();
    if (this.relaysCommits) void this.notices.publish(CHANGES_NOTICE_CHANNEL, '');
  }

  private readonly relaysCommits: boolean;

  /** Moves with every commit to the file but the reader's own (it makes none). */
  private dataVersion(): number {
    return cachedStatement(this.sql.reader, 'PRAGMA data_version').pluck().get() as number;
  }

  async changesSince(project: string, type: string, since: number): Promise<Change[]> {
    await yieldIfHeld();
    const rows = cachedStatement(
      this.sql.reader,
      `${CURRENT.replace('SELECT v.project', 'SELECT r.seq, v.project')} WHERE r.project = ? AND r.type = ? AND r.seq > ? ORDER BY r.seq`,
    ).all(project, type, since) as (VersionRow & { seq: number })[];
    return rows.map((row) => changeFromRow(row, row.seq));
  }

  async optimize(): Promise<void> {
    await this.locked(() => {
      this.writer.exec('ANALYZE');
      this.writesSinceOptimize = 0;
    });
  }

  /** Writes since the planner's statistics were last looked at; `PRAGMA optimize` every so often. */
  private writesSinceOptimize = 0;

  private noteWrites(count: number): void {
    this.writesSinceOptimize += count;
    if (this.writesSinceOptimize < OPTIMIZE_EVERY) return;
    this.writesSinceOptimize = 0;
    // Cheap when nothing changed much; analyzes the tables that grew (SQLite's own rule). Another
    // process writing just now makes it wait for the next round: the write itself is done.
    try {
      this.writer.exec('PRAGMA optimize');
    } catch (err) {
      // The statistics need space too; with the disk full they wait.
      const code = (err as { code?: string }).code;
      if (code !== 'SQLITE_BUSY' && code !== 'SQLITE_FULL') throw err;
    }
  }

  async getSetting(key: string): Promise<string | undefined> {
    return (this.sql.writes.getSetting.get(key) as { value: string } | undefined)?.value;
  }

  async setSetting(key: string, value: string): Promise<void> {
    await this.locked(() => this.sql.writes.setSetting.run(key, value));
  }

  async close(): Promise<void> {
    this.notified?.close();
    // Waits for the transaction in progress, if any.
    await this.mutex.run(() => {
      if (!this.writer.open || !this.reads) return;
      try {
        this.writer.exec('PRAGMA optimize');
      } catch (err) {
        // PRAGMA optimize is only statistics: a full disk, or another process holding the write
        // lock (the writer waits for no lock inside SQLite), must not make the shutdown fail.
        if (!OPTIONAL_WORK_SKIPPED_ON.has((err as { code?: string }).code ?? '')) throw err;
      }
    });
    if (this.reader?.open) this.reader.close();
    if (this.writer.open) this.writer.close();
    if (this.temporaryDir) rmSync(this.temporaryDir, { recursive: true, force: true });
  }
}

/** SQLite errors on which close() leaves its statistics for the next start. */
const OPTIONAL_WORK_SKIPPED_ON: ReadonlySet<string> = new Set(['SQLITE_FULL', 'SQLITE_BUSY', 'SQLITE_LOCKED']);
