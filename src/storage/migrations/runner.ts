import type { Dialect, Migration } from './dialect';

/** One transaction of a migration, on the backend's connection. */
export interface MigrationSession {
  /** Runs `;`-separated statements (a migration's DDL). */
  exec(sql: string): Promise<void>;
  /** Runs one statement with `?` placeholders; its rows. */
  query<R extends object>(sql: string, params: unknown[]): Promise<R[]>;
}

/** What the runner needs of a backend. */
export interface MigrationTarget {
  dialect: Dialect;
  /**
   * `work` in a transaction of its own, committed when it returns and rolled back when it throws,
   * holding the lock that keeps two processes from migrating one database at once (SQLite's write
   * lock, BEGIN IMMEDIATE; a PostgreSQL advisory lock held until the transaction ends).
   */
  transaction<T>(work: (session: MigrationSession) => Promise<T>): Promise<T>;
}

/**
 * Applies the migrations a database has not run yet (all, or up to `upTo`: tests of a migration
 * start before it), in order, each in a transaction of its own with its version recorded in
 * `schema_migrations`. The recorded version is read again in each transaction, under the lock, so
 * a process that waited for another's migrations goes on from where that one stopped.
 */
export async function runMigrations(
  target: MigrationTarget,
  migrations: readonly Migration[],
  options: { upTo?: number } = {},
): Promise<void> {
  const upTo = options.upTo ?? Infinity;
  for (;;) {
    const applied = await target.transaction(async (session) => {
      await session.exec(
        `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at ${target.dialect.timestamp} NOT NULL)`,
      );
      const [{ v }] = await session.query<{ v: number | string }>(
        'SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations',
        [],
      );
      const next = migrations.find((m) => m.version > Number(v));
      if (!next || next.version > upTo) return false;
      const sql = next.up(target.dialect);
      if (sql !== '') await session.exec(sql);
      await session.query('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)', [
        next.version,
        new Date().toISOString(),
      ]);
      return true;
    });
    if (!applied) return;
  }
}
