import type { Bundle, Patient, SearchParameter } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { freshSchema, hasPostgres, POSTGRES_SKIP_REASON, type TestSchema } from '../helpers/postgres';
import { searchIds } from '../helpers/search-oracle';
import { FHIR_JSON, putResource, serverApp } from '../helpers/server-app';

/** SearchParameters users store: searchable once their base type is indexed, in every process. */

const EYES = 'http://example.org/fhir/StructureDefinition/eye-colour';
const patient = (id: string, colour: string): Patient => ({
  resourceType: 'Patient',
  id,
  extension: [{ url: EYES, valueCode: colour }],
});
const eyeColour: SearchParameter = {
  resourceType: 'SearchParameter',
  id: 'eye-colour',
  url: 'http://example.org/fhir/SearchParameter/eye-colour',
  name: 'eye-colour',
  status: 'active',
  description: 'The colour of the eyes',
  code: 'eye-colour',
  base: ['Patient'],
  type: 'token',
  expression: `Patient.extension.where(url='${EYES}').value`,
};

describe('a stored SearchParameter (SQLite)', () => {
  let server: ServerApp;
  beforeAll(async () => {
    server = await serverApp();
    for (const [id, colour] of [
      ['a', 'blue'],
      ['b', 'brown'],
      ['c', 'blue'],
    ])
      await putResource(server.app, patient(id, colour));
  });
  afterAll(() => server.close());
  const get = (url: string, headers: Record<string, string> = {}) =>
    server.app.inject({ method: 'GET', url: `/fhir/R4/${url}`, headers });

  test('before it exists the parameter is unknown: ignored, or 400 when strict', async () => {
    expect((await get('Patient?eye-colour=blue', { prefer: 'handling=strict' })).statusCode).toBe(400);
  });

  test('once stored and indexed it finds what existed before and what is written after', async () => {
    await putResource(server.app, eyeColour);
    const during = await get('Patient?eye-colour=blue');
    // Either still being indexed (400 saying so) or already done: never a partial answer.
    if (during.statusCode === 400) expect(during.json().issue[0].details.text).toContain('being indexed');
    else expect(((during.json() as Bundle).entry ?? []).map((e) => e.resource?.id).sort()).toEqual(['a', 'c']);
    await server.core.custom.settled();
    expect(await searchIds(server.app, '/fhir/R4/Patient?eye-colour=blue')).toEqual(['a', 'c']);
    await putResource(server.app, patient('d', 'blue'));
    expect(await searchIds(server.app, '/fhir/R4/Patient?eye-colour=blue')).toEqual(['a', 'c', 'd']);
    const statement = (await get('metadata')).json();
    const params = statement.rest[0].resource.find((r: { type: string }) => r.type === 'Patient').searchParam;
    expect(params).toContainEqual({ name: 'eye-colour', definition: eyeColour.url, type: 'token' });
  });

  test('one the server cannot evaluate is refused, and nothing is stored', async () => {
    const bad = await server.app.inject({
      method: 'PUT',
      url: '/fhir/R4/SearchParameter/broken',
      headers: FHIR_JSON,
      payload: {
        ...eyeColour,
        id: 'broken',
        url: 'http://example.org/sp/broken',
        code: 'broken',
        expression: 'Patient.where(((',
      },
    });
    expect(bad.statusCode).toBe(400);
    expect((await get('SearchParameter/broken')).statusCode).toBe(404);
    const noType = await server.app.inject({
      method: 'PUT',
      url: '/fhir/R4/SearchParameter/nobase',
      headers: FHIR_JSON,
      payload: { ...eyeColour, id: 'nobase', url: 'http://example.org/sp/nobase', base: ['Nonsense'] },
    });
    expect(noType.statusCode).toBe(400);
  });

  test('deleting it makes it unknown again', async () => {
    expect((await server.app.inject({ method: 'DELETE', url: '/fhir/R4/SearchParameter/eye-colour' })).statusCode).toBe(
      204,
    );
    expect((await get('Patient?eye-colour=blue', { prefer: 'handling=strict' })).statusCode).toBe(400);
  });
});

describe('a stored SearchParameter across two processes over one PostgreSQL', () => {
  if (!hasPostgres) {
    test.skip(POSTGRES_SKIP_REASON, () => undefined);
    return;
  }
  let schema: TestSchema;
  let a: ServerApp;
  let b: ServerApp;
  beforeAll(async () => {
    schema = await freshSchema();
    a = await serverApp({ databaseUrl: schema.url });
    b = await serverApp({ databaseUrl: schema.url });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await schema?.drop();
  });

  test('written through A, searchable through B once indexed', async () => {
    await putResource(a.app, patient('x', 'green'));
    await putResource(a.app, eyeColour);
    await a.core.custom.settled();
    expect(await searchIds(b.app, '/fhir/R4/Patient?eye-colour=green')).toEqual(['x']);
    await putResource(b.app, patient('y', 'green'));
    expect(await searchIds(a.app, '/fhir/R4/Patient?eye-colour=green')).toEqual(['x', 'y']);
  });
});
