import fc from 'fast-check';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { operationModules } from '../../src/operations/index';
import { buildRegistry, loadDefinitions } from '../../src/operations/registry';
import { DEFINITIONS_DIR } from '../../src/project';
import type { AppServices } from '../../src/services';
import { anyRequest, type FuzzRequest } from '../helpers/fuzz-requests';
import { onBothBackends, putResource, type OpenServer } from '../helpers/server-app';

/**
 * The whole REST surface fuzzed, on both backends: searches, conditional writes (criteria named
 * like Object's members too), both PATCH kinds, batch and transaction Bundles, GraphQL, and every
 * operation's Parameters as its definition names them (test/helpers/fuzz-requests.ts). Every answer
 * is below 500 and a FHIR error is an OperationOutcome; the event loop is never held 1 s; the
 * server answers normally after. FUZZ_REQUESTS sets the requests per backend (default 2,000; the
 * issue's acceptance run is FUZZ_REQUESTS=100000); FUZZ_SEED replays another seed (fuzz-seed.ts).
 */

const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 2_000);
const SEED =
  process.env.FUZZ_SEED === 'random' ? Math.floor(Math.random() * 2 ** 31) : Number(process.env.FUZZ_SEED || 20261129);
/** Requests drawn at a time (each batch from its own seed, so a long run does not hold them all). */
const BATCH = 500;
const STALL_MS = 1_000;

const specs = buildRegistry<AppServices>(loadDefinitions(DEFINITIONS_DIR), operationModules).operations.map(
  (op) => op.spec,
);

interface Finding {
  request: FuzzRequest;
  status: number;
  body: string;
}

function suite(name: string, open: () => Promise<OpenServer>) {
  describe(`fuzzing the REST surface (${name})`, () => {
    let server: ServerApp;
    let cleanup: () => Promise<void>;
    beforeAll(async () => {
      ({ server, cleanup } = await open());
      await seed();
      // First uses build what later requests share (the GraphQL schema, 3.4 s on a busy machine; the
      // bundled definitions a read of an unknown id falls back to, 1 to 1.5 s): one-off costs of the
      // process, not of the requests fuzzed, so paid before the event loop is watched.
      const warm = await server.app.inject({
        method: 'POST',
        url: '/fhir/R4/$graphql',
        headers: { 'content-type': 'application/json' },
        payload: { query: '{ Patient(id: "p1") { id } }' },
      });
      expect(warm.statusCode, warm.body).toBe(200);
      for (const type of [
        'StructureDefinition',
        'CompartmentDefinition',
        'SearchParameter',
        'OperationDefinition',
        'ValueSet',
        'CodeSystem',
        'ConceptMap',
      ]) {
        expect((await server.app.inject({ method: 'GET', url: `/fhir/R4/${type}/missing` })).statusCode).toBeLessThan(
          500,
        );
      }
    });
    afterAll(() => cleanup?.());

    /** What the generated requests name: restored now and then, since they delete and patch it. */
    async function seed(): Promise<void> {
      await putResource(server.app, {
        resourceType: 'Patient',
        id: 'p1',
        name: [{ family: 'Doe', given: ['Jane'] }],
        gender: 'female',
        extension: [{ url: 'http://example.org/x', valueString: 'x' }],
      } as never);
      await putResource(server.app, {
        resourceType: 'Observation',
        id: 'o1',
        status: 'final',
        code: { text: 'x' },
        subject: { reference: 'Patient/p1' },
      } as never);
    }

    test(
      `${REQUESTS} generated requests: no 5xx, no stall of ${STALL_MS} ms, still serving`,
      async () => {
        const arbitrary = anyRequest(specs);
        const findings: Finding[] = [];
        const statuses = new Map<string, number>();
        const delay = monitorEventLoopDelay({ resolution: 10 });
        let slowest = { ms: 0, request: undefined as FuzzRequest | undefined };
        const started = performance.now();
        delay.enable();
        for (let done = 0, batch = 0; done < REQUESTS; batch++) {
          const requests = fc.sample(arbitrary, { numRuns: Math.min(BATCH, REQUESTS - done), seed: SEED + batch });
          for (const request of requests) {
            const start = performance.now();
            const res = await server.app.inject({
              method: request.method,
              url: `/fhir/R4/${request.url}`,
              headers: request.headers,
              payload: request.payload,
            });
            const ms = performance.now() - start;
            if (ms > slowest.ms) slowest = { ms, request };
            const key = `${request.kind} ${Math.floor(res.statusCode / 100)}xx`;
            statuses.set(key, (statuses.get(key) ?? 0) + 1);
            if (res.statusCode >= 500 || !wellFormed(res))
              findings.push({ request, status: res.statusCode, body: res.body.slice(0, 300) });
          }
          done += requests.length;
          await seed();
        }
        delay.disable();
        const seconds = (performance.now() - started) / 1000;
        process.stdout.write(
          `REST fuzz (${name}, seed ${SEED}): ${REQUESTS} requests in ${seconds.toFixed(0)} s, ${findings.length} findings, ` +
            `event loop delay max ${(delay.max / 1e6).toFixed(0)} ms (p99 ${(delay.percentile(99) / 1e6).toFixed(0)} ms), slowest request ${slowest.ms.toFixed(0)} ms ` +
            `(${slowest.request?.kind} ${slowest.request?.method} ${slowest.request?.url.slice(0, 80)})\n  ${JSON.stringify(Object.fromEntries([...statuses].sort()))}\n`,
        );
        for (const f of findings.slice(0, 20))
          process.stdout.write(
            `  ${f.status} ${f.request.method} ${f.request.url.slice(0, 200)} ${JSON.stringify(f.request.headers)} ${f.request.payload?.slice(0, 300)}\n    -> ${f.body}\n`,
          );
        expect(
          findings.map((f) => `${f.status} ${f.request.kind} ${f.request.method} ${f.request.url.slice(0, 100)}`),
        ).toEqual([]);
        expect(delay.max / 1e6).toBeLessThan(STALL_MS);
        const res = await server.app.inject({ method: 'GET', url: '/fhir/R4/Patient/p1' });
        expect(res.statusCode).toBe(200);
      },
      120_000 + REQUESTS * 60,
    );
  });
}

/** A FHIR answer is an OperationOutcome when it is an error; GraphQL answers its own JSON. */
function wellFormed(res: { statusCode: number; headers: Record<string, unknown>; body: string }): boolean {
  if (res.statusCode < 400 || !String(res.headers['content-type']).includes('application/fhir+json')) return true;
  try {
    const body = JSON.parse(res.body) as { resourceType?: string; issue?: unknown[] };
    return body.resourceType === 'OperationOutcome' && Array.isArray(body.issue) && body.issue.length > 0;
  } catch {
    return false;
  }
}

onBothBackends(suite);
