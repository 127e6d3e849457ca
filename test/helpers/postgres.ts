import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'vitest';
import { schemaIn, type TestSchema } from './schema';

export type { TestSchema };

/**
 * PostgreSQL for tests: TEST_DATABASE_URL names the server. Each caller gets a schema of its
 * own, so test files running in parallel never see each other's tables.
 * CI sets REQUIRE_POSTGRES=1: there a missing or unreachable database fails the run instead of
 * skipping, so the PostgreSQL tests can never silently not run.
 */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL;
export const REQUIRE_POSTGRES = process.env.REQUIRE_POSTGRES === '1';

export const POSTGRES_SKIP_REASON = 'PostgreSQL tests skipped: TEST_DATABASE_URL is not set (CI sets it; see README)';

if (!TEST_DATABASE_URL && REQUIRE_POSTGRES) {
  throw new Error('REQUIRE_POSTGRES=1 but TEST_DATABASE_URL is not set');
}
if (!TEST_DATABASE_URL) {
  // Say why, once per file that would have used it.
  console.warn(POSTGRES_SKIP_REASON);
}

export const hasPostgres = TEST_DATABASE_URL !== undefined;

/** Creates an empty schema in TEST_DATABASE_URL's database (see ./schema). */
export async function freshSchema(): Promise<TestSchema> {
  if (!TEST_DATABASE_URL) throw new Error(POSTGRES_SKIP_REASON);
  return schemaIn(TEST_DATABASE_URL);
}

/**
 * A test that starts server processes, run twice: on embedded storage (a fresh data folder) and on
 * PostgreSQL (a fresh schema; skipped with the reason when TEST_DATABASE_URL is unset, which CI
 * never allows). `run` gets the environment that points a server at the storage; both are removed
 * afterwards. (In-process apps: `onBothBackends` in ./server-app.)
 */
export function testOnBothBackends(
  title: string,
  run: (env: Record<string, string>) => Promise<void>,
  timeoutMs: number,
): void {
  test(
    `embedded storage: ${title}`,
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'fhir-test-data-'));
      try {
        await run({ DATA_DIR: dir });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    timeoutMs,
  );
  if (!hasPostgres) {
    test.skip(POSTGRES_SKIP_REASON, () => undefined);
    return;
  }
  test(
    `PostgreSQL: ${title}`,
    async () => {
      const schema = await freshSchema();
      try {
        await run({ DATABASE_URL: schema.url });
      } finally {
        await schema.drop();
      }
    },
    timeoutMs,
  );
}
