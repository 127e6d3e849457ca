import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { FHIR, testApp, type TestApp } from '../helpers/app';

let t: TestApp;
beforeAll(async () => {
  t = await testApp();
});
afterAll(() => t.close());

const vs = (id: string, extra: Record<string, unknown> = {}) => ({
  resourceType: 'ValueSet',
  id,
  url: `http://example.org/fhir/ValueSet/${id}`,
  status: 'active',
  ...extra,
});

function text(body: string): string {
  return JSON.parse(body).issue[0].details.text;
}

describe('create', () => {
  test('POST creates with a server id: 201, Location, ETag, meta', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/fhir/R4/Patient',
      headers: FHIR,
      payload: { resourceType: 'Patient', id: 'ignored', gender: 'female' },
    });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body.id).not.toBe('ignored');
    expect(body.meta.versionId).toBe('1');
    expect(body.meta.lastUpdated).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(res.headers.etag).toBe('W/"1"');
    expect(res.headers.location).toBe(`http://localhost:80/fhir/R4/Patient/${body.id}/_history/1`);
    expect(res.headers['last-modified']).toBe(new Date(body.meta.lastUpdated).toUTCString());
  });

  test('an invalid resource is 400 with the path of the problem, and nothing is stored', async () => {
    // Structure only: codes are checked against their value sets by $validate (or VALIDATE_ON_WRITE).
    const res = await t.app.inject({
      method: 'PUT',
      url: '/fhir/R4/Patient/bad1',
      headers: FHIR,
      payload: { resourceType: 'Patient', id: 'bad1', birthDate: '1970-02-30' },
    });
    expect(res.statusCode).toBe(400);
    const outcome = res.json();
    expect(outcome.issue[0].expression).toEqual(['Patient.birthDate']);
    expect((await t.app.inject({ method: 'GET', url: '/fhir/R4/Patient/bad1' })).statusCode).toBe(404);
    const unknown = await t.app.inject({
      method: 'POST',
      url: '/fhir/R4/Patient',
      headers: FHIR,
      payload: { resourceType: 'Patient', colour: 'blue' },
    });
    expect(unknown.statusCode).toBe(400);
    expect(text(unknown.body)).toContain("'colour' is not an element of Patient");
  });

  test('a body of another type than the URL is 400', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/fhir/R4/Patient',
      headers: FHIR,
      payload: { resourceType: 'Observation' },
    });
    expect(res.statusCode).toBe(400);
    expect(text(res.body)).toBe('The body is a Observation but the URL is for Patient');
  });
});

describe('update, read, vread, history, delete', () => {
  test('PUT creates when absent (201), then updates (200) with growing versions', async () => {
    const first = await t.app.inject({
      method: 'PUT',
      url: '/fhir/R4/ValueSet/vs1',
      headers: FHIR,
      payload: vs('vs1'),
    });
    expect(first.statusCode).toBe(201);
    expect(first.headers.etag).toBe('W/"1"');
    const second = await t.app.inject({
      method: 'PUT',
      url: '/fhir/R4/ValueSet/vs1',
      headers: FHIR,
      payload: vs('vs1', { name: 'Second' }),
    });
    expect(second.statusCode).toBe(200);
    expect(second.headers.etag).toBe('W/"2"');
    expect(second.json().meta.versionId).toBe('2');

    const read = await t.app.inject({ method: 'GET', url: '/fhir/R4/ValueSet/vs1' });
    expect(read.statusCode).toBe(200);
    expect(read.headers.etag).toBe('W/"2"');
    expect(read.headers['last-modified']).toBeDefined();
    expect(read.json().name).toBe('Second');

    const v1 = await t.app.inject({ method: 'GET', url: '/fhir/R4/ValueSet/vs1/_history/1' });
    expect(v1.statusCode).toBe(200);
    expect(v1.json().name).toBeUndefined();
    expect(v1.headers.etag).toBe('W/"1"');
    expect((await t.app.inject({ method: 'GET', url: '/fhir/R4/ValueSet/vs1/_history/9' })).statusCode).toBe(404);

    const history = (await t.app.inject({ method: 'GET', url: '/fhir/R4/ValueSet/vs1/_history' })).json();
    expect(history.type).toBe('history');
    expect(history.entry.map((e: { resource: { meta: { versionId: string } } }) => e.resource.meta.versionId)).toEqual([
      '2',
      '1',
    ]);
  });

  test('If-Match with the current version succeeds; a stale one is 412 and changes nothing', async () => {
    await t.app.inject({ method: 'PUT', url: '/fhir/R4/ValueSet/vs2', headers: FHIR, payload: vs('vs2') });
    const ok = await t.app.inject({
      method: 'PUT',
      url: '/fhir/R4/ValueSet/vs2',
      headers: { ...FHIR, 'if-match': 'W/"1"' },
      payload: vs('vs2', { name: 'B' }),
    });
    expect(ok.statusCode).toBe(200);
    const stale = await t.app.inject({
      method: 'PUT',
      url: '/fhir/R4/ValueSet/vs2',
      headers: { ...FHIR, 'if-match': 'W/"1"' },
      payload: vs('vs2', { name: 'C' }),
    });
    expect(stale.statusCode).toBe(412);
    expect(stale.json().issue[0].code).toBe('conflict');
    expect(text(stale.body)).toBe('If-Match expects ValueSet/vs2 at version 1, but it is at version 2');
    expect((await t.app.inject({ method: 'GET', url: '/fhir/R4/ValueSet/vs2' })).json().name).toBe('B');
    const garbage = await t.app.inject({
      method: 'PUT',
      url: '/fhir/R4/ValueSet/vs2',
      headers: { ...FHIR, 'if-match': 'yesterday' },
      payload: vs('vs2'),
    });
    expect(garbage.statusCode).toBe(400);
  });

  test('If-None-Match with the current ETag is 304', async () => {
    await t.app.inject({ method: 'PUT', url: '/fhir/R4/ValueSet/vs3', headers: FHIR, payload: vs('vs3') });
    const res = await t.app.inject({
      method: 'GET',
      url: '/fhir/R4/ValueSet/vs3',
      headers: { 'if-none-match': 'W/"1"' },
    });
    expect(res.statusCode).toBe(304);
  });

  test('the id in the body must be there and match the URL', async () => {
    const mismatch = await t.app.inject({
      method: 'PUT',
      url: '/fhir/R4/ValueSet/x1',
      headers: FHIR,
      payload: vs('x2'),
    });
    expect(mismatch.statusCode).toBe(400);
    expect(text(mismatch.body)).toBe("The id in the body ('x2') differs from the id in the URL ('x1')");
    const missing = await t.app.inject({
      method: 'PUT',
      url: '/fhir/R4/ValueSet/x1',
      headers: FHIR,
      payload: { resourceType: 'ValueSet', status: 'draft' },
    });
    expect(missing.statusCode).toBe(400);
    expect((await t.app.inject({ method: 'GET', url: '/fhir/R4/ValueSet/x1' })).statusCode).toBe(404);
  });

  test('an id that is not a FHIR id is 400', async () => {
    const long = 'a'.repeat(65);
    expect((await t.app.inject({ method: 'GET', url: `/fhir/R4/Patient/${long}` })).statusCode).toBe(400);
    expect((await t.app.inject({ method: 'GET', url: '/fhir/R4/Patient/a_b' })).statusCode).toBe(400);
  });

  test('DELETE leaves a tombstone: read is 410, history keeps the versions, PUT brings it back', async () => {
    await t.app.inject({ method: 'PUT', url: '/fhir/R4/ValueSet/gone', headers: FHIR, payload: vs('gone') });
    const del = await t.app.inject({ method: 'DELETE', url: '/fhir/R4/ValueSet/gone' });
    expect(del.statusCode).toBe(204);
    const read = await t.app.inject({ method: 'GET', url: '/fhir/R4/ValueSet/gone' });
    expect(read.statusCode).toBe(410);
    expect(read.json().issue[0].code).toBe('deleted');
    expect((await t.app.inject({ method: 'GET', url: '/fhir/R4/ValueSet/gone/_history' })).json().total).toBe(2);
    const back = await t.app.inject({
      method: 'PUT',
      url: '/fhir/R4/ValueSet/gone',
      headers: FHIR,
      payload: vs('gone'),
    });
    expect(back.statusCode).toBe(201);
    expect(back.json().meta.versionId).toBe('3');
    expect((await t.app.inject({ method: 'DELETE', url: '/fhir/R4/ValueSet/never' })).statusCode).toBe(204);
  });

  test('a missing resource is 404 not-found', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/fhir/R4/ValueSet/nope' });
    expect(res.statusCode).toBe(404);
    expect(res.json().issue[0]).toMatchObject({ code: 'not-found', details: { text: 'ValueSet/nope is not known' } });
  });
});

describe('search', () => {
  test('by url and version, as a searchset Bundle', async () => {
    await t.app.inject({
      method: 'PUT',
      url: '/fhir/R4/CodeSystem/s1',
      headers: FHIR,
      payload: {
        resourceType: 'CodeSystem',
        id: 's1',
        url: 'http://example.org/cs',
        version: '1',
        status: 'active',
        content: 'complete',
      },
    });
    await t.app.inject({
      method: 'PUT',
      url: '/fhir/R4/CodeSystem/s2',
      headers: FHIR,
      payload: {
        resourceType: 'CodeSystem',
        id: 's2',
        url: 'http://example.org/cs',
        version: '2',
        status: 'active',
        content: 'complete',
      },
    });
    const all = (await t.app.inject({ method: 'GET', url: '/fhir/R4/CodeSystem?url=http://example.org/cs' })).json();
    expect(all.resourceType).toBe('Bundle');
    expect(all.type).toBe('searchset');
    expect(all.total).toBe(2);
    const one = (
      await t.app.inject({ method: 'GET', url: '/fhir/R4/CodeSystem?url=http://example.org/cs&version=2' })
    ).json();
    expect(one.entry.map((e: { resource: { id: string } }) => e.resource.id)).toEqual(['s2']);
    expect(one.entry[0].fullUrl).toMatch(/\/fhir\/R4\/CodeSystem\/s2$/);
    const paged = (
      await t.app.inject({ method: 'GET', url: '/fhir/R4/CodeSystem?url=http://example.org/cs&_count=1' })
    ).json();
    expect(paged.entry).toHaveLength(1);
    expect(paged.link.find((l: { relation: string }) => l.relation === 'next')).toBeDefined();
    expect((await t.app.inject({ method: 'GET', url: '/fhir/R4/CodeSystem?_count=lots' })).statusCode).toBe(400);
  });
});

describe('OperationDefinitions and metadata', () => {
  test('each operation definition is readable and searchable by url', async () => {
    const read = await t.app.inject({ method: 'GET', url: '/fhir/R4/OperationDefinition/echo' });
    expect(read.statusCode).toBe(200);
    expect(read.json().url).toBe('http://test.local/OperationDefinition/echo');
    const search = (
      await t.app.inject({
        method: 'GET',
        url: '/fhir/R4/OperationDefinition?url=http://test.local/OperationDefinition/reset',
      })
    ).json();
    expect(search.type).toBe('searchset');
    expect(search.entry[0].resource.code).toBe('reset');
    expect((await t.app.inject({ method: 'GET', url: '/fhir/R4/OperationDefinition/none' })).statusCode).toBe(404);
    expect(
      (await t.app.inject({ method: 'PUT', url: '/fhir/R4/OperationDefinition/echo', headers: FHIR, payload: {} }))
        .statusCode,
    ).toBe(405);
  });

  test('the CapabilityStatement is built from the registry and the storage', async () => {
    const cs = (await t.app.inject({ method: 'GET', url: '/fhir/R4/metadata' })).json();
    expect(cs.resourceType).toBe('CapabilityStatement');
    expect(cs.fhirVersion).toBe('4.0.1');
    const rest = cs.rest[0];
    expect(rest.operation.map((o: { name: string }) => o.name).sort()).toEqual(['echo', 'misbehave', 'reset']);
    const patient = rest.resource.find((r: { type: string }) => r.type === 'Patient');
    expect(patient.operation).toEqual([
      { name: 'echo', definition: 'http://test.local/OperationDefinition/echo' },
      { name: 'make-patient', definition: 'http://test.local/OperationDefinition/make-patient' },
    ]);
    expect(patient.interaction.map((i: { code: string }) => i.code)).toEqual(
      expect.arrayContaining(['read', 'vread', 'update', 'delete', 'create', 'search-type', 'history-instance']),
    );
    const od = rest.resource.find((r: { type: string }) => r.type === 'OperationDefinition');
    expect(od.interaction.map((i: { code: string }) => i.code)).toEqual(['read', 'search-type']);
  });
});
