import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Resource } from 'fhir/r4';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { emptyIndexRows } from '../../src/storage/index-schema';
import { PostgresStore } from '../../src/storage/postgres/postgres-store';
import { SqliteStore } from '../../src/storage/sqlite/sqlite-store';
import type { ResourceStore } from '../../src/storage/store';
import { freshSchema, hasPostgres, POSTGRES_SKIP_REASON, type TestSchema } from '../helpers/postgres';
import { until } from '../helpers/process';

/**
 * FRESHNESS_CHECK=notify (src/storage/change-watch.ts): a store reads its change marks again only
 * when told something changed. Its own writes tell it at once; another store's (another process)
 * tell it by a notice; with the notices lost (the listening connection cut) it must not go on
 * trusting what it read. Each wait below is bounded at 5 s: notices take milliseconds, and the
 * safety re-read every 10 s would otherwise hide a missing one.
 */

const write = (store: ResourceStore, id: string) =>
  store.write({
    project: 'p1',
    type: 'CodeSystem',
    id,
    lastUpdated: new Date().toISOString(),
    resource: { resourceType: 'CodeSystem', id } as Resource,
    index: emptyIndexRows(),
  });

const mark = async (store: ResourceStore) => (await store.changeMarks('p1', ['CodeSystem'])).get('CodeSystem') ?? 0;

/** Asks until `store`'s mark reaches `at` (at most 5 s: see above), and answers it. */
async function markReaches(store: ResourceStore, at: number): Promise<number> {
  await until(async () => (await mark(store)) >= at, `the mark reaching ${at}`, 5000);
  return mark(store);
}

function twoStores(
  name: string,
  open: () => Promise<{ stores: [ResourceStore, ResourceStore]; dispose: () => Promise<void> }>,
  more?: (stores: () => [ResourceStore, ResourceStore]) => void,
) {
  describe(`change marks of two stores over one ${name}, FRESHNESS_CHECK=notify`, () => {
    let stores: [ResourceStore, ResourceStore];
    let dispose: () => Promise<void>;
    beforeAll(async () => {
      ({ stores, dispose } = await open());
    });
    afterAll(async () => {
      for (const s of stores ?? []) await s.close();
      await dispose?.();
    });

    test("a store's own write moves its marks at once; the other store's once it learns of it", async () => {
      const [a, b] = stores;
      const before = await mark(b);
      expect(await mark(a)).toBe(before);
      await write(a, 'one');
      // No wait: the writer counts its own commit before the write resolves.
      expect(await mark(a)).toBe(before + 1);
      expect(await markReaches(b, before + 1)).toBe(before + 1);
      // Nothing changed since: the marks stay (read from memory) and stay right.
      expect(await mark(b)).toBe(before + 1);
    });
    more?.(() => stores);
  });
}

twoStores('SQLite file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fhir-watch-'));
  const stores = [new SqliteStore(dir), new SqliteStore(dir)] as [SqliteStore, SqliteStore];
  for (const s of stores) await s.migrate();
  return { stores, dispose: async () => rmSync(dir, { recursive: true, force: true }) };
});

const APP_NAME = `watch_test_${process.pid}`;

if (hasPostgres) {
  let schema: TestSchema;
  twoStores(
    'PostgreSQL',
    async () => {
      schema = await freshSchema();
      // B's connections have a name of their own (the URL's wins over the server's), so the test can cut B's listening one.
      const url = new URL(schema.url);
      url.searchParams.set('application_name', APP_NAME);
      const stores = [new PostgresStore(schema.url), new PostgresStore(url.toString())] as [
        PostgresStore,
        PostgresStore,
      ];
      for (const s of stores) await s.migrate();
      return { stores, dispose: () => schema.drop() };
    },
    (stores) => {
      test("with its listening connection cut, B still learns of A's writes (it reads until it listens again, then reads again)", async () => {
        const [a, b] = stores();
        const admin = new pg.Client({ connectionString: schema.url });
        await admin.connect();
        try {
          const listening = async () =>
            (
              await admin.query("SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'", [
                APP_NAME,
              ])
            ).rowCount === 1;
          for (let round = 0; round < 3; round++) {
            // B listens again (it tries every second after a loss).
            await until(listening, 'B listening again', 5000);
            const before = await mark(b);
            // B's listening connection (as an idle_session_timeout or a network reset would): notices are lost from here on.
            const { rowCount } = await admin.query(
              "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'",
              [APP_NAME],
            );
            expect(rowCount).toBe(1);
            await write(a, `cut-${round}`);
            expect(await markReaches(b, before + 1)).toBe(before + 1);
          }
        } finally {
          await admin.end();
        }
      });
    },
  );
} else {
  test.skip(POSTGRES_SKIP_REASON, () => undefined);
}
