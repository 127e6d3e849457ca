import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PostgresStore } from '../../src/storage/postgres/postgres-store';
import { FHIR, testApp, type TestApp } from '../helpers/app';
import { freshSchema, hasPostgres, POSTGRES_SKIP_REASON, type TestSchema } from '../helpers/postgres';

/** Two server instances over one PostgreSQL behave as one server. */
describe.skipIf(!hasPostgres)('two app instances over one PostgreSQL', () => {
  let schema: TestSchema;
  let a: TestApp;
  let b: TestApp;
  const stores: PostgresStore[] = [];

  beforeAll(async () => {
    schema = await freshSchema();
    for (let i = 0; i < 2; i++) {
      const store = new PostgresStore(schema.url);
      await store.migrate();
      stores.push(store);
    }
    a = await testApp({ store: stores[0] });
    b = await testApp({ store: stores[1] });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    for (const s of stores) await s.close();
    await schema?.drop();
  });

  test('what one writes, the other reads at once', async () => {
    const put = await a.app.inject({
      method: 'PUT',
      url: '/fhir/R4/Patient/shared',
      headers: FHIR,
      payload: { resourceType: 'Patient', id: 'shared', gender: 'male' },
    });
    expect(put.statusCode).toBe(201);
    const read = await b.app.inject({ method: 'GET', url: '/fhir/R4/Patient/shared' });
    expect(read.statusCode).toBe(200);
    expect(read.json().gender).toBe('male');
    const update = await b.app.inject({
      method: 'PUT',
      url: '/fhir/R4/Patient/shared',
      headers: { ...FHIR, 'if-match': 'W/"1"' },
      payload: { resourceType: 'Patient', id: 'shared', gender: 'female' },
    });
    expect(update.statusCode).toBe(200);
    const stale = await a.app.inject({
      method: 'PUT',
      url: '/fhir/R4/Patient/shared',
      headers: { ...FHIR, 'if-match': 'W/"1"' },
      payload: { resourceType: 'Patient', id: 'shared', gender: 'other' },
    });
    expect(stale.statusCode).toBe(412);
    expect((await a.app.inject({ method: 'GET', url: '/fhir/R4/Patient/shared' })).json().gender).toBe('female');
  });

  test('racing If-Match updates through both instances: one winner per version, no gaps', async () => {
    await a.app.inject({
      method: 'PUT',
      url: '/fhir/R4/Patient/race',
      headers: FHIR,
      payload: { resourceType: 'Patient', id: 'race' },
    });
    const attempts = Array.from({ length: 20 }, (_, i) =>
      (i % 2 ? a : b).app.inject({
        method: 'PUT',
        url: '/fhir/R4/Patient/race',
        headers: { ...FHIR, 'if-match': 'W/"1"' },
        payload: { resourceType: 'Patient', id: 'race', gender: i % 2 ? 'male' : 'female' },
      }),
    );
    const statuses = (await Promise.all(attempts)).map((r) => r.statusCode);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 412)).toHaveLength(19);
    const history = (await b.app.inject({ method: 'GET', url: '/fhir/R4/Patient/race/_history' })).json();
    expect(history.entry.map((e: { resource: { meta: { versionId: string } } }) => e.resource.meta.versionId)).toEqual([
      '2',
      '1',
    ]);
  });

  test('unconditional updates through both instances all land, as consecutive versions', async () => {
    await a.app.inject({
      method: 'PUT',
      url: '/fhir/R4/Patient/many',
      headers: FHIR,
      payload: { resourceType: 'Patient', id: 'many' },
    });
    const writes = Array.from({ length: 10 }, (_, i) =>
      (i % 2 ? a : b).app.inject({
        method: 'PUT',
        url: '/fhir/R4/Patient/many',
        headers: FHIR,
        payload: { resourceType: 'Patient', id: 'many' },
      }),
    );
    const statuses = (await Promise.all(writes)).map((r) => r.statusCode);
    expect(statuses.every((s) => s === 200)).toBe(true);
    const history = (await a.app.inject({ method: 'GET', url: '/fhir/R4/Patient/many/_history' })).json();
    expect(
      history.entry.map((e: { resource: { meta: { versionId: string } } }) => Number(e.resource.meta.versionId)),
    ).toEqual(Array.from({ length: 11 }, (_, i) => 11 - i));
  });
});

if (!hasPostgres) {
  test.skip(POSTGRES_SKIP_REASON, () => undefined);
}
