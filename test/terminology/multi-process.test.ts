import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Config } from '../../src/config';
import { animals, SYSTEM, valueSet } from '../fixtures/terminology';
import { freshSchema, hasPostgres, POSTGRES_SKIP_REASON } from '../helpers/postgres';
import { until } from '../helpers/process';
import { FHIR_JSON, outputs, param, serverApp } from '../helpers/server-app';

/**
 * Two server instances over one database (PostgreSQL, or one SQLite file: each instance its own
 * connections, as two processes have): a terminology update through one is used by the writer's
 * own next request at once, and by the other as soon as it learns of it: on its next request with
 * FRESHNESS_CHECK=request, once the notice arrives with `notify` (the default).
 */
function twoInstances(name: string, open: () => Promise<{ config: Partial<Config>; dispose: () => Promise<void> }>) {
  for (const freshnessCheck of ['request', 'notify'] as const) {
    describe(`terminology across two server instances over one ${name} (FRESHNESS_CHECK=${freshnessCheck})`, () => {
      let dispose: () => Promise<void>;
      const apps: { app: FastifyInstance; close: () => Promise<void> }[] = [];

      beforeAll(async () => {
        const opened = await open();
        dispose = opened.dispose;
        apps.push(await serverApp({ ...opened.config, freshnessCheck }));
        apps.push(await serverApp({ ...opened.config, freshnessCheck }));
      });
      afterAll(async () => {
        for (const a of apps) await a.close();
        await dispose?.();
      });

      const validate = async (app: FastifyInstance, code: string) => {
        const res = await app.inject({
          method: 'POST',
          url: '/fhir/R4/ValueSet/$validate-code',
          headers: FHIR_JSON,
          payload: {
            resourceType: 'Parameters',
            parameter: [
              param('url', 'http://example.org/fhir/ValueSet/shared'),
              param('system', SYSTEM),
              param('code', code),
            ],
          },
        });
        return outputs(res.json()).result;
      };
      const put = (app: FastifyInstance, code: string) =>
        app.inject({
          method: 'PUT',
          url: '/fhir/R4/ValueSet/shared',
          headers: FHIR_JSON,
          payload: valueSet('shared', { include: [{ system: SYSTEM, concept: [{ code }] }] }),
        });
      /**
       * `code` is in the value set as `reader` sees it: at once with `request`; with `notify`, once
       * the writer's notice has arrived (asked again until it has, for at most 5 s: notices take
       * milliseconds, the safety check without them 10 s).
       */
      const seen = async (reader: FastifyInstance, code: string, other: string) => {
        if (freshnessCheck === 'notify')
          await until(
            async () => (await validate(reader, code)) === true,
            `${code} valid through the other instance`,
            5000,
          );
        expect(await validate(reader, code)).toBe(true);
        expect(await validate(reader, other)).toBe(false);
      };

      test('a value set written through A is used at once by A, and by B once it learns of it; so is its update', async () => {
        const [a, b] = apps.map((x) => x.app);
        await a.inject({ method: 'PUT', url: '/fhir/R4/CodeSystem/animals', headers: FHIR_JSON, payload: animals });
        await put(a, 'dog');
        // The writer's own next request, whatever the mode.
        expect(await validate(a, 'dog')).toBe(true);
        await seen(b, 'dog', 'cat');
        await put(a, 'cat');
        expect(await validate(a, 'cat')).toBe(true);
        expect(await validate(a, 'dog')).toBe(false);
        await seen(b, 'cat', 'dog');
        // And back through B.
        await put(b, 'dog');
        expect(await validate(b, 'dog')).toBe(true);
        await seen(a, 'dog', 'cat');
      });
    });
  }
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
