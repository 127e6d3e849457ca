import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { Resource } from 'fhir/r4';
import pg from 'pg';
import { afterAll, describe, expect, test } from 'vitest';
import { PostgresStore } from '../../src/storage/postgres/postgres-store';
import { SqliteStore } from '../../src/storage/sqlite/sqlite-store';
import { emptyIndexRows, type IndexRows } from '../../src/storage/index-schema';
import type { ResourceStore, WriteOp } from '../../src/storage/store';
import { freshSchema, hasPostgres, POSTGRES_SKIP_REASON } from '../helpers/postgres';

/**
 * One contract, every backend: what the repository relies on, checked against each store.
 * `open` gives a store over the same durable location each time it is called.
 */
interface Backend {
  name: string;
  available: boolean;
  location(): Promise<{
    /** A store over the location, migrated (up to `upTo` only, when given). */
    open(upTo?: number): Promise<ResourceStore>;
    /** Runs statements on the database directly (rows of an older schema). */
    raw(statements: string[]): Promise<void>;
    dispose(): Promise<void>;
  }>;
}

const backends: Backend[] = [
  {
    name: 'sqlite',
    available: true,
    location: async () => {
      const dir = mkdtempSync(join(tmpdir(), 'fhir-contract-'));
      return {
        open: async (upTo) => {
          const store = new SqliteStore(dir);
          await store.migrate({ upTo });
          return store;
        },
        raw: async (statements) => {
          const db = new Database(join(dir, 'fhir.sqlite'));
          for (const sql of statements) db.exec(sql);
          db.close();
        },
        dispose: async () => rmSync(dir, { recursive: true, force: true }),
      };
    },
  },
  {
    name: 'postgres',
    available: hasPostgres,
    location: async () => {
      const schema = await freshSchema();
      return {
        open: async (upTo) => {
          const store = new PostgresStore(schema.url);
          await store.migrate({ upTo });
          return store;
        },
        raw: async (statements) => {
          const client = new pg.Client({ connectionString: schema.url });
          await client.connect();
          for (const sql of statements) await client.query(sql);
          await client.end();
        },
        dispose: () => schema.drop(),
      };
    },
  },
];

/** Most tests write in one project; the isolation test uses a second. */
const P = 'p1';

function op(type: string, id: string, resource: Record<string, unknown> | null, extra: Partial<WriteOp> = {}): WriteOp {
  return {
    project: P,
    type,
    id,
    lastUpdated: new Date(Date.UTC(2024, 0, 1, 0, 0, Math.floor(Math.random() * 60))).toISOString(),
    resource: resource === null ? null : ({ resourceType: type, id, ...resource } as Resource),
    index: resource === null ? null : emptyIndexRows(),
    ...extra,
  };
}

function tokenRows(code: string): IndexRows {
  const rows = emptyIndexRows();
  rows.token.push({ param: 'code', grp: 0, system: 'http://x', code, text: null });
  rows.string.push({ param: 'name', grp: 0, norm: code.toLowerCase(), exact: code });
  return rows;
}

if (!hasPostgres) {
  describe('postgres backend', () => {
    test.skip(POSTGRES_SKIP_REASON, () => undefined);
  });
}

describe.each(backends.filter((b) => b.available))('ResourceStore contract: $name', (backend) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });
  async function open() {
    const location = await backend.location();
    const store = await location.open();
    cleanups.push(async () => {
      await store.close();
      await location.dispose();
    });
    return { store, location };
  }

  test('writes get consecutive versions from the store, readable as current and by number', async () => {
    const { store } = await open();
    expect(await store.read(P, 'Patient', 'a')).toBeUndefined();
    const first = await store.write(
      op('Patient', 'a', { gender: 'male' }, { lastUpdated: '2024-01-01T00:00:01.000Z' }),
    );
    expect(first).toMatchObject({ status: 'ok', version: { versionId: 1 } });
    expect(first.status === 'ok' && first.previous).toBeUndefined();
    const second = await store.write(
      op('Patient', 'a', { gender: 'female' }, { lastUpdated: '2024-01-01T00:00:02.000Z' }),
    );
    expect(second).toMatchObject({
      status: 'ok',
      version: { versionId: 2 },
      previous: { versionId: 1, deleted: false },
    });
    const current = await store.read(P, 'Patient', 'a');
    expect(current?.versionId).toBe(2);
    expect(current?.lastUpdated).toBe('2024-01-01T00:00:02.000Z');
    expect(current?.resource).toEqual({ resourceType: 'Patient', id: 'a', gender: 'female', meta: { versionId: '2' } });
    expect((await store.readVersion(P, 'Patient', 'a', 1))?.resource).toMatchObject({
      gender: 'male',
      meta: { versionId: '1' },
    });
    expect(await store.readVersion(P, 'Patient', 'a', 3)).toBeUndefined();
    expect((await store.history(P, 'Patient', 'a')).map((v) => v.versionId)).toEqual([2, 1]);
  });

  test('If-Match: a stale version is a conflict and changes nothing; 0 means "must not exist"', async () => {
    const { store } = await open();
    await store.write(op('Patient', 'b', { gender: 'male' }));
    expect(await store.write(op('Patient', 'b', { gender: 'other' }, { ifMatch: 2 }))).toEqual({
      status: 'conflict',
      current: { versionId: 1, deleted: false },
    });
    expect(await store.write(op('Patient', 'b', { gender: 'other' }, { ifMatch: 0 }))).toMatchObject({
      status: 'conflict',
    });
    expect((await store.read(P, 'Patient', 'b'))?.resource).toMatchObject({ gender: 'male' });
    expect(await store.history(P, 'Patient', 'b')).toHaveLength(1);
    expect(await store.write(op('Patient', 'b', { gender: 'other' }, { ifMatch: 1 }))).toMatchObject({
      status: 'ok',
      version: { versionId: 2 },
    });
  });

  test('concurrent unconditional writers of one resource all succeed, each with its own version', async () => {
    const { store } = await open();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => store.write(op('Patient', 'race', { gender: i % 2 ? 'male' : 'female' }))),
    );
    expect(results.every((r) => r.status === 'ok')).toBe(true);
    const versions = results.map((r) => (r.status === 'ok' ? r.version.versionId : 0)).sort((a, b) => a - b);
    expect(versions).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(await store.history(P, 'Patient', 'race')).toHaveLength(20);
  });

  test('of many concurrent creates of one new id with If-Match 0, exactly one wins', async () => {
    const { store } = await open();
    const results = await Promise.all(
      Array.from({ length: 20 }, () => store.write(op('Patient', 'fresh', {}, { ifMatch: 0 }))),
    );
    expect(results.filter((r) => r.status === 'ok')).toHaveLength(1);
    expect(await store.history(P, 'Patient', 'fresh')).toHaveLength(1);
  });

  test('a deletion is a version without a resource; deleting again changes nothing', async () => {
    const { store } = await open();
    await store.write(op('Patient', 'c', {}));
    expect(await store.write(op('Patient', 'c', null))).toMatchObject({ status: 'ok', version: { versionId: 2 } });
    expect(await store.write(op('Patient', 'c', null))).toMatchObject({
      status: 'unchanged',
      current: { versionId: 2, deleted: true },
    });
    const current = await store.read(P, 'Patient', 'c');
    expect(current?.versionId).toBe(2);
    expect(current?.resource).toBeNull();
    expect((await store.readVersion(P, 'Patient', 'c', 1))?.resource).not.toBeNull();
  });

  test('index rows describe the current version only, and go with a deletion', async () => {
    const { store } = await open();
    const rows = (id: string) =>
      store.query<{ code: string }>(
        'SELECT t.code FROM search_token t JOIN resources r ON r.rid = t.rid WHERE r.type = ? AND r.id = ? ORDER BY t.code',
        ['Observation', id],
      );
    await store.write(op('Observation', 'o1', {}, { index: tokenRows('first') }));
    expect(await rows('o1')).toEqual([{ code: 'first' }]);
    await store.write(op('Observation', 'o1', {}, { index: tokenRows('second') }));
    expect(await rows('o1')).toEqual([{ code: 'second' }]);
    await store.write(op('Observation', 'o1', null));
    expect(await rows('o1')).toEqual([]);
    const strings = await store.query<{ n: number | string }>('SELECT COUNT(*) AS n FROM search_string', []);
    expect(Number(strings[0].n)).toBe(0);
  });

  test('a transaction commits every write together, or none when it throws', async () => {
    const { store } = await open();
    await store.transaction(async (tx) => {
      await tx.write(op('Patient', 't1', {}));
      await tx.write(op('Patient', 't2', {}));
      // Inside, the transaction sees its own writes.
      expect((await tx.read(P, 'Patient', 't1'))?.versionId).toBe(1);
    });
    expect(await store.read(P, 'Patient', 't2')).toBeDefined();
    await expect(
      store.transaction(async (tx) => {
        await tx.write(op('Patient', 't3', {}));
        await tx.write(op('Patient', 't1', { gender: 'male' }));
        throw new Error('the 3rd entry is bad');
      }),
    ).rejects.toThrow('the 3rd entry is bad');
    expect(await store.read(P, 'Patient', 't3')).toBeUndefined();
    expect((await store.read(P, 'Patient', 't1'))?.versionId).toBe(1);
  });

  test('others never see a transaction half-done', async () => {
    const { store } = await open();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let written!: () => void;
    const halfway = new Promise<void>((resolve) => (written = resolve));
    const running = store.transaction(async (tx) => {
      await tx.write(op('Patient', 'h1', {}));
      written();
      await gate;
      await tx.write(op('Patient', 'h2', {}));
    });
    await halfway;
    expect(await store.read(P, 'Patient', 'h1')).toBeUndefined();
    release();
    await running;
    expect(await store.read(P, 'Patient', 'h1')).toBeDefined();
  });

  test('change marks grow per type and list what changed since', async () => {
    const { store } = await open();
    const before = await store.changeMarks(P, ['CodeSystem', 'ValueSet']);
    expect(before.get('CodeSystem')).toBe(0);
    await store.write(op('CodeSystem', 'cs', { url: 'http://x/cs' }, { url: 'http://x/cs' }));
    const afterOne = await store.changeMarks(P, ['CodeSystem', 'ValueSet']);
    expect(afterOne.get('CodeSystem')).toBeGreaterThan(0);
    expect(afterOne.get('ValueSet')).toBe(0);
    await store.write(op('CodeSystem', 'cs', null));
    const changes = await store.changesSince(P, 'CodeSystem', afterOne.get('CodeSystem') as number);
    expect(changes).toHaveLength(1);
    expect(changes[0]).toMatchObject({ id: 'cs', versionId: 2, resource: null });
    expect(await store.changesSince(P, 'CodeSystem', 0)).toHaveLength(1);
  });

  test('settings are kept', async () => {
    const { store } = await open();
    expect(await store.getSetting('k')).toBeUndefined();
    await store.setSetting('k', 'v1');
    await store.setSetting('k', 'v2');
    expect(await store.getSetting('k')).toBe('v2');
  });

  test('what was written survives closing and reopening', async () => {
    const location = await backend.location();
    const first = await location.open();
    await first.write(op('Patient', 'durable', { gender: 'unknown' }));
    await first.close();
    const second = await location.open();
    cleanups.push(async () => {
      await second.close();
      await location.dispose();
    });
    expect((await second.read(P, 'Patient', 'durable'))?.resource).toMatchObject({ gender: 'unknown' });
  });

  test('migrations run once: migrating again is harmless', async () => {
    const { store } = await open();
    await store.write(op('Patient', 'm', {}));
    await store.migrate();
    expect(await store.read(P, 'Patient', 'm')).toBeDefined();
  });

  test('hostile ids and urls are data, never SQL', async () => {
    const { store } = await open();
    const evil = "x'); DROP TABLE resources; --";
    await store.write(op('Patient', evil, {}, { url: evil, index: tokenRows(evil) }));
    expect((await store.read(P, 'Patient', evil))?.id).toBe(evil);
    const found = await store.query<{ id: string }>('SELECT r.id FROM resources r WHERE r.url = ?', [evil]);
    expect(found).toEqual([{ id: evil }]);
    expect(await store.read(P, 'Patient', 'a')).toBeUndefined();
  });

  test('projects are separate: one id in two projects is two resources, with their own versions, index rows and change marks', async () => {
    const { store } = await open();
    await store.write(op('Patient', 'same', { gender: 'male' }, { index: tokenRows('mine') }));
    await store.write({
      ...op('Patient', 'same', { gender: 'female' }, { index: tokenRows('theirs') }),
      project: 'p2',
    });
    await store.write({ ...op('Patient', 'same', { gender: 'other' }), project: 'p2' });
    expect((await store.read(P, 'Patient', 'same'))?.resource).toMatchObject({
      gender: 'male',
      meta: { versionId: '1' },
    });
    expect((await store.read('p2', 'Patient', 'same'))?.resource).toMatchObject({
      gender: 'other',
      meta: { versionId: '2' },
    });
    expect(await store.history(P, 'Patient', 'same')).toHaveLength(1);
    expect(await store.readVersion(P, 'Patient', 'same', 2)).toBeUndefined();
    expect(await store.read('p3', 'Patient', 'same')).toBeUndefined();
    const rows = await store.query<{ project: string; code: string }>(
      'SELECT project, code FROM search_token ORDER BY project',
      [],
    );
    expect(rows).toEqual([{ project: P, code: 'mine' }]);
    expect((await store.changeMarks('p2', ['Patient'])).get('Patient')).toBe(2);
    expect((await store.changeMarks('p3', ['Patient'])).get('Patient')).toBe(0);
    expect((await store.changesSince(P, 'Patient', 0)).map((c) => c.resource)).toEqual([
      expect.objectContaining({ gender: 'male' }),
    ]);
  });

  test('data from before projects moves into the default project, versions, index rows and marks with it', async () => {
    const location = await backend.location();
    const old = await location.open(3);
    await old.close();
    // Rows as the schema of migration 3 held them: no project anywhere.
    await location.raw([
      `INSERT INTO resource_versions (type, id, version, last_updated, content) VALUES ('Patient', 'old', 1, '2024-01-01T00:00:00.000Z', '{"resourceType":"Patient","id":"old","meta":{"versionId":"1"},"gender":"male"}')`,
      `INSERT INTO resources (type, id, version, deleted, url, canonical_version, seq, rid) VALUES ('Patient', 'old', 1, FALSE, NULL, NULL, 1, 1)`,
      `INSERT INTO change_marks (type, seq) VALUES ('Patient', 1)`,
      `INSERT INTO search_token (type, param, rid, grp, system, code, text) VALUES ('Patient', 'gender', 1, 0, 'http://hl7.org/fhir/administrative-gender', 'male', NULL)`,
    ]);
    const store = await location.open();
    cleanups.push(async () => {
      await store.close();
      await location.dispose();
    });
    expect((await store.read('default', 'Patient', 'old'))?.resource).toMatchObject({ gender: 'male' });
    expect(await store.read(P, 'Patient', 'old')).toBeUndefined();
    expect((await store.changeMarks('default', ['Patient'])).get('Patient')).toBe(1);
    expect(await store.query('SELECT project, code FROM search_token', [])).toEqual([
      { project: 'default', code: 'male' },
    ]);
    // And it goes on from there: the next write is version 2, with a new rid for a new resource.
    expect(await store.write({ ...op('Patient', 'old', { gender: 'female' }), project: 'default' })).toMatchObject({
      status: 'ok',
      version: { versionId: 2 },
    });
    expect(await store.write({ ...op('Patient', 'new', {}), project: 'default' })).toMatchObject({ status: 'ok' });
    const rids = await store.query<{ rid: number | string }>('SELECT rid FROM resources ORDER BY rid', []);
    expect(rids.map((r) => Number(r.rid))).toEqual([1, 2]);
  });

  test('ephemeral state: a claim or a take succeeds once, an expired entry is absent, counters count per window', async () => {
    const { store } = await open();
    const e = store.ephemeral;
    const later = Date.now() + 60_000;
    expect(await Promise.all(Array.from({ length: 10 }, () => e.claim('jti', 'client:1', 'x', later)))).toEqual([
      true,
      ...Array(9).fill(false),
    ]);
    expect(await e.claim('jti', 'client:2', 'x', later)).toBe(true);
    // An expired entry may be claimed again.
    expect(await e.claim('jti', 'old', 'x', Date.now() - 1)).toBe(true);
    expect(await e.peek('jti', 'old')).toBeUndefined();
    expect(await e.claim('jti', 'old', 'y', later)).toBe(true);
    await e.put('code', 'c1', '{"user":"u"}', later);
    const takers = await Promise.all(Array.from({ length: 5 }, () => e.take('code', 'c1')));
    expect(takers.filter((t) => t !== undefined)).toEqual(['{"user":"u"}']);
    expect(await e.take('code', 'c1')).toBeUndefined();
    expect(await e.count('login', 'a@b', 60_000)).toBe(1);
    expect(await e.count('login', 'a@b', 60_000)).toBe(2);
    expect(await e.count('login', 'c@d', 60_000)).toBe(1);
    await e.put('key', 'k2', 'two', later);
    await e.put('key', 'k1', 'one', later);
    await e.put('key', 'k0', 'gone', Date.now() - 1);
    expect((await e.list('key')).map((k) => [k.key, k.value])).toEqual([
      ['k1', 'one'],
      ['k2', 'two'],
    ]);
    await e.remove('key', 'k1');
    expect(await e.peek('key', 'k1')).toBeUndefined();
    expect(await e.peek('key', 'k2')).toBe('two');
  });
});
