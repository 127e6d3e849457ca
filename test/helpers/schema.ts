import { randomBytes } from 'node:crypto';
import pg from 'pg';

export interface TestSchema {
  url: string;
  drop(): Promise<void>;
}

/**
 * Creates an empty schema in the database at `databaseUrl` and returns a connection URL whose
 * search_path points at it (tests through ./postgres, benchmarks directly: no test set-up here).
 */
export async function schemaIn(databaseUrl: string): Promise<TestSchema> {
  const name = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 });
  try {
    await admin.connect();
  } catch (err) {
    throw new Error(`PostgreSQL at ${new URL(databaseUrl).host} cannot be reached: ${(err as Error).message}`, {
      cause: err,
    });
  }
  await admin.query(`CREATE SCHEMA ${name}`);
  await admin.end();
  const url = new URL(databaseUrl);
  url.searchParams.set('options', `-c search_path=${name}`);
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      await client.query(`DROP SCHEMA ${name} CASCADE`);
      await client.end();
    },
  };
}
