import cluster from 'node:cluster';
import type { ResourceStore } from './store';
import type { FreshnessCheck } from './change-watch';

/**
 * What opening the store reads of the configuration (the server's Config is one), declared here so
 * that storage imports nothing above it.
 */
export interface StoreOptions {
  /** DATA_DIR: the SQLite file's folder. */
  dataDir: string;
  /** DATABASE_URL: PostgreSQL instead of SQLite when set. */
  databaseUrl?: string;
  /** DATABASE_STATEMENT_TIMEOUT_MS (PostgreSQL). */
  databaseStatementTimeoutMs?: number;
  /** SQLITE_MAX_SIZE_MB. */
  sqliteMaxSizeMb?: number;
  freshnessCheck?: FreshnessCheck;
}

/**
 * PostgreSQL when DATABASE_URL is set, the embedded SQLite file under DATA_DIR otherwise; migrated.
 * Only the backend in use is loaded (start-up time).
 */
export async function openStore(options: StoreOptions): Promise<ResourceStore> {
  const freshness = options.freshnessCheck;
  const store: ResourceStore = options.databaseUrl
    ? new (await import('./postgres/postgres-store')).PostgresStore(options.databaseUrl, {
        freshness,
        statementTimeoutMs: options.databaseStatementTimeoutMs,
      })
    : new (await import('./sqlite/sqlite-store')).SqliteStore(options.dataDir, {
        freshness,
        maxSizeBytes: options.sqliteMaxSizeMb === undefined ? undefined : options.sqliteMaxSizeMb * 1024 * 1024,
        // A worker of several (WORKERS > 1): notices go through the primary to the others.
        notices: cluster.isWorker ? new (await import('./cluster-notices')).ClusterNotices() : undefined,
      });
  try {
    await store.migrate();
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
  return store;
}
