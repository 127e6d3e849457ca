import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Resource } from 'fhir/r4';
import { afterAll, describe, expect, test } from 'vitest';
import { PostgresStore } from '../../src/storage/postgres/postgres-store';
import { SqliteStore } from '../../src/storage/sqlite/sqlite-store';
import type { NewVersion, ResourceStore } from '../../src/storage/store';
import { freshSchema, hasPostgres, POSTGRES_SKIP_REASON } from '../helpers/postgres';

/**
 * One contract, every backend: what the repository relies on, checked against each store.
 * `open` gives a store over the same durable location each time it is called.
 */
interface Backend {
  name: string;
  available: boolean;
  location(): Promise<{ open(): Promise<ResourceStore>; dispose(): Promise<void> }>;
}

const backends: Backend[] = [
  {
    name: 'sqlite',
    available: true,
    location: async () => {
      const dir = mkdtempSync(join(tmpdir(), 'fhir-contract-'));
      return {
        open: async () => {
          const store = new SqliteStore(dir);
          await store.migrate();
          return store;
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
        open: async () => {
          const store = new PostgresStore(schema.url);
          await store.migrate();
          return store;
        },
        dispose: () => schema.drop(),
      };
    },
  },
];

function version(type: string, id: string, versionId: number, resource: Record<string, unknown> | null, extra: Partial<NewVersion> = {}): NewVersion {
  return {
    type,
    id,
    versionId,
    lastUpdated: new Date(Date.UTC(2024, 0, 1, 0, 0, versionId)).toISOString(),
    resource: resource === null ? null : ({ resourceType: type, id, ...resource } as Resource),
    ...extra,
  };
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

  test('a version appended can be read back, as current and by number', async () => {
    const { store } = await open();
    expect(await store.read('Patient', 'a')).toBeUndefined();
    expect(await store.append(version('Patient', 'a', 1, { gender: 'male' }))).toBe('ok');
    expect(await store.append(version('Patient', 'a', 2, { gender: 'female' }))).toBe('ok');
    const current = await store.read('Patient', 'a');
    expect(current?.versionId).toBe(2);
    expect(current?.lastUpdated).toBe('2024-01-01T00:00:02.000Z');
    expect(current?.resource).toEqual({ resourceType: 'Patient', id: 'a', gender: 'female' });
    expect((await store.readVersion('Patient', 'a', 1))?.resource).toMatchObject({ gender: 'male' });
    expect(await store.readVersion('Patient', 'a', 3)).toBeUndefined();
    expect((await store.history('Patient', 'a')).map((v) => v.versionId)).toEqual([2, 1]);
  });

  test('appending a version that exists is a conflict and changes nothing', async () => {
    const { store } = await open();
    await store.append(version('Patient', 'b', 1, { gender: 'male' }));
    expect(await store.append(version('Patient', 'b', 1, { gender: 'other' }))).toBe('conflict');
    expect((await store.read('Patient', 'b'))?.resource).toMatchObject({ gender: 'male' });
    expect(await store.history('Patient', 'b')).toHaveLength(1);
  });

  test('of many concurrent writers of one version, exactly one wins', async () => {
    const { store } = await open();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => store.append(version('Patient', 'race', 1, { gender: i % 2 ? 'male' : 'female' }))),
    );
    expect(results.filter((r) => r === 'ok')).toHaveLength(1);
    expect(await store.history('Patient', 'race')).toHaveLength(1);
  });

  test('a deletion is a version without a resource', async () => {
    const { store } = await open();
    await store.append(version('Patient', 'c', 1, {}));
    await store.append(version('Patient', 'c', 2, null));
    const current = await store.read('Patient', 'c');
    expect(current?.versionId).toBe(2);
    expect(current?.resource).toBeNull();
    expect((await store.readVersion('Patient', 'c', 1))?.resource).not.toBeNull();
  });

  test('search finds current, undeleted resources by url, version and id, with paging', async () => {
    const { store } = await open();
    await store.append(version('ValueSet', 'v1', 1, { url: 'http://x/vs' }, { url: 'http://x/vs', version: '1.0' }));
    await store.append(version('ValueSet', 'v2', 1, { url: 'http://x/vs' }, { url: 'http://x/vs', version: '2.0' }));
    await store.append(version('ValueSet', 'v3', 1, { url: 'http://x/other' }, { url: 'http://x/other' }));
    await store.append(version('ValueSet', 'v4', 1, { url: 'http://x/vs' }, { url: 'http://x/vs', version: '3.0' }));
    await store.append(version('ValueSet', 'v4', 2, null));
    const all = await store.search('ValueSet', { url: 'http://x/vs' }, { count: 10, offset: 0 });
    expect(all.total).toBe(2);
    expect(all.resources.map((r) => r.id)).toEqual(['v1', 'v2']);
    const pinned = await store.search('ValueSet', { url: 'http://x/vs', version: '2.0' }, { count: 10, offset: 0 });
    expect(pinned.resources.map((r) => r.id)).toEqual(['v2']);
    const page = await store.search('ValueSet', {}, { count: 2, offset: 1 });
    expect(page.total).toBe(3);
    expect(page.resources.map((r) => r.id)).toEqual(['v2', 'v3']);
    expect((await store.search('ValueSet', { id: 'v3' }, { count: 10, offset: 0 })).total).toBe(1);
  });

  test('change marks grow per type and list what changed since', async () => {
    const { store } = await open();
    const before = await store.changeMarks(['CodeSystem', 'ValueSet']);
    expect(before.get('CodeSystem')).toBe(0);
    await store.append(version('CodeSystem', 'cs', 1, { url: 'http://x/cs' }, { url: 'http://x/cs' }));
    const afterOne = await store.changeMarks(['CodeSystem', 'ValueSet']);
    expect(afterOne.get('CodeSystem')).toBeGreaterThan(0);
    expect(afterOne.get('ValueSet')).toBe(0);
    await store.append(version('CodeSystem', 'cs', 2, null));
    const changes = await store.changesSince('CodeSystem', afterOne.get('CodeSystem') as number);
    expect(changes).toHaveLength(1);
    expect(changes[0]).toMatchObject({ id: 'cs', versionId: 2, resource: null });
    expect(await store.changesSince('CodeSystem', 0)).toHaveLength(1);
  });

  test('what was written survives closing and reopening', async () => {
    const location = await backend.location();
    const first = await location.open();
    await first.append(version('Patient', 'durable', 1, { gender: 'unknown' }));
    await first.close();
    const second = await location.open();
    cleanups.push(async () => {
      await second.close();
      await location.dispose();
    });
    expect((await second.read('Patient', 'durable'))?.resource).toMatchObject({ gender: 'unknown' });
  });

  test('migrations run once: migrating again is harmless', async () => {
    const { store } = await open();
    await store.append(version('Patient', 'm', 1, {}));
    await store.migrate();
    expect(await store.read('Patient', 'm')).toBeDefined();
  });

  test('hostile ids and urls are data, never SQL', async () => {
    const { store } = await open();
    const evil = "x'); DROP TABLE resources; --";
    await store.append(version('Patient', evil, 1, {}, { url: evil }));
    expect((await store.read('Patient', evil))?.id).toBe(evil);
    expect((await store.search('Patient', { url: evil }, { count: 1, offset: 0 })).total).toBe(1);
    expect(await store.read('Patient', 'a')).toBeUndefined();
  });
});
