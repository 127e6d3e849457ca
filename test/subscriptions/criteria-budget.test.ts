import { randomUUID } from 'node:crypto';
import type { Subscription } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { SUBSCRIPTION_EXTENSIONS as EXT } from '../../src/subscriptions/definition';
import { crossProduct, largePatient } from '../helpers/costly-fhirpath';
import { until } from '../helpers/process';
import { FHIR_JSON, onBothBackends } from '../helpers/server-app';

/**
 * A Subscription's FHIRPath criterion is a user's program run on every write of its type. One
 * that costs a minute on a 150 KB resource (a cross product) must cost the server nothing but its
 * time limit, once: the write is stored, other projects are answered meanwhile, the Subscription
 * goes to `error` saying why, and later writes do not evaluate it again.
 */

onBothBackends(
  (name, open) => {
    describe(`Subscription FHIRPath criteria under a time limit (${name})`, () => {
      let server: ServerApp;
      let cleanup: () => Promise<void>;

      const inject = async (
        method: 'GET' | 'POST' | 'PUT',
        url: string,
        options: { project?: string; payload?: object } = {},
      ) => {
        const headers = {
          ...(options.payload ? FHIR_JSON : {}),
          ...(options.project ? { 'x-project': options.project } : {}),
        };
        const res = await server.app.inject({ method, url: `/fhir/R4/${url}`, headers, payload: options.payload });
        return { status: res.statusCode, body: res.body === '' ? undefined : res.json() };
      };

      const newProject = async () => {
        const res = await inject('POST', 'Project/$init', {
          payload: {
            resourceType: 'Parameters',
            parameter: [{ name: 'name', valueString: `fhirpath-${randomUUID()}` }],
          },
        });
        expect(res.status, JSON.stringify(res.body)).toBe(201);
        return (res.body as { id: string }).id;
      };

      const subscribe = async (project: string, expression: string) => {
        const res = await inject('POST', 'Subscription', {
          project,
          payload: {
            resourceType: 'Subscription',
            status: 'requested',
            reason: 'test',
            criteria: 'Patient',
            channel: { type: 'websocket' },
            extension: [{ url: EXT.fhirPathCriteria, valueString: expression }],
          },
        });
        expect(res.status, JSON.stringify(res.body)).toBe(201);
        return (res.body as Subscription).id as string;
      };

      const deliveriesOf = async (subscription: string) => {
        const rows = await server.core.repository.store.query<{ input: string }>(
          "SELECT input FROM jobs WHERE kind = 'subscription-delivery'",
          [],
        );
        return rows.filter((r) => (JSON.parse(r.input) as { subscription: string }).subscription === subscription)
          .length;
      };

      beforeAll(async () => {
        ({ server, cleanup } = await open());
      });
      afterAll(async () => {
        await cleanup?.();
      });

      test('a costly criterion in project B: the write is stored, project A is answered meanwhile, the Subscription goes to error and is not evaluated again', async () => {
        const [a, b] = [await newProject(), await newProject()];
        expect(
          (await inject('PUT', 'Patient/reader', { project: a, payload: { resourceType: 'Patient', id: 'reader' } }))
            .status,
        ).toBe(201);
        const costly = await subscribe(b, crossProduct('current'));
        const plain = await subscribe(b, '%current.name.exists()');

        let writing = true;
        const write = inject('POST', 'Patient', { project: b, payload: largePatient() }).finally(
          () => (writing = false),
        );
        const answered: number[] = [];
        while (writing) {
          const [metadata, read] = await Promise.all([
            inject('GET', 'metadata'),
            inject('GET', 'Patient/reader', { project: a }),
          ]);
          answered.push(metadata.status, read.status);
          // Injected requests settle without I/O: pace the probes so that the write's I/O gets its turns.
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        const written = await write;
        expect(written.status, JSON.stringify(written.body).slice(0, 500)).toBe(201);
        // Before the bound the criterion held the event loop for the whole write: a probe or two at most.
        expect(answered.length).toBeGreaterThanOrEqual(10);
        expect(answered.every((s) => s === 200)).toBe(true);
        // The costly criterion does not match; the other one, in the same batch, still does.
        expect(await deliveriesOf(costly)).toBe(0);
        expect(await deliveriesOf(plain)).toBe(1);

        let stored: Subscription | undefined;
        await until(async () => {
          stored = (await inject('GET', `Subscription/${costly}`, { project: b })).body as Subscription;
          return stored.status === 'error';
        }, 'the costly Subscription is set to error');
        expect(stored?.error).toContain('fhir-path-criteria-expression was stopped');
        expect(stored?.error).toContain('did not finish within 500 ms');

        // Later writes evaluate only the plain criterion, which does not run out of time.
        const stopped = server.services.fhirpath.stats.stopped;
        expect((await inject('POST', 'Patient', { project: b, payload: largePatient() })).status).toBe(201);
        expect(server.services.fhirpath.stats.stopped).toBe(stopped);
        expect(await deliveriesOf(plain)).toBe(2);
      });
    });
  },
  { fhirpathTimeoutMs: 500 },
);
