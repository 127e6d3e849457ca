import type { Config } from '../config';
import type { ResourceStore } from './store';

/**
 * PostgreSQL when DATABASE_URL is set, the embedded SQLite file under DATA_DIR otherwise; migrated.
 * Only the backend in use is loaded (start-up time).
 */
export async function openStore(config: Pick<Config, 'databaseUrl' | 'dataDir'>): Promise<ResourceStore> {
  const store: ResourceStore = config.databaseUrl
    ? new (await import('./postgres/postgres-store')).PostgresStore(config.databaseUrl)
    : new (await import('./sqlite/sqlite-store')).SqliteStore(config.dataDir);
  try {
    await store.migrate();
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
  return store;
}
