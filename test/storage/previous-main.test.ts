import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { describe, expect, test } from 'vitest';
import { LATEST_VERSION } from '../../src/storage/migrations';
import type { ServerApp } from '../../src/bootstrap';
import { freshSchema, hasPostgres, POSTGRES_SKIP_REASON, type TestSchema } from '../helpers/postgres';
import { serverApp } from '../helpers/server-app';
import { answers, SCHEMA } from './fixtures/make-previous-main';

/**
 * A database written by the previous main (d496511, before the schema moved to numbered migration
 * files; see fixtures/make-previous-main.ts) opens with this code, migrates in place and answers
 * as it did then: reads, version history, search (a custom parameter's too), the job and the
 * ephemeral entry, and the recorded schema version is the latest.
 */
const FIXTURES = fileURLToPath(new URL('./fixtures/previous-main/', import.meta.url));
const expected = JSON.parse(readFileSync(join(FIXTURES, 'expected.json'), 'utf8')) as Record<
  'sqlite' | 'postgres',
  Recorded
>;

interface Recorded {
  reads: unknown;
  histories: unknown;
  searches: unknown;
  job: { id: string };
  ephemeral: unknown;
}

async function answersAsBefore(server: ServerApp, recorded: Recorded): Promise<void> {
  const now = await answers(server.app);
  expect(now.reads).toEqual(recorded.reads);
  expect(now.histories).toEqual(recorded.histories);
  expect(now.searches).toEqual(recorded.searches);
  expect(await server.store.jobs.get(recorded.job.id)).toEqual(recorded.job);
  expect(await server.store.ephemeral.list('fixture')).toEqual(recorded.ephemeral);
  const [{ v }] = await server.store.query<{ v: number }>('SELECT MAX(version) AS v FROM schema_migrations', []);
  expect(Number(v)).toBe(LATEST_VERSION);
  // And it takes writes again.
  const res = await server.app.inject({
    method: 'PUT',
    url: '/fhir/R4/Patient/pat-2',
    headers: { 'content-type': 'application/fhir+json' },
    payload: { resourceType: 'Patient', id: 'pat-2', name: [{ family: 'Jones', given: ['Bobby'] }] },
  });
  expect(res.statusCode, res.body).toBe(200);
  const found = (
    await server.app.inject({ method: 'GET', url: '/fhir/R4/Patient?nickname=Bobby&_sort=_id' })
  ).json() as { entry: { resource: { id: string } }[] };
  expect(found.entry.map((e) => e.resource.id)).toEqual(['pat-1', 'pat-2']);
}

/** The dump, made to load into `schema` (a fresh one of this test's) instead of the one it was taken of. */
function dumpInto(schema: TestSchema): string {
  const name = /search_path=(\w+)/.exec(new URL(schema.url).searchParams.get('options') ?? '')?.[1];
  if (!name) throw new Error(`no schema in ${schema.url}`);
  return (
    readFileSync(join(FIXTURES, 'postgres.sql'), 'utf8')
      .split('\n')
      // psql's own commands (\restrict) and the schema, which exists already.
      .filter((line) => !line.startsWith('\\') && line !== `CREATE SCHEMA ${SCHEMA};`)
      .join('\n')
      .replaceAll(`${SCHEMA}.`, `${name}.`)
  );
}

describe('a database written by the previous main', () => {
  test('SQLite: opens, migrates and answers as it did', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fhir-previous-main-'));
    copyFileSync(join(FIXTURES, 'fhir.sqlite'), join(dir, 'fhir.sqlite'));
    const server = await serverApp({ dataDir: dir, jobWorkers: 0 });
    try {
      await answersAsBefore(server, expected.sqlite);
    } finally {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  if (!hasPostgres) {
    test.skip(POSTGRES_SKIP_REASON, () => undefined);
    return;
  }
  test('PostgreSQL: opens, migrates and answers as it did', async () => {
    const schema = await freshSchema();
    try {
      const client = new pg.Client({ connectionString: schema.url });
      await client.connect();
      await client.query(dumpInto(schema));
      await client.end();
      const server = await serverApp({ databaseUrl: schema.url, jobWorkers: 0 });
      try {
        await answersAsBefore(server, expected.postgres);
      } finally {
        await server.close();
      }
    } finally {
      await schema.drop();
    }
  });
});
