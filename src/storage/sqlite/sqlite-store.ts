import { LocalNotices, type Notices } from '../notices';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { INDEX_KINDS, INDEX_TABLES, indexInsertSql, indexTableDdl, LEANER_LOOKUPS_MIGRATION, projectIndexMigration, type IndexRows } from '../index-schema';
import { yieldIfHeld } from '../../context/budget';
import { Mutex } from '../mutex';
import { ChangeMarksCache, CHANGES_NOTICE_CHANNEL, NotifiedChanges, type ChangeWatch, type FreshnessCheck } from '../change-watch';
import { EPHEMERAL_DDL, SqlEphemeralStore, type EphemeralStore } from '../ephemeral';
import { insertJob, jobsDdl, SqlJobStore, type JobStore } from '../jobs';
import { bulkDdl, SqlBulkStore, type BulkStore } from '../bulk';
import {
  changeFromRow,
  ifMatchHolds,
  optionalVersion,
  stampVersion,
  versionFromRow,
  type Change,
  type CurrentState,
  type ResourceStore,
  type StoredVersion,
  type StoreReader,
  type StoreTx,
  writtenVersion,
  methodOf,
  StorageFullError,
  StorageUnavailableError,
  type VersionRow,
  type WriteOp,
  type WriteResult,
} from '../store';

/**
 * The embedded default: one SQLite file under DATA_DIR, in WAL mode with synchronous=FULL so a
 * write is on disk before its 2xx leaves. Two connections: one writer, used by one transaction
 * at a time, and one reader, which sees only committed state (WAL gives it a snapshot per
 * statement), so a transaction that awaits between its statements is never seen half-done.
 * `:memory:` (tests) is a private temporary file, removed on close. All of this backend's SQL
 * is in this file and in index-schema.ts.
 *
 * better-sqlite3 answers synchronously, so a request that awaits this store never lets another
 * in by itself: a Bundle of 10,000 writes, or a measure reading 3,000 patients, held the event loop
 * for seconds. Every call first gives the loop back when the current turn has held it for a slice
 * (`yieldIfHeld`), inside a transaction too: other writers wait their turn on the mutex, readers
 * use the reader connection and see only what is committed.
 */

const MIGRATIONS: string[] = [
  `CREATE TABLE resource_versions (
     type TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL,
     last_updated TEXT NOT NULL, content TEXT,
     PRIMARY KEY (type, id, version)
   ) WITHOUT ROWID;
   CREATE TABLE resources (
     type TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL, deleted INTEGER NOT NULL,
     url TEXT, canonical_version TEXT, seq INTEGER NOT NULL,
     PRIMARY KEY (type, id)
   ) WITHOUT ROWID;
   CREATE INDEX resources_by_url ON resources (type, url) WHERE url IS NOT NULL;
   CREATE INDEX resources_by_seq ON resources (type, seq);
   CREATE TABLE change_marks (type TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID;`,
  // Search: every resource gets an integer row id that its index rows are keyed by.
  `ALTER TABLE resources ADD COLUMN rid INTEGER;
   CREATE TEMP TABLE rid_map AS SELECT type, id FROM resources ORDER BY seq;
   CREATE UNIQUE INDEX temp.rid_map_key ON rid_map (type, id);
   UPDATE resources SET rid = (SELECT m.rowid FROM rid_map m WHERE m.type = resources.type AND m.id = resources.id);
   DROP TABLE temp.rid_map;
   CREATE UNIQUE INDEX resources_by_rid ON resources (rid);
   CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
   ${indexTableDdl('sqlite')}`,
  // History: type- and system-level history read versions by time.
  `CREATE INDEX resource_versions_by_time ON resource_versions (last_updated);
   CREATE INDEX resource_versions_by_type_time ON resource_versions (type, last_updated);`,
  // Projects: every row belongs to one (the rows of before to the default project), and a resource's
  // key is (project, type, id). The two WITHOUT ROWID tables are rebuilt with their new keys.
  `CREATE TABLE resources_p (
     project TEXT NOT NULL, type TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL, deleted INTEGER NOT NULL,
     url TEXT, canonical_version TEXT, seq INTEGER NOT NULL, rid INTEGER,
     PRIMARY KEY (project, type, id)
   ) WITHOUT ROWID;
   INSERT INTO resources_p SELECT 'default', type, id, version, deleted, url, canonical_version, seq, rid FROM resources;
   DROP TABLE resources;
   ALTER TABLE resources_p RENAME TO resources;
   CREATE UNIQUE INDEX resources_by_rid ON resources (rid);
   CREATE INDEX resources_by_url ON resources (project, type, url) WHERE url IS NOT NULL;
   CREATE INDEX resources_by_seq ON resources (project, type, seq);
   CREATE TABLE resource_versions_p (
     project TEXT NOT NULL, type TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL,
     last_updated TEXT NOT NULL, content TEXT,
     PRIMARY KEY (project, type, id, version)
   ) WITHOUT ROWID;
   INSERT INTO resource_versions_p SELECT 'default', type, id, version, last_updated, content FROM resource_versions;
   DROP TABLE resource_versions;
   ALTER TABLE resource_versions_p RENAME TO resource_versions;
   CREATE INDEX resource_versions_by_time ON resource_versions (project, last_updated);
   CREATE INDEX resource_versions_by_type_time ON resource_versions (project, type, last_updated);
   CREATE TABLE change_marks_p (project TEXT NOT NULL, type TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (project, type)) WITHOUT ROWID;
   INSERT INTO change_marks_p SELECT 'default', type, seq FROM change_marks;
   DROP TABLE change_marks;
   ALTER TABLE change_marks_p RENAME TO change_marks;
   ${projectIndexMigration('sqlite')}`,
  // Short-lived shared state (authorization codes, replay marks, signing keys, password hashes).
  `${EPHEMERAL_DDL} WITHOUT ROWID;
   CREATE INDEX ephemeral_by_expiry ON ephemeral (expires_at);`,
  // The durable job queue (src/storage/jobs.ts) and bulk export's files (src/storage/bulk.ts).
  `${jobsDdl('sqlite')}
   ${bulkDdl('sqlite')}`,
  // The admin view lists a project's newest jobs.
  `CREATE INDEX jobs_by_project ON jobs (project, created_at)`,
  // (PostgreSQL's migration 8 notifies other processes of new jobs; one SQLite process wakes its own.)
  `SELECT 1`,
  // Fewer index lookups to keep up on every write (see src/storage/index-schema.ts).
  LEANER_LOOKUPS_MIGRATION,
  // How a client asked for each version (history's request.method); null for versions before.
  `ALTER TABLE resource_versions ADD COLUMN method TEXT`,
  // (PostgreSQL's migration 11 notifies other processes of moved change marks; over one SQLite file
  // they are found by PRAGMA data_version: see `changes`.)
  `SELECT 1`,
];

const CURRENT = `SELECT v.project, v.type, v.id, v.version, v.last_updated, v.content
  FROM resources r JOIN resource_versions v ON v.project = r.project AND v.type = r.type AND v.id = r.id AND v.version = r.version`;

type Statements = ReturnType<typeof readStatements>;

/** WAL pages (4 KiB) between two automatic checkpoints. */
const WAL_CHECKPOINT_PAGES = 20_000;

/** How often another process's commits to the file are looked for (FRESHNESS_CHECK=notify). */
export const POLL_MS = 50;

/** How long a write waits for another process's write lock before it fails (503). */
const WRITE_LOCK_WAIT_MS = 30_000;

/** SQLite's own most pages of a database (no cap). */
const UNLIMITED_PAGES = 4_294_967_294;

/** What the space probe allocates (and frees again): about what a small write needs. */
const SPACE_PROBE_BYTES = 65_536;

/** How many written resources between two `PRAGMA optimize`. */
const OPTIMIZE_EVERY = 2000;

function readStatements(db: Database.Database) {
  return {
    read: db.prepare(`${CURRENT} WHERE r.project = ? AND r.type = ? AND r.id = ?`),
    readVersion: db.prepare('SELECT * FROM resource_versions WHERE project = ? AND type = ? AND id = ? AND version = ?'),
    history: db.prepare('SELECT * FROM resource_versions WHERE project = ? AND type = ? AND id = ? ORDER BY version DESC'),
  };
}

function writeStatements(db: Database.Database) {
  return {
    current: db.prepare('SELECT rid, version, deleted FROM resources WHERE project = ? AND type = ? AND id = ?'),
    nextRid: db.prepare('SELECT COALESCE(MAX(rid), 0) + 1 AS rid FROM resources'),
    insertVersion: db.prepare('INSERT INTO resource_versions (project, type, id, version, last_updated, content, method) VALUES (?, ?, ?, ?, ?, ?, ?)'),
    bumpMark: db.prepare(
      `INSERT INTO change_marks (project, type, seq) VALUES (?, ?, 1)
       ON CONFLICT (project, type) DO UPDATE SET seq = seq + 1 RETURNING seq`,
    ),
    upsertCurrent: db.prepare(
      `INSERT INTO resources (project, type, id, version, deleted, url, canonical_version, seq, rid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (project, type, id) DO UPDATE SET version = excluded.version, deleted = excluded.deleted,
         url = excluded.url, canonical_version = excluded.canonical_version, seq = excluded.seq`,
    ),
    deleteIndex: INDEX_KINDS.map((kind) => db.prepare(`DELETE FROM ${INDEX_TABLES[kind].name} WHERE rid = ?`)),
    insertIndex: Object.fromEntries(INDEX_KINDS.map((kind) => [kind, db.prepare(indexInsertSql(kind))])) as Record<
      keyof IndexRows,
      Database.Statement
    >,
    getSetting: db.prepare('SELECT value FROM settings WHERE key = ?'),
    setSetting: db.prepare('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value'),
  };
}

export class SqliteStore implements ResourceStore {
  readonly kind = 'sqlite' as const;
  private readonly writer: Database.Database;
  private reader?: Database.Database;
  private readonly file: string;
  private readonly temporaryDir?: string;
  private readonly mutex = new Mutex();
  private reads?: Statements;
  private txReads?: Statements;
  private writes?: ReturnType<typeof writeStatements>;
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
    this.marksCache = new ChangeMarksCache(this.changes, async (project) =>
      cachedStatement(this.sql.reader, 'SELECT type, seq FROM change_marks WHERE project = ?').all(project) as { type: string; seq: number }[],
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
    this.writer.pragma(`max_page_count = ${bytes === undefined ? UNLIMITED_PAGES : Math.max(1, Math.ceil(bytes / pageSize))}`);
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
      runOn(this.writer, `INSERT INTO settings (key, value) VALUES ('space-probe', zeroblob(${SPACE_PROBE_BYTES})) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, []);
      runOn(this.writer, "DELETE FROM settings WHERE key = 'space-probe'", []);
    });
  }

  /**
   * What a failed write is reported as: a full disk (SQLITE_FULL, remembered until a write commits),
   * an I/O error (SQLITE_IOERR_*: the disk failing, or out of space where SQLite cannot tell) as
   * storage unavailable; anything else as it is.
   */
  private failure(err: unknown): unknown {
    const code = (err as { code?: unknown }).code;
    if (code === 'SQLITE_FULL') {
      this.full = true;
      return new StorageFullError((err as Error).message);
    }
    if (typeof code === 'string' && code.startsWith('SQLITE_IOERR')) return new StorageUnavailableError((err as Error).message);
    return err;
  }

  async migrate(options: { upTo?: number } = {}): Promise<void> {
    const db = this.writer;
    db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)');
    const apply = db.transaction(() => {
      const row = db.prepare('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations').get() as { v: number };
      MIGRATIONS.forEach((sql, index) => {
        const version = index + 1;
        if (version <= row.v || version > (options.upTo ?? Infinity)) return;
        db.exec(sql);
        db.prepare('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)').run(version, new Date().toISOString());
      });
    });
    apply.immediate();
    // A store left at an older schema (a test of a migration) is only closed again.
    if (options.upTo !== undefined && options.upTo < MIGRATIONS.length) return;
    // Statistics for tables that have none or grew a lot since (SQLite decides; cheap otherwise).
    db.exec('PRAGMA optimize=0x10002');
    // From here on the writer waits for another process's write lock in begin(), not in SQLite.
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
    if (!this.reads || !this.writes || !this.txReads || !this.reader) throw new Error('SqliteStore used before migrate()');
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
    const result = await this.locked(() => this.writeInTransaction(op));
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
      await this.begin();
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

  /**
   * BEGIN IMMEDIATE (the database's write lock), waiting for another process that holds it (WORKERS,
   * or a tool over the same file) without holding up this process: the connection's busy timeout
   * is 0 once migrated, so SQLite answers SQLITE_BUSY at once and the wait is a timer here, while
   * this process goes on answering reads. SQLite's own wait would block the event loop for as long.
   * Past WRITE_LOCK_WAIT_MS the write fails as storage unavailable (503, Retry-After).
   */
  private async begin(): Promise<void> {
    const deadline = Date.now() + WRITE_LOCK_WAIT_MS;
    for (let pause = 1; ; pause = Math.min(pause * 2, 20)) {
      try {
        this.writer.exec('BEGIN IMMEDIATE');
        return;
      } catch (err) {
        if ((err as { code?: string }).code !== 'SQLITE_BUSY') throw err;
        if (Date.now() >= deadline) throw new StorageUnavailableError(`another process held the database's write lock for ${WRITE_LOCK_WAIT_MS / 1000} s`);
      }
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }

  async transaction<T>(work: (tx: StoreTx) => Promise<T>): Promise<T> {
    await yieldIfHeld();
    return this.mutex.run(async () => {
      const db = this.writer;
      await this.begin();
      let active = true;
      let writes = 0;
      const reads = readerOf(this.sql.txReads, db);
      const tx: StoreTx = {
        ...reads,
        write: async (op) => {
          if (!active) throw new Error('transaction already ended');
          writes++;
          await yieldIfHeld();
          return this.writeInTransaction(op);
        },
        writeMany: async (ops) => {
          if (!active) throw new Error('transaction already ended');
          writes += ops.length;
          const results: WriteResult[] = [];
          for (const op of ops) {
            await yieldIfHeld();
            results.push(this.writeInTransaction(op));
          }
          return results;
        },
        replaceIndex: async (entries) => {
          if (!active) throw new Error('transaction already ended');
          writes += entries.length;
          for (const { project, type, rid, rows } of entries) {
            await yieldIfHeld();
            this.writeIndex(project, type, rid, rows, true);
          }
        },
        lock: async () => undefined,
        enqueue: async (job) => {
          if (!active) throw new Error('transaction already ended');
          return insertJob(async (sql, params) => runOn(db, sql, params), job);
        },
      };
      try {
        const result = await work(tx);
        active = false;
        db.exec('COMMIT');
        this.full = false;
        if (writes > 0) this.committed();
        this.noteWrites(writes);
        return result;
      } catch (err) {
        active = false;
        if (db.inTransaction) db.exec('ROLLBACK');
        throw this.failure(err);
      }
    });
  }

  /** The body of a write; runs inside an immediate transaction on the writer connection. */
  private writeInTransaction(op: WriteOp): WriteResult {
    const { writes } = this.sql;
    const row = writes.current.get(op.project, op.type, op.id) as { rid: number; version: number; deleted: number } | undefined;
    const current: CurrentState | undefined = row ? { versionId: row.version, deleted: row.deleted === 1 } : undefined;
    if (op.ifMatch !== undefined && !ifMatchHolds(op.ifMatch, current)) return { status: 'conflict', current };
    if (op.resource === null && (!current || current.deleted)) return { status: 'unchanged', current };
    const versionId = (current?.versionId ?? 0) + 1;
    const content = op.resource === null ? null : stampVersion(op.resource, versionId);
    writes.insertVersion.run(op.project, op.type, op.id, versionId, op.lastUpdated, content, methodOf(op));
    const { seq } = writes.bumpMark.get(op.project, op.type) as { seq: number };
    const rid = row?.rid ?? (writes.nextRid.get() as { rid: number }).rid;
    writes.upsertCurrent.run(op.project, op.type, op.id, versionId, op.resource === null ? 1 : 0, op.url ?? null, op.version ?? null, seq, rid);
    this.writeIndex(op.project, op.type, rid, op.index, row !== undefined);
    return { status: 'ok', version: writtenVersion(op, versionId), previous: current };
  }

  private writeIndex(project: string, type: string, rid: number, rows: IndexRows | null, replace: boolean): void {
    const { writes } = this.sql;
    if (replace) for (const statement of writes.deleteIndex) statement.run(rid);
    if (!rows) return;
    // Values bound in each table's column order (indexInsertSql): no array per row, ~600,000 rows for Synthea.
    const insert = writes.insertIndex;
    for (const r of rows.string) insert.string.run(project, type, r.param, rid, r.grp, r.norm, r.exact);
    for (const r of rows.token) insert.token.run(project, type, r.param, rid, r.grp, r.system ?? null, r.code ?? null, r.text ?? null);
    for (const r of rows.date) insert.date.run(project, type, r.param, rid, r.grp, r.low, r.high);
    for (const r of rows.number) insert.number.run(project, type, r.param, rid, r.grp, r.low, r.high);
    for (const r of rows.quantity) {
      insert.quantity.run(project, type, r.param, rid, r.grp, r.system ?? null, r.code ?? null, r.unit ?? null, r.low, r.high, r.canon_code ?? null, r.canon_low ?? null, r.canon_high ?? null);
    }
    for (const r of rows.reference) insert.reference.run(project, type, r.param, rid, r.grp, r.target_type ?? null, r.target_id ?? null, r.url ?? null, r.version ?? null);
    for (const r of rows.uri) insert.uri.run(project, type, r.param, rid, r.grp, r.value);
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

function open(file: string, durable: boolean): Database.Database {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  // A temporary test database needs no durability; a real one is on disk before a 2xx leaves.
  db.pragma(`synchronous = ${durable ? 'FULL' : 'OFF'}`);
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  // Checkpoint (copy the WAL into the database) every ~80 MB of WAL instead of SQLite's 4 MB: a
  // Bundle of a few hundred resources writes more than 4 MB, so each commit paid a checkpoint of its
  // own, and pages that consecutive commits both touch are now copied once. Loading the Synthea set
  // went from ~2,600 to ~3,900 resources/s (with a bigger WAL, not none: without checkpoints reads
  // through an ever longer WAL slowed it to ~3,200). The file is cut back to 128 MB after a checkpoint.
  db.pragma(`wal_autocheckpoint = ${WAL_CHECKPOINT_PAGES}`);
  db.pragma('journal_size_limit = 134217728');
  return db;
}

function readerOf(statements: Statements, db: Database.Database): StoreReader {
  return {
    read: async (project, type, id) => {
      await yieldIfHeld();
      return optionalVersion(statements.read.get(project, type, id) as VersionRow | undefined);
    },
    readVersion: async (project, type, id, versionId) => {
      await yieldIfHeld();
      return optionalVersion(statements.readVersion.get(project, type, id, versionId) as VersionRow | undefined);
    },
    history: async (project, type, id) => {
      await yieldIfHeld();
      return (statements.history.all(project, type, id) as VersionRow[]).map((row) => versionFromRow(row));
    },
    query: async <R extends object>(sql: string, params: readonly unknown[]) => {
      await yieldIfHeld();
      return cachedStatement(db, sql).all(...params) as R[];
    },
  };
}

/** Statements the search layer builds repeat in shape; preparing each text once saves the parse. */
const statementCache = new WeakMap<Database.Database, Map<string, Database.Statement>>();
const STATEMENT_CACHE_SIZE = 500;

/** Runs one statement on a connection: its rows when it answers any (a SELECT, a RETURNING). */
const runOn = (db: Database.Database, sql: string, params: unknown[]): Record<string, unknown>[] => {
  const statement = cachedStatement(db, sql);
  return statement.reader ? (statement.all(...params) as Record<string, unknown>[]) : (statement.run(...params), []);
};

function cachedStatement(db: Database.Database, sql: string): Database.Statement {
  let cache = statementCache.get(db);
  if (!cache) {
    cache = new Map();
    statementCache.set(db, cache);
  }
  let statement = cache.get(sql);
  if (!statement) {
    statement = db.prepare(sql);
    if (cache.size >= STATEMENT_CACHE_SIZE) cache.delete(cache.keys().next().value as string);
    cache.set(sql, statement);
  }
  return statement;
}
