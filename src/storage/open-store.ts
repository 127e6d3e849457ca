import cluster from 'node:cluster';
import type { Config } from '../config';
import type { ResourceStore } from './store';
import type { FreshnessCheck } from './change-watch';

/**
 * PostgreSQL when DATABASE_URL is set, the embedded SQLite file under DATA_DIR otherwise; migrated.
 * Only the backend in use is loaded (start-up time).
 */
export async function openStore(
  config: Pick<Config, 'databaseUrl' | 'dataDir'> & Partial<Pick<Config, 'databaseStatementTimeoutMs' | 'sqliteMaxSizeMb'>> & { freshnessCheck?: FreshnessCheck },
): Promise<ResourceStore> {
  const freshness = config.freshnessCheck;
  const store: ResourceStore = config.databaseUrl
    ? new (await import('./postgres/postgres-store')).PostgresStore(config.databaseUrl, { freshness, statementTimeoutMs: config.databaseStatementTimeoutMs })
    : new (await import('./sqlite/sqlite-store')).SqliteStore(config.dataDir, {
        freshness,
        maxSizeBytes: config.sqliteMaxSizeMb === undefined ? undefined : config.sqliteMaxSizeMb * 1024 * 1024,
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
