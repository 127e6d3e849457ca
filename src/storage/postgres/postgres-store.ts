import pg from 'pg';
import { fhirError } from '../../fhir/errors';
import { SqlEphemeralStore, type EphemeralStore } from '../ephemeral';
import { insertJob, SqlJobStore, type JobStore } from '../jobs';
import { SqlBulkStore, type BulkStore } from '../bulk';
import { PgNotices } from './pg-notices';
import {
  ChangeMarksCache,
  CHANGES_NOTICE_CHANNEL,
  CheckEveryTime,
  NotifiedChanges,
  type ChangeWatch,
  type FreshnessCheck,
} from '../change-watch';
import { LATEST_VERSION, MIGRATIONS, POSTGRES, runMigrations, type MigrationSession } from '../migrations';
import {
  changeFromRow,
  StorageTimeoutError,
  StorageUnavailableError,
  type Change,
  type ResourceStore,
  type StoredVersion,
  type StoreReader,
  type StoreTx,
  type VersionRow,
  type WriteOp,
  type WriteResult,
} from '../store';
import { CLIENT_GRACE_MS, CURRENT, isCancelled, isRaceLost, longQuery, numbered, readerOf, translate } from './sql';
import { writeIndex } from './index-writes';
import { writeIn, writeManyIn } from './writes';

/**
 * PostgreSQL through DATABASE_URL, for several stateless server processes over one database.
 * Every query is parameterised; all of this backend's SQL is in this folder, src/storage/migrations and index-schema.ts.
 * A write locks the resource's row (SELECT ... FOR UPDATE), so writers of one resource queue
 * instead of colliding; two creates of one new id collide on the version's primary key and the
 * loser's transaction runs again.
 */

/**
 * With notices, the marks are still read again this often (a safety net: a notice the listening
 * connection lost without noticing).
 */
const SAFETY_CHECK_MS = 10_000;

/** Any number; only ever taken by this server's migrations. */
const MIGRATION_LOCK = 7_364_221;
/** A statement's time when the configuration gives none (OPERATION_TIMEOUT_MS's default). */
const DEFAULT_STATEMENT_TIMEOUT_MS = 30_000;
/** How often a transaction that lost a race (deadlock, serialisation, a duplicate new id) runs again. */
const MAX_ATTEMPTS = 8;

type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

export class PostgresStore implements ResourceStore {
  readonly kind = 'postgres' as const;
  private readonly pool: pg.Pool;
  readonly ephemeral: EphemeralStore = new SqlEphemeralStore((sql, params) =>
    this.run<Record<string, unknown>>(this.pool, sql, params),
  );

  readonly jobs: JobStore = new SqlJobStore(
    (sql, params) => this.run<Record<string, unknown>>(this.pool, sql, params),
    'postgres',
  );

  readonly bulk: BulkStore = new SqlBulkStore((sql, params) =>
    this.run<Record<string, unknown>>(this.pool, sql, params),
  );

  readonly notices: PgNotices;

  /** See ChangeWatch: with `notify`, told by this process's commits and by the others' notices. */
  readonly changes: ChangeWatch;
  private readonly notified?: NotifiedChanges;
  private readonly marksCache: ChangeMarksCache;

  /** The sessions' statement_timeout; a query the database answers nothing to fails CLIENT_GRACE_MS later. */
  private readonly statementTimeoutMs: number;

  constructor(
    connectionString: string,
    options: { max?: number; freshness?: FreshnessCheck; statementTimeoutMs?: number } = {},
  ) {
    this.statementTimeoutMs = options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS;
    if (options.freshness === 'request') {
      this.changes = new CheckEveryTime();
    } else {
      this.notified = new NotifiedChanges(() => this.notices.isListening(CHANGES_NOTICE_CHANNEL));
      this.changes = this.notified;
    }
    this.marksCache = new ChangeMarksCache(this.changes, async (project) =>
      (
        await this.run<{ type: string; seq: string }>(
          this.pool,
          'SELECT type, seq FROM change_marks WHERE project = ?',
          [project],
        )
      ).map((row) => ({ type: row.type, seq: Number(row.seq) })),
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
    await runMigrations(
      { dialect: POSTGRES, transaction: (work) => this.migrationTransaction(work) },
      MIGRATIONS,
      options,
    );
    if (this.notified && (options.upTo === undefined || options.upTo >= LATEST_VERSION)) {
      const notified = this.notified;
      // Until the connection listens, the watch trusts nothing (every use reads the marks).
      this.unlistenChanges = await this.notices.listen(
        CHANGES_NOTICE_CHANNEL,
        () => notified.changed(),
        () => notified.changed(),
      );
      notified.every(SAFETY_CHECK_MS, () => notified.changed());
    }
  }

  private unlistenChanges?: () => void;

  /**
   * One migration's transaction, holding the advisory lock that only migrations take: a second
   * process starting at once waits for it, then finds the migration recorded.
   */
  private migrationTransaction<T>(work: (session: MigrationSession) => Promise<T>): Promise<T> {
    return this.transactionOnce(async (client) => {
      // Migrations (an index over a large table) and the wait for another process migrating take
      // as long as they take: no statement timeout here.
      await client.query(longQuery('SET LOCAL statement_timeout = 0'));
      await client.query(longQuery('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]));
      return work({
        exec: async (sql) => {
          await client.query(longQuery(sql));
        },
        query: async <R extends object>(sql: string, params: unknown[]) =>
          (await client.query<R & pg.QueryResultRow>(longQuery(numbered(sql), params))).rows,
      });
    });
  }

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
    await this.run(
      this.pool,
      'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
      [key, value],
    );
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
      if (!(failure instanceof StorageTimeoutError && !isCancelled(err)))
        await client.query('ROLLBACK').catch(() => undefined);
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
