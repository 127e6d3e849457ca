import pg from 'pg';
import {
  changeFromRow,
  StorageUnavailableError,
  type CanonicalQuery,
  type Change,
  type NewVersion,
  type Page,
  type ResourceStore,
  type StoredVersion,
  type VersionRow,
  optionalVersion,
  versionFromRow,
} from '../store';

/**
 * PostgreSQL through DATABASE_URL, for several stateless server processes over one database.
 * Every query is parameterised; all of this backend's SQL is in this file.
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
];

/** Any number; only ever taken by this server's migrations. */
const MIGRATION_LOCK = 7_364_221;

const CURRENT = `SELECT v.type, v.id, v.version, v.last_updated, v.content
  FROM resources r JOIN resource_versions v ON v.type = r.type AND v.id = r.id AND v.version = r.version`;


export class PostgresStore implements ResourceStore {
  readonly kind = 'postgres' as const;
  private readonly pool: pg.Pool;

  constructor(connectionString: string, options: { max?: number } = {}) {
    // application_name names this server's sessions in pg_stat_activity (a name in the URL wins);
    // keepAlive notices a peer that vanished without a word (a failover, a dropped route).
    this.pool = new pg.Pool({ connectionString, max: options.max ?? 10, connectionTimeoutMillis: 3000, application_name: 'fhir-tx-server', keepAlive: true });
    // An idle client losing its connection must not take the process down; the next query reconnects.
    this.pool.on('error', () => undefined);
  }

  async migrate(): Promise<void> {
    await this.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL)');
      const { rows } = await client.query<{ v: number }>('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations');
      for (const [index, sql] of MIGRATIONS.entries()) {
        const version = index + 1;
        if (version <= rows[0].v) continue;
        await client.query(sql);
        await client.query('INSERT INTO schema_migrations (version, applied_at) VALUES ($1, now())', [version]);
      }
    });
  }

  async read(type: string, id: string): Promise<StoredVersion | undefined> {
    const { rows } = await this.query<VersionRow>(`${CURRENT} WHERE r.type = $1 AND r.id = $2`, [type, id]);
    return optionalVersion(rows[0]);
  }

  async readVersion(type: string, id: string, versionId: number): Promise<StoredVersion | undefined> {
    const { rows } = await this.query<VersionRow>(
      'SELECT * FROM resource_versions WHERE type = $1 AND id = $2 AND version = $3', [type, id, versionId]);
    return optionalVersion(rows[0]);
  }

  async history(type: string, id: string): Promise<StoredVersion[]> {
    const { rows } = await this.query<VersionRow>(
      'SELECT * FROM resource_versions WHERE type = $1 AND id = $2 ORDER BY version DESC', [type, id]);
    return rows.map((row) => versionFromRow(row));
  }

  async append(entry: NewVersion): Promise<'ok' | 'conflict'> {
    return this.transaction(async (client) => {
      const content = entry.resource === null ? null : JSON.stringify(entry.resource);
      // A concurrent writer of the same version blocks here until the first commits, then finds the row.
      const inserted = await client.query(
        `INSERT INTO resource_versions (type, id, version, last_updated, content) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT DO NOTHING`,
        [entry.type, entry.id, entry.versionId, entry.lastUpdated, content],
      );
      // Nothing was written, so committing the empty transaction is harmless.
      if (inserted.rowCount === 0) return 'conflict';
      // The row lock on the type's mark orders commits, so a reader never sees mark n+1 before n.
      const mark = await client.query<{ seq: string }>(
        `INSERT INTO change_marks (type, seq) VALUES ($1, 1)
         ON CONFLICT (type) DO UPDATE SET seq = change_marks.seq + 1 RETURNING seq`,
        [entry.type],
      );
      await client.query(
        `INSERT INTO resources (type, id, version, deleted, url, canonical_version, seq) VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (type, id) DO UPDATE SET version = excluded.version, deleted = excluded.deleted,
           url = excluded.url, canonical_version = excluded.canonical_version, seq = excluded.seq
         WHERE excluded.version > resources.version`,
        [entry.type, entry.id, entry.versionId, entry.resource === null, entry.url ?? null, entry.version ?? null, mark.rows[0].seq],
      );
      return 'ok';
    });
  }

  async search(type: string, query: CanonicalQuery, page: Page): Promise<{ total: number; resources: StoredVersion[] }> {
    const where = ['r.type = $1', 'NOT r.deleted'];
    const args: unknown[] = [type];
    const add = (column: string, value: string | undefined) => {
      if (value === undefined) return;
      args.push(value);
      where.push(`${column} = $${args.length}`);
    };
    add('r.url', query.url);
    add('r.canonical_version', query.version);
    add('r.id', query.id);
    const filter = where.join(' AND ');
    const count = await this.query<{ n: string }>(`SELECT COUNT(*) AS n FROM resources r WHERE ${filter}`, args);
    const { rows } = await this.query<VersionRow>(
      `${CURRENT} WHERE ${filter} ORDER BY r.id LIMIT $${args.length + 1} OFFSET $${args.length + 2}`,
      [...args, page.count, page.offset],
    );
    return { total: Number(count.rows[0].n), resources: rows.map((row) => versionFromRow(row)) };
  }

  async changeMarks(types: string[]): Promise<Map<string, number>> {
    const marks = new Map<string, number>(types.map((t) => [t, 0]));
    const { rows } = await this.query<{ type: string; seq: string }>(
      'SELECT type, seq FROM change_marks WHERE type = ANY($1)', [types]);
    for (const row of rows) marks.set(row.type, Number(row.seq));
    return marks;
  }

  async changesSince(type: string, since: number): Promise<Change[]> {
    const { rows } = await this.query<VersionRow & { seq: string }>(
      `SELECT v.type, v.id, v.version, v.last_updated, v.content, r.seq
         FROM resources r JOIN resource_versions v ON v.type = r.type AND v.id = r.id AND v.version = r.version
        WHERE r.type = $1 AND r.seq > $2 ORDER BY r.seq`,
      [type, since],
    );
    return rows.map((row) => changeFromRow(row, Number(row.seq)));
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  private async query<R extends pg.QueryResultRow>(sql: string, args: unknown[]): Promise<pg.QueryResult<R>> {
    try {
      return await this.pool.query<R>(sql, args);
    } catch (err) {
      throw translate(err);
    }
  }

  private async transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
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
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      const failure = translate(err);
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
        if (err || !client) return reject(translate(err));
        client.on('error', onError);
        resolve(client);
      });
    });
  }
}

/** Connection-level failures become StorageUnavailableError (503); anything else stays as it is. */
function translate(err: unknown): unknown {
  const code = (err as { code?: string }).code ?? '';
  const message = (err as Error).message ?? '';
  const connectionLost =
    ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', '57P01', '57P02', '57P03', '08000', '08003', '08006'].includes(code) ||
    /terminat|Connection terminated|timeout exceeded when trying to connect|not queryable/i.test(message);
  return connectionLost ? new StorageUnavailableError(message) : err;
}

