import type { Config } from '../config';
import { PostgresStore } from './postgres/postgres-store';
import { SqliteStore } from './sqlite/sqlite-store';
import type { ResourceStore } from './store';

/** PostgreSQL when DATABASE_URL is set, the embedded SQLite file under DATA_DIR otherwise; migrated. */
export async function openStore(config: Pick<Config, 'databaseUrl' | 'dataDir'>): Promise<ResourceStore> {
  const store: ResourceStore = config.databaseUrl ? new PostgresStore(config.databaseUrl) : new SqliteStore(config.dataDir);
  try {
    await store.migrate();
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
  return store;
}
