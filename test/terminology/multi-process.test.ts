import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { animals, SYSTEM, valueSet } from '../fixtures/terminology';
import { freshSchema, hasPostgres, POSTGRES_SKIP_REASON, type TestSchema } from '../helpers/postgres';
import { FHIR_JSON, outputs, param, serverApp } from '../helpers/server-app';

/** Two server instances over one PostgreSQL: a terminology update on one is used by the other at once. */
describe.skipIf(!hasPostgres)('terminology across two server instances over one PostgreSQL', () => {
  let schema: TestSchema;
  const apps: { app: FastifyInstance; close: () => Promise<void> }[] = [];

  beforeAll(async () => {
    schema = await freshSchema();
    apps.push(await serverApp({ databaseUrl: schema.url }));
    apps.push(await serverApp({ databaseUrl: schema.url }));
  });
  afterAll(async () => {
    for (const a of apps) await a.close();
    await schema?.drop();
  });

  const validate = (app: FastifyInstance, code: string) =>
    app.inject({
      method: 'POST',
      url: '/fhir/R4/ValueSet/$validate-code',
      headers: FHIR_JSON,
      payload: { resourceType: 'Parameters', parameter: [param('url', 'http://example.org/fhir/ValueSet/shared'), param('system', SYSTEM), param('code', code)] },
    });

  test('a value set written through A is used by B on its next request, and so is its update', async () => {
    const [a, b] = apps.map((x) => x.app);
    await a.inject({ method: 'PUT', url: '/fhir/R4/CodeSystem/animals', headers: FHIR_JSON, payload: animals });
    await a.inject({ method: 'PUT', url: '/fhir/R4/ValueSet/shared', headers: FHIR_JSON, payload: valueSet('shared', { include: [{ system: SYSTEM, concept: [{ code: 'dog' }] }] }) });
    expect(outputs((await validate(b, 'dog')).json()).result).toBe(true);
    expect(outputs((await validate(b, 'cat')).json()).result).toBe(false);
    await a.inject({ method: 'PUT', url: '/fhir/R4/ValueSet/shared', headers: FHIR_JSON, payload: valueSet('shared', { include: [{ system: SYSTEM, concept: [{ code: 'cat' }] }] }) });
    expect(outputs((await validate(b, 'cat')).json()).result).toBe(true);
    expect(outputs((await validate(b, 'dog')).json()).result).toBe(false);
  });
});

if (!hasPostgres) test.skip(POSTGRES_SKIP_REASON, () => undefined);
