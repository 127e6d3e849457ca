import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Config } from '../../src/config';
import { animals, SYSTEM, valueSet } from '../fixtures/terminology';
import { freshSchema, hasPostgres, POSTGRES_SKIP_REASON } from '../helpers/postgres';
import { FHIR_JSON, outputs, param, serverApp } from '../helpers/server-app';

/**
 * Two server instances over one database (PostgreSQL, or one SQLite file: each instance its own
 * connections, as two processes have): a terminology update on one is used by the other at once.
 */
function twoInstances(name: string, open: () => Promise<{ config: Partial<Config>; dispose: () => Promise<void> }>) {
  describe(`terminology across two server instances over one ${name}`, () => {
    let dispose: () => Promise<void>;
    const apps: { app: FastifyInstance; close: () => Promise<void> }[] = [];

    beforeAll(async () => {
      const opened = await open();
      dispose = opened.dispose;
      apps.push(await serverApp(opened.config));
      apps.push(await serverApp(opened.config));
    });
    afterAll(async () => {
      for (const a of apps) await a.close();
      await dispose?.();
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
      // And back through B: A sees it on its next request too.
      await b.inject({ method: 'PUT', url: '/fhir/R4/ValueSet/shared', headers: FHIR_JSON, payload: valueSet('shared', { include: [{ system: SYSTEM, concept: [{ code: 'dog' }] }] }) });
      expect(outputs((await validate(a, 'dog')).json()).result).toBe(true);
      expect(outputs((await validate(a, 'cat')).json()).result).toBe(false);
    });
  });
}

twoInstances('SQLite file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fhir-two-'));
  return { config: { dataDir: dir }, dispose: async () => rmSync(dir, { recursive: true, force: true }) };
});

if (hasPostgres) {
  twoInstances('PostgreSQL', async () => {
    const schema = await freshSchema();
    return { config: { databaseUrl: schema.url }, dispose: () => schema.drop() };
  });
} else {
  test.skip(POSTGRES_SKIP_REASON, () => undefined);
}
