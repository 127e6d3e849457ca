import pg from 'pg';
import { fhirError } from '../../fhir/errors';
import { EPHEMERAL_DDL, SqlEphemeralStore, type EphemeralStore } from '../ephemeral';
import { insertJob, JOBS_NOTICE_CHANNEL, jobsDdl, SqlJobStore, type JobStore } from '../jobs';
import { bulkDdl, SqlBulkStore, type BulkStore } from '../bulk';
import { PgNotices } from './pg-notices';
import { ChangeMarksCache, CHANGES_NOTICE_CHANNEL, CheckEveryTime, NotifiedChanges, type ChangeWatch, type FreshnessCheck } from '../change-watch';
import { INDEX_KINDS, INDEX_TABLES, indexTableDdl, LEANER_LOOKUPS_MIGRATION, projectIndexMigration, type IndexRows, type IndexTable } from '../index-schema';
import {
  changeFromRow,
  ifMatchHolds,
  optionalVersion,
  stampVersion,
  StorageFullError,
  StorageTimeoutError,
  StorageUnavailableError,
  versionFromRow,
  type Change,
  type CurrentState,
  type ResourceStore,
  type StoredVersion,
  type StoreReader,
  type StoreTx,
  writtenVersion,
  methodOf,
  type VersionRow,
  type WriteOp,
  type WriteResult,
} from '../store';

/**
 * PostgreSQL through DATABASE_URL, for several stateless server processes over one database.
 * Every query is parameterised; all of this backend's SQL is in this file and index-schema.ts.
 * A write locks the resource's row (SELECT ... FOR UPDATE), so writers of one resource queue
 * instead of colliding; two creates of one new id collide on the version's primary key and the
 * loser's transaction runs again.
 */

const MIGRATIONS: string[] = [
  `CREATE TABLE resource_versions (
     type TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL,
     last_updated TIMESTAMPTZ NOT NULL, content TEXT,
     PRIMARY KEY (type, id, version)
   );
   CREATE TABLE resources (
     type TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL, deleted BOOLEAN NOT NULL,
     url TEXT, canonical_version TEXT, seq BIGINT NOT NULL,
     PRIMARY KEY (type, id)
   );
   CREATE INDEX resources_by_url ON resources (type, url) WHERE url IS NOT NULL;
   CREATE INDEX resources_by_seq ON resources (type, seq);
   CREATE TABLE change_marks (type TEXT PRIMARY KEY, seq BIGINT NOT NULL);`,
  // Search: every resource gets an integer row id that its index rows are keyed by.
  `CREATE SEQUENCE resource_rid_seq;
   ALTER TABLE resources ADD COLUMN rid BIGINT;
   UPDATE resources SET rid = nextval('resource_rid_seq');
   ALTER TABLE resources ALTER COLUMN rid SET NOT NULL;
   CREATE UNIQUE INDEX resources_by_rid ON resources (rid);
   CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
   ${indexTableDdl('postgres')}`,
  // History: type- and system-level history read versions by time.
  `CREATE INDEX resource_versions_by_time ON resource_versions (last_updated);
   CREATE INDEX resource_versions_by_type_time ON resource_versions (type, last_updated);`,
  // Projects: every row belongs to one (the rows of before to the default project), and a resource's
  // key is (project, type, id).
  `ALTER TABLE resources ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
   ALTER TABLE resources DROP CONSTRAINT resources_pkey;
   ALTER TABLE resources ADD PRIMARY KEY (project, type, id);
   DROP INDEX resources_by_url;
   DROP INDEX resources_by_seq;
   CREATE INDEX resources_by_url ON resources (project, type, url) WHERE url IS NOT NULL;
   CREATE INDEX resources_by_seq ON resources (project, type, seq);
   ALTER TABLE resource_versions ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
   ALTER TABLE resource_versions DROP CONSTRAINT resource_versions_pkey;
   ALTER TABLE resource_versions ADD PRIMARY KEY (project, type, id, version);
   DROP INDEX resource_versions_by_time;
   DROP INDEX resource_versions_by_type_time;
   CREATE INDEX resource_versions_by_time ON resource_versions (project, last_updated);
   CREATE INDEX resource_versions_by_type_time ON resource_versions (project, type, last_updated);
   ALTER TABLE change_marks ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
   ALTER TABLE change_marks DROP CONSTRAINT change_marks_pkey;
   ALTER TABLE change_marks ADD PRIMARY KEY (project, type);
   ${projectIndexMigration('postgres')}
   ALTER TABLE resources ALTER COLUMN project DROP DEFAULT;
   ALTER TABLE resource_versions ALTER COLUMN project DROP DEFAULT;
   ALTER TABLE change_marks ALTER COLUMN project DROP DEFAULT;
   ${INDEX_KINDS.map((kind) => `ALTER TABLE ${INDEX_TABLES[kind].name} ALTER COLUMN project DROP DEFAULT;`).join('\n')}`,
  // Short-lived shared state (authorization codes, replay marks, signing keys, password hashes).
  `${EPHEMERAL_DDL};
   CREATE INDEX ephemeral_by_expiry ON ephemeral (expires_at);`,
  // The durable job queue (src/storage/jobs.ts) and bulk export's files (src/storage/bulk.ts).
  `${jobsDdl('postgres')}
   ${bulkDdl('postgres')}`,
  // The admin view lists a project's newest jobs.
  `CREATE INDEX jobs_by_project ON jobs (project, created_at)`,
  // New jobs wake the idle workers of every process (src/jobs/queue.ts listens): NOTIFY from the
  // inserting statement itself, delivered when its transaction commits; no round trip of its own.
  `CREATE FUNCTION ${JOBS_NOTICE_CHANNEL}_notify() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN PERFORM pg_notify('${JOBS_NOTICE_CHANNEL}', ''); RETURN NULL; END $$;
   CREATE TRIGGER jobs_inserted AFTER INSERT ON jobs FOR EACH STATEMENT EXECUTE FUNCTION ${JOBS_NOTICE_CHANNEL}_notify();`,
  // Fewer index lookups to keep up on every write (see src/storage/index-schema.ts).
  LEANER_LOOKUPS_MIGRATION,
  // How a client asked for each version (history's request.method); null for versions before.
  `ALTER TABLE resource_versions ADD COLUMN method TEXT`,
  // Every process learns of stored content changing (FRESHNESS_CHECK=notify, src/storage/change-watch.ts):
  // NOTIFY from the statement that moves a change mark, delivered when its transaction commits
  // (one per transaction: PostgreSQL folds identical notices).
  `CREATE FUNCTION ${CHANGES_NOTICE_CHANNEL}_notify() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN PERFORM pg_notify('${CHANGES_NOTICE_CHANNEL}', ''); RETURN NULL; END $$;
   CREATE TRIGGER change_marks_moved AFTER INSERT OR UPDATE ON change_marks FOR EACH STATEMENT EXECUTE FUNCTION ${CHANGES_NOTICE_CHANNEL}_notify();`,
];

/**
 * With notices, the marks are still read again this often (a safety net: a notice the listening
 * connection lost without noticing).
 */
const SAFETY_CHECK_MS = 10_000;

/** Any number; only ever taken by this server's migrations. */
const MIGRATION_LOCK = 7_364_221;
/** How often a transaction that lost a race (deadlock, serialisation, a duplicate new id) runs again. */
/** A statement's time when the configuration gives none (OPERATION_TIMEOUT_MS's default). */
const DEFAULT_STATEMENT_TIMEOUT_MS = 30_000;
/** How much longer than the database's own timeout the client waits for any answer. */
const CLIENT_GRACE_MS = 2000;
/** A client-side wait for statements that may run long (pg takes 0 as "the client's default"). */
const UNBOUNDED_MS = 24 * 3_600_000;

/** A query the client waits for as long as it takes (pg reads `query_timeout` per query; its types omit it). */
function longQuery(text: string, values: unknown[] = []): pg.QueryConfig {
  const config: pg.QueryConfig & { query_timeout: number } = { text, values, query_timeout: UNBOUNDED_MS };
  return config;
}
const MAX_ATTEMPTS = 8;

const CURRENT = `SELECT v.project, v.type, v.id, v.version, v.last_updated, v.content
  FROM resources r JOIN resource_versions v ON v.project = r.project AND v.type = r.type AND v.id = r.id AND v.version = r.version`;

type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

export class PostgresStore implements ResourceStore {
  readonly kind = 'postgres' as const;
  private readonly pool: pg.Pool;
  readonly ephemeral: EphemeralStore = new SqlEphemeralStore((sql, params) => this.run<Record<string, unknown>>(this.pool, sql, params));

  readonly jobs: JobStore = new SqlJobStore((sql, params) => this.run<Record<string, unknown>>(this.pool, sql, params), 'postgres');

  readonly bulk: BulkStore = new SqlBulkStore((sql, params) => this.run<Record<string, unknown>>(this.pool, sql, params));

  readonly notices: PgNotices;

  /** See ChangeWatch: with `notify`, told by this process's commits and by the others' notices. */
  readonly changes: ChangeWatch;
  private readonly notified?: NotifiedChanges;
  private readonly marksCache: ChangeMarksCache;

  /** The sessions' statement_timeout; a query the database answers nothing to fails CLIENT_GRACE_MS later. */
  private readonly statementTimeoutMs: number;

  constructor(connectionString: string, options: { max?: number; freshness?: FreshnessCheck; statementTimeoutMs?: number } = {}) {
    this.statementTimeoutMs = options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS;
    if (options.freshness === 'request') {
      this.changes = new CheckEveryTime();
    } else {
      this.notified = new NotifiedChanges(() => this.notices.isListening(CHANGES_NOTICE_CHANNEL));
      this.changes = this.notified;
    }
    this.marksCache = new ChangeMarksCache(this.changes, async (project) =>
      (await this.run<{ type: string; seq: string }>(this.pool, 'SELECT type, seq FROM change_marks WHERE project = ?', [project])).map((row) => ({ type: row.type, seq: Number(row.seq) })),
    );
    this.notices = new PgNotices(connectionString, async (channel, payload) => {
      await this.run(this.pool, 'SELECT pg_notify(?, ?)', [channel, payload]);
    });
    // application_name names this server's sessions in pg_stat_activity (a name in the URL wins);
    // keepAlive notices a peer that vanished without a word (a failover, a dropped route).
    // statement_timeout: a statement slower than the request's budget (a lock another session holds,
    // a plan gone wrong) is cancelled by the database and the request answers 503 instead of
    // waiting. query_timeout: a database that answers nothing (a black-holed route) would hold the
    // request until TCP gives up, minutes later; the client stops waiting a little after the
    // database would have cancelled. idle_in_transaction_session_timeout: a transaction this process
    // left open (stuck between two statements) does not keep its locks for ever.
    this.pool = new pg.Pool({
      connectionString,
      max: options.max ?? 10,
      connectionTimeoutMillis: 3000,
      application_name: 'fhir-tx-server',
      keepAlive: true,
      statement_timeout: this.statementTimeoutMs,
      query_timeout: this.statementTimeoutMs + CLIENT_GRACE_MS,
      idle_in_transaction_session_timeout: 2 * this.statementTimeoutMs + CLIENT_GRACE_MS,
    });
    // An idle client losing its connection must not take the process down; the next query reconnects.
    this.pool.on('error', () => undefined);
  }

  async migrate(options: { upTo?: number } = {}): Promise<void> {
    await this.transactionOnce(async (client) => {
      // Migrations (an index over a large table) and the wait for another process migrating take
      // as long as they take: no statement timeout here.
      await client.query(longQuery('SET LOCAL statement_timeout = 0'));
      await client.query(longQuery('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]));
      await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL)');
      const { rows } = await client.query<{ v: number }>('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations');
      for (const [index, sql] of MIGRATIONS.entries()) {
        const version = index + 1;
        if (version <= rows[0].v || version > (options.upTo ?? Infinity)) continue;
        await client.query(longQuery(sql));
        await client.query('INSERT INTO schema_migrations (version, applied_at) VALUES ($1, now())', [version]);
      }
    });
    if (this.notified && (options.upTo === undefined || options.upTo >= MIGRATIONS.length)) {
      const notified = this.notified;
      // Until the connection listens, the watch trusts nothing (every use reads the marks).
      this.unlistenChanges = await this.notices.listen(CHANGES_NOTICE_CHANNEL, () => notified.changed(), () => notified.changed());
      notified.every(SAFETY_CHECK_MS, () => notified.changed());
    }
  }

  private unlistenChanges?: () => void;

  private reader(): StoreReader {
    return readerOf(<R extends object>(sql: string, params: readonly unknown[]) => this.run<R>(this.pool, sql, params));
  }

  read(project: string, type: string, id: string): Promise<StoredVersion | undefined> {
    return this.reader().read(project, type, id);
  }

  readVersion(project: string, type: string, id: string, versionId: number): Promise<StoredVersion | undefined> {
    return this.reader().readVersion(project, type, id, versionId);
  }

  history(project: string, type: string, id: string): Promise<StoredVersion[]> {
    return this.reader().history(project, type, id);
  }

  query<R extends object>(sql: string, params: readonly unknown[]): Promise<R[]> {
    return this.reader().query<R>(sql, params);
  }

  write(op: WriteOp): Promise<WriteResult> {
    return this.transaction((tx) => tx.write(op));
  }

  /** `work` may run more than once: when the transaction loses a race it is rolled back and retried. */
  async transaction<T>(work: (tx: StoreTx) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.transactionOnce((client) => work(this.txOf(client)));
      } catch (err) {
        if (!isRaceLost(err)) throw translate(err, this.statementTimeoutMs);
        if (attempt >= MAX_ATTEMPTS) throw fhirError('ERR_WRITE_CONFLICT', {});
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 2 ** attempt));
      }
    }
  }

  private txOf(client: pg.PoolClient): StoreTx {
    const run = <R extends object>(sql: string, params: readonly unknown[]) => this.run<R>(client, sql, params);
    return {
      ...readerOf(run),
      write: (op) => writeIn(client, op),
      writeMany: (ops) => writeManyIn(client, ops),
      replaceIndex: (entries) => writeIndex(client, { replace: entries.map((e) => e.rid), rows: entries }),
      lock: async (key) => {
        await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [key]);
      },
      enqueue: (job) => insertJob((sql, params) => run<Record<string, unknown>>(sql, params), job),
    };
  }

  changeMarks(project: string, types: string[]): Promise<Map<string, number>> {
    return this.marksCache.marks(project, types);
  }

  async changesSince(project: string, type: string, since: number): Promise<Change[]> {
    const rows = await this.run<VersionRow & { seq: string }>(
      this.pool,
      `${CURRENT.replace('SELECT v.project', 'SELECT r.seq, v.project')} WHERE r.project = ? AND r.type = ? AND r.seq > ? ORDER BY r.seq`,
      [project, type, since],
    );
    return rows.map((row) => changeFromRow(row, Number(row.seq)));
  }

  /** autovacuum keeps statistics current as data grows; after a bulk load it is asked at once. */
  async optimize(): Promise<void> {
    // Over a large database ANALYZE outlasts a request's statement timeout; it is no request.
    await this.transactionOnce(async (client) => {
      await client.query('SET LOCAL statement_timeout = 0');
      await client.query(longQuery('ANALYZE'));
    });
  }

  /** A full disk is the database server's to report (disk_full, answered 507 per write). */
  async writable(): Promise<void> {}

  async getSetting(key: string): Promise<string | undefined> {
    const rows = await this.run<{ value: string }>(this.pool, 'SELECT value FROM settings WHERE key = ?', [key]);
    return rows[0]?.value;
  }

  async setSetting(key: string, value: string): Promise<void> {
    await this.run(this.pool, 'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value', [key, value]);
  }

  async close(): Promise<void> {
    this.notified?.close();
    this.unlistenChanges?.();
    await this.notices.close();
    await this.pool.end();
  }

  private async run<R extends object>(on: Queryable, sql: string, params: readonly unknown[]): Promise<R[]> {
    try {
      return (await on.query<R & pg.QueryResultRow>(numbered(sql), params as unknown[])).rows;
    } catch (err) {
      throw translate(err, this.statementTimeoutMs);
    }
  }

  private async transactionOnce<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    // The pool listens for errors only on idle clients. A checked-out client whose connection is
    // lost between two queries emits 'error' with nobody listening, which ends the process; here the
    // loss is noted, the transaction fails (503: committed or not, never half) and the client is dropped.
    let lost: Error | undefined;
    const onError = (err: Error) => {
      lost = err;
    };
    const client = await this.checkout(onError);
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      // Before the caller acknowledges anything: this process's next read sees the commit.
      this.notified?.changed();
      return result;
    } catch (err) {
      const failure = translate(err, this.statementTimeoutMs);
      // A client whose database went silent would wait out another read timeout for the ROLLBACK;
      // it is destroyed instead, which ends the transaction on the database's side.
      if (!(failure instanceof StorageTimeoutError && !isCancelled(err))) await client.query('ROLLBACK').catch(() => undefined);
      if (failure instanceof StorageUnavailableError) lost ??= failure;
      throw failure;
    } finally {
      client.removeListener('error', onError);
      // Released with an error, a client is destroyed rather than handed to the next request.
      client.release(lost);
    }
  }

  /**
   * A client from the pool with `onError` listening from the instant it is handed over: in the
   * pool's own callback, not after a promise settles, because the bytes that make a new client ready
   * can carry its termination too, and they are read before any promise continuation runs.
   */
  private checkout(onError: (err: Error) => void): Promise<pg.PoolClient> {
    return new Promise((resolve, reject) => {
      this.pool.connect((err, client) => {
        if (err || !client) return reject(translate(err, this.statementTimeoutMs));
        client.on('error', onError);
        resolve(client);
      });
    });
  }
}

async function writeIn(client: pg.PoolClient, op: WriteOp): Promise<WriteResult> {
  const found = await client.query<{ rid: string; version: number; deleted: boolean }>(
    'SELECT rid, version, deleted FROM resources WHERE project = $1 AND type = $2 AND id = $3 FOR UPDATE',
    [op.project, op.type, op.id],
  );
  const row = found.rows[0];
  const current: CurrentState | undefined = row ? { versionId: row.version, deleted: row.deleted } : undefined;
  if (op.ifMatch !== undefined && !ifMatchHolds(op.ifMatch, current)) return { status: 'conflict', current };
  if (op.resource === null && (!current || current.deleted)) return { status: 'unchanged', current };
  const versionId = (current?.versionId ?? 0) + 1;
  const content = op.resource === null ? null : stampVersion(op.resource, versionId);
  // Two creates of one new id: the second blocks here until the first commits, then fails on the
  // primary key and its transaction is retried (and then sees the first one's row).
  await client.query('INSERT INTO resource_versions (project, type, id, version, last_updated, content, method) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
    op.project, op.type, op.id, versionId, op.lastUpdated, content, methodOf(op),
  ]);
  // The row lock on the type's mark orders commits, so a reader never sees mark n+1 before n.
  const mark = await client.query<{ seq: string }>(
    `INSERT INTO change_marks (project, type, seq) VALUES ($1, $2, 1)
     ON CONFLICT (project, type) DO UPDATE SET seq = change_marks.seq + 1 RETURNING seq`,
    [op.project, op.type],
  );
  const upserted = await client.query<{ rid: string }>(
    `INSERT INTO resources (project, type, id, version, deleted, url, canonical_version, seq, rid)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, COALESCE($9, nextval('resource_rid_seq')))
     ON CONFLICT (project, type, id) DO UPDATE SET version = excluded.version, deleted = excluded.deleted,
       url = excluded.url, canonical_version = excluded.canonical_version, seq = excluded.seq
     RETURNING rid`,
    [op.project, op.type, op.id, versionId, op.resource === null, op.url ?? null, op.version ?? null, mark.rows[0].seq, row?.rid ?? null],
  );
  const rid = Number(upserted.rows[0].rid);
  await writeIndex(client, { replace: row ? [rid] : [], rows: [{ project: op.project, type: op.type, rid, rows: op.index }] });
  return { status: 'ok', version: writtenVersion(op, versionId), previous: current };
}

const ARRAY_TYPE = { text: 'text[]', int: 'bigint[]', real: 'double precision[]' } as const;

/** Index rows of several resources, each row with the resource's type and row id. */
interface IndexBatch {
  /** Resources whose old rows are removed first. */
  replace: number[];
  rows: { project: string; type: string; rid: number; rows: IndexRows | null }[];
}

/**
 * One statement replaces the index rows of any number of resources in every table: the deletes
 * and the inserts are data-modifying CTEs (the inserts cannot see the rows the deletes remove:
 * one snapshot), and the rows travel as one array per column, so the statement's text never
 * changes. Parameters: $1 the row ids to clear, then per table project[], type[], rid[], param[], grp[],
 * then one array per value column.
 */
const INDEX_WRITE_SQL = (() => {
  let n = 1;
  const parts: string[] = [];
  for (const kind of INDEX_KINDS) {
    const table = INDEX_TABLES[kind] as IndexTable;
    parts.push(`d_${kind} AS (DELETE FROM ${table.name} WHERE rid = ANY($1::bigint[]))`);
    const arrays = [`$${++n}::text[]`, `$${++n}::text[]`, `$${++n}::bigint[]`, `$${++n}::text[]`, `$${++n}::int[]`, ...table.columns.map((c) => `$${++n}::${ARRAY_TYPE[c.kind]}`)];
    const columns = table.columns.map((c) => c.name);
    const aliases = columns.map((_, i) => `c${i}`);
    parts.push(
      `i_${kind} AS (INSERT INTO ${table.name} (project, type, rid, param, grp, ${columns.join(', ')})
         SELECT j, t, r, p, g, ${aliases.join(', ')} FROM unnest(${arrays.join(', ')}) AS u(j, t, r, p, g, ${aliases.join(', ')}))`,
    );
  }
  return `WITH ${parts.join(',\n')} SELECT 1`;
})();

function indexWriteParams(batch: IndexBatch): unknown[] {
  const params: unknown[] = [batch.replace];
  for (const kind of INDEX_KINDS) {
    const table = INDEX_TABLES[kind] as IndexTable;
    const projects: string[] = [];
    const types: string[] = [];
    const rids: number[] = [];
    const list: Record<string, unknown>[] = [];
    for (const entry of batch.rows) {
      for (const row of (entry.rows?.[kind] ?? []) as unknown as Record<string, unknown>[]) {
        projects.push(entry.project);
        types.push(entry.type);
        rids.push(entry.rid);
        list.push(row);
      }
    }
    params.push(projects, types, rids, list.map((r) => r.param), list.map((r) => r.grp));
    for (const column of table.columns) params.push(list.map((r) => r[column.name] ?? null));
  }
  return params;
}

async function writeIndex(client: pg.PoolClient, batch: IndexBatch): Promise<void> {
  if (batch.replace.length === 0 && batch.rows.every((r) => !r.rows)) return;
  await client.query(INDEX_WRITE_SQL, indexWriteParams(batch));
}

/**
 * Many writes in a few statements, each set-based (locks, versions, marks, current rows, index
 * rows): what loading a transaction Bundle or a package costs in round trips no longer grows
 * with its size. The same resource twice in one batch goes through the one-by-one path.
 */
async function writeManyIn(client: pg.PoolClient, ops: WriteOp[]): Promise<WriteResult[]> {
  const keys = ops.map((op) => `${op.project}\u0000${op.type}\u0000${op.id}`);
  if (new Set(keys).size !== keys.length || ops.length < 2) {
    const results: WriteResult[] = [];
    for (const op of ops) results.push(await writeIn(client, op));
    return results;
  }
  const found = await client.query<{ project: string; type: string; id: string; rid: string; version: number; deleted: boolean }>(
    `SELECT project, type, id, rid, version, deleted FROM resources WHERE (project, type, id) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))
     ORDER BY project, type, id FOR UPDATE`,
    [ops.map((o) => o.project), ops.map((o) => o.type), ops.map((o) => o.id)],
  );
  const existing = new Map(found.rows.map((r) => [`${r.project}\u0000${r.type}\u0000${r.id}`, r]));
  const results: WriteResult[] = [];
  const writes: { op: WriteOp; versionId: number; content: string | null; row?: { rid: string } }[] = [];
  ops.forEach((op, i) => {
    const row = existing.get(keys[i]);
    const current: CurrentState | undefined = row ? { versionId: row.version, deleted: row.deleted } : undefined;
    if (op.ifMatch !== undefined && !ifMatchHolds(op.ifMatch, current)) return results.push({ status: 'conflict', current });
    if (op.resource === null && (!current || current.deleted)) return results.push({ status: 'unchanged', current });
    const versionId = (current?.versionId ?? 0) + 1;
    writes.push({ op, versionId, content: op.resource === null ? null : stampVersion(op.resource, versionId), row });
    results.push({ status: 'ok', version: writtenVersion(op, versionId), previous: current });
  });
  if (writes.length === 0) return results;
  await client.query(
    `INSERT INTO resource_versions (project, type, id, version, last_updated, content, method)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::timestamptz[], $6::text[], $7::text[])`,
    [
      writes.map((w) => w.op.project), writes.map((w) => w.op.type), writes.map((w) => w.op.id), writes.map((w) => w.versionId), writes.map((w) => w.op.lastUpdated),
      writes.map((w) => w.content), writes.map((w) => methodOf(w.op)),
    ],
  );
  // One mark per project and type, moved on by the number of its writes; each write gets its own number.
  const markKey = (project: string, type: string) => `${project}\u0000${type}`;
  const perType = new Map<string, number>();
  for (const w of writes) perType.set(markKey(w.op.project, w.op.type), (perType.get(markKey(w.op.project, w.op.type)) ?? 0) + 1);
  const markKeys = [...perType.keys()].sort();
  const marks = await client.query<{ project: string; type: string; seq: string }>(
    `INSERT INTO change_marks (project, type, seq) SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])
     ON CONFLICT (project, type) DO UPDATE SET seq = change_marks.seq + excluded.seq RETURNING project, type, seq`,
    [markKeys.map((k) => k.split('\u0000')[0]), markKeys.map((k) => k.split('\u0000')[1]), markKeys.map((k) => perType.get(k))],
  );
  const next = new Map(marks.rows.map((m) => [markKey(m.project, m.type), Number(m.seq) - (perType.get(markKey(m.project, m.type)) as number)]));
  const seqs = writes.map((w) => {
    const key = markKey(w.op.project, w.op.type);
    const seq = (next.get(key) as number) + 1;
    next.set(key, seq);
    return seq;
  });
  const upserted = await client.query<{ project: string; type: string; id: string; rid: string }>(
    `INSERT INTO resources (project, type, id, version, deleted, url, canonical_version, seq, rid)
     SELECT j, t, i, v, d, u, cv, s, COALESCE(r, nextval('resource_rid_seq'))
       FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::boolean[], $6::text[], $7::text[], $8::bigint[], $9::bigint[]) AS x(j, t, i, v, d, u, cv, s, r)
     ON CONFLICT (project, type, id) DO UPDATE SET version = excluded.version, deleted = excluded.deleted,
       url = excluded.url, canonical_version = excluded.canonical_version, seq = excluded.seq
     RETURNING project, type, id, rid`,
    [
      writes.map((w) => w.op.project), writes.map((w) => w.op.type), writes.map((w) => w.op.id), writes.map((w) => w.versionId), writes.map((w) => w.op.resource === null),
      writes.map((w) => w.op.url ?? null), writes.map((w) => w.op.version ?? null), seqs, writes.map((w) => w.row?.rid ?? null),
    ],
  );
  const rids = new Map(upserted.rows.map((r) => [`${r.project}\u0000${r.type}\u0000${r.id}`, Number(r.rid)]));
  await writeIndex(client, {
    replace: writes.filter((w) => w.row).map((w) => Number(w.row?.rid)),
    rows: writes.map((w) => ({ project: w.op.project, type: w.op.type, rid: rids.get(`${w.op.project}\u0000${w.op.type}\u0000${w.op.id}`) as number, rows: w.op.index })),
  });
  return results;
}

function readerOf(run: <R extends object>(sql: string, params: readonly unknown[]) => Promise<R[]>): StoreReader {
  return {
    read: async (project, type, id) => optionalVersion((await run<VersionRow>(`${CURRENT} WHERE r.project = ? AND r.type = ? AND r.id = ?`, [project, type, id]))[0]),
    readVersion: async (project, type, id, versionId) =>
      optionalVersion((await run<VersionRow>('SELECT * FROM resource_versions WHERE project = ? AND type = ? AND id = ? AND version = ?', [project, type, id, versionId]))[0]),
    history: async (project, type, id) =>
      (await run<VersionRow>('SELECT * FROM resource_versions WHERE project = ? AND type = ? AND id = ? ORDER BY version DESC', [project, type, id])).map((row) => versionFromRow(row)),
    query: run,
  };
}

/** `?` placeholders (what the search layer writes for both backends) as PostgreSQL's `$1, $2, ...`. */
export function numbered(sql: string): string {
  let n = 0;
  let out = '';
  let quoted = false;
  for (const ch of sql) {
    if (ch === "'") quoted = !quoted;
    out += ch === '?' && !quoted ? `$${++n}` : ch;
  }
  return out;
}

/** A transaction that lost a race with another: a deadlock, a serialisation failure, a duplicate new key. */
function isRaceLost(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === '40P01' || code === '40001' || code === '23505';
}

/** The database cancelled the statement (statement_timeout; an operator's pg_cancel_backend). */
function isCancelled(err: unknown): boolean {
  return (err as { code?: string }).code === '57014';
}

/**
 * Connection-level failures become StorageUnavailableError (503), timeouts StorageTimeoutError
 * (503 naming the time); anything else stays as it is.
 */
function translate(err: unknown, statementTimeoutMs: number): unknown {
  if (err instanceof StorageUnavailableError) return err;
  const code = (err as { code?: string }).code ?? '';
  const message = (err as Error).message ?? '';
  if (isCancelled(err)) return new StorageTimeoutError(message, statementTimeoutMs);
  if (code === '53100') return new StorageFullError(message);
  if (message === 'Query read timeout') return new StorageTimeoutError(message, statementTimeoutMs + CLIENT_GRACE_MS);
  const connectionLost =
    ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', '57P01', '57P02', '57P03', '08000', '08003', '08006'].includes(code) ||
    /terminat|Connection terminated|timeout exceeded when trying to connect|not queryable/i.test(message);
  return connectionLost ? new StorageUnavailableError(message) : err;
}

