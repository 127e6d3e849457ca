import type { ChildProcess } from 'node:child_process';
import type { Bundle, Resource } from 'fhir/r4';
import { FHIR_JSON, runBench, withBuiltServer } from './harness';
import { cql, hypertensionValueSet, measure, ownLibrary, pop } from '../test/measures/own-measures';
import { schemaIn } from '../test/helpers/schema';

/**
 * `npm run bench:hostile`: the hostile inputs of the hardening issue, each sent to the built server
 * (as `npm start` runs it, SQLite in a fresh folder; PostgreSQL too when TEST_DATABASE_URL is set)
 * while a client asks `GET /metadata` back to back. For each input: its status and time, and the
 * probe's p50/p99/max while it ran; then the same input again with a SIGTERM sent once it is in
 * flight, and the time until the process has exited (the bound is DRAIN_TIMEOUT_MS + 2 s).
 *
 * HOSTILE_ONLY=graphql,patch,... runs a subset; HOSTILE_MEASURE_PATIENTS sets the measure's size.
 */

const DRAIN_MS = 5_000;
const MEASURE_PATIENTS = Number(process.env.HOSTILE_MEASURE_PATIENTS ?? 3000);

interface Hostile {
  name: string;
  /**
   * Stores what the input needs and sends one harmless request of the same kind (not measured), so
   * that what is measured is the hostile input, not a feature's first-use load (the GraphQL schema,
   * the CQL engine), which `firstUse` in the table reports separately.
   */
  setup?: (base: string) => Promise<void>;
  /** The hostile request; answers its status. */
  send: (base: string) => Promise<number>;
  /** The probe's p99 bound of the issue, in ms. */
  boundMs: number;
}

async function call(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${base}/${path}`, {
    method,
    headers: body === undefined ? headers : { 'content-type': FHIR_JSON, ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    // A server that never answers is a finding, not a hang of the benchmark.
    signal: AbortSignal.timeout(120_000),
  });
}

async function must(res: Promise<Response>, what: string): Promise<void> {
  const answer = await res;
  if (answer.status >= 300) throw new Error(`${what}: ${answer.status} ${(await answer.text()).slice(0, 300)}`);
  await answer.arrayBuffer();
}

/** 40 named fragments, each spreading the next twice: 2^40 fields when expanded naively. */
function nestedFragments(levels: number): string {
  const parts = [`query { Patient(id: "p1") { ...F0 } }`];
  for (let i = 0; i < levels; i++)
    parts.push(`fragment F${i} on Patient { id ${i + 1 < levels ? `...F${i + 1} ...F${i + 1}` : ''} }`);
  return parts.join('\n');
}

function bigPatient(id: string, kb: number): Resource {
  const names = Array.from({ length: Math.ceil((kb * 1024) / 120) }, (_, i) => ({
    family: `Family${i}`,
    given: [`Given${i}`, `Other${i}`],
  }));
  return { resourceType: 'Patient', id, name: names } as Resource;
}

const PATHOLOGICAL_FHIRPATH =
  'Patient.name.given.combine(Patient.name.family).combine(Patient.name.given).select(%resource.descendants().where($this.toString().length() > 0)).count() > 0';

const HOSTILES: Hostile[] = [
  {
    name: 'graphql-fragments',
    boundMs: 100,
    setup: async (base) => {
      await must(call(base, 'PUT', 'Patient/p1', { resourceType: 'Patient', id: 'p1' }), 'patient');
      await must(
        call(base, 'POST', '$graphql', JSON.stringify({ query: '{ Patient(id: "p1") { id } }' }), {
          'content-type': 'application/json',
        }),
        'a first query',
      );
    },
    send: async (base) =>
      (
        await call(base, 'POST', '$graphql', JSON.stringify({ query: nestedFragments(40) }), {
          'content-type': 'application/json',
        })
      ).status,
  },
  {
    name: 'json-patch-doubling',
    boundMs: 100,
    setup: async (base) => {
      await must(
        call(base, 'PUT', 'Patient/p2', {
          resourceType: 'Patient',
          id: 'p2',
          extension: [{ url: 'http://example.org/x', valueString: 'x'.repeat(100) }],
        }),
        'patient',
      );
      await must(
        call(base, 'PATCH', 'Patient/p2', JSON.stringify([{ op: 'add', path: '/active', value: true }]), {
          'content-type': 'application/json-patch+json',
        }),
        'a first patch',
      );
    },
    send: async (base) => {
      const ops = Array.from({ length: 30 }, () => ({ op: 'copy', from: '/extension', path: '/extension/-' }));
      return (
        await call(base, 'PATCH', 'Patient/p2', JSON.stringify(ops), { 'content-type': 'application/json-patch+json' })
      ).status;
    },
  },
  {
    name: 'subscription-criterion',
    boundMs: 200,
    setup: async (base) => {
      const sub = {
        resourceType: 'Subscription',
        id: 'hostile',
        status: 'requested',
        reason: 'hostile',
        criteria: 'Patient',
        channel: { type: 'websocket' },
        extension: [
          {
            url: 'https://medplum.com/fhir/StructureDefinition/fhir-path-criteria-expression',
            valueString: PATHOLOGICAL_FHIRPATH,
          },
        ],
      };
      await must(call(base, 'PUT', 'Subscription/hostile', sub), 'subscription');
    },
    send: async (base) => (await call(base, 'PUT', 'Patient/big', bigPatient('big', 150))).status,
  },
  {
    name: 'profile-invariant',
    boundMs: 200,
    setup: async (base) => {
      const profile = {
        resourceType: 'StructureDefinition',
        id: 'hostile-patient',
        url: 'http://example.org/StructureDefinition/hostile-patient',
        name: 'HostilePatient',
        status: 'active',
        kind: 'resource',
        abstract: false,
        type: 'Patient',
        baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient',
        derivation: 'constraint',
        differential: {
          element: [
            {
              id: 'Patient',
              path: 'Patient',
              constraint: [
                { key: 'hostile-1', severity: 'error', human: 'hostile', expression: PATHOLOGICAL_FHIRPATH },
              ],
            },
          ],
        },
      };
      await must(call(base, 'PUT', 'StructureDefinition/hostile-patient', profile), 'profile');
    },
    send: async (base) => {
      const patient = {
        ...bigPatient('v', 150),
        meta: { profile: ['http://example.org/StructureDefinition/hostile-patient'] },
      };
      return (await call(base, 'POST', 'Patient/$validate', patient)).status;
    },
  },
  {
    name: 'batch-10000',
    boundMs: 200,
    send: async (base) => {
      const entry = Array.from({ length: 10_000 }, (_, i) => ({
        request: { method: 'POST' as const, url: 'Basic' },
        resource: { resourceType: 'Basic', code: { text: `b${i}` } },
      }));
      return (await call(base, 'POST', '', { resourceType: 'Bundle', type: 'batch', entry } satisfies Bundle)).status;
    },
  },
  {
    name: 'transaction-17000',
    boundMs: 200,
    send: async (base) => {
      const entry = Array.from({ length: 17_000 }, (_, i) => ({
        fullUrl: `urn:uuid:00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
        request: { method: 'POST' as const, url: 'Basic' },
        resource: { resourceType: 'Basic', code: { text: `t${i}` } },
      }));
      return (await call(base, 'POST', '', { resourceType: 'Bundle', type: 'transaction', entry } satisfies Bundle))
        .status;
    },
  },
  {
    name: 'everything-1000',
    boundMs: 200,
    setup: async (base) => {
      const entry = [
        { request: { method: 'PUT', url: 'Patient/rich' }, resource: { resourceType: 'Patient', id: 'rich' } },
        ...Array.from({ length: 5000 }, (_, i) => ({
          request: { method: 'POST', url: 'Observation' },
          resource: {
            resourceType: 'Observation',
            status: 'final',
            code: { text: `o${i}` },
            subject: { reference: 'Patient/rich' },
            valueQuantity: { value: i },
          },
        })),
      ];
      await must(call(base, 'POST', '', { resourceType: 'Bundle', type: 'batch', entry }), 'observations');
    },
    send: async (base) => {
      const res = await call(base, 'GET', 'Patient/rich/$everything?_count=1000');
      await res.arrayBuffer();
      return res.status;
    },
  },
  {
    name: `evaluate-measure-${MEASURE_PATIENTS}`,
    boundMs: 200,
    setup: async (base) => {
      for (let start = 0; start < MEASURE_PATIENTS; start += 1000) {
        const entry = Array.from({ length: Math.min(1000, MEASURE_PATIENTS - start) }, (_, k) => {
          const i = start + k;
          return [
            {
              request: { method: 'PUT', url: `Patient/m${i}` },
              resource: {
                resourceType: 'Patient',
                id: `m${i}`,
                gender: i % 2 ? 'male' : 'female',
                birthDate: '1970-01-01',
              },
            },
            {
              request: { method: 'POST', url: 'Encounter' },
              resource: {
                resourceType: 'Encounter',
                status: 'finished',
                class: { code: 'AMB' },
                subject: { reference: `Patient/m${i}` },
                period: { start: '2019-03-01T10:00:00Z', end: '2019-03-02T10:00:00Z' },
              },
            },
          ];
        }).flat();
        await must(call(base, 'POST', '', { resourceType: 'Bundle', type: 'batch', entry }), 'measure patients');
      }
      const m = measure('hostile-measure', {
        scoringCode: 'proportion',
        library: [ownLibrary.url as string],
        group: [
          {
            id: 'g',
            population: [
              pop('initial-population', cql('Initial Population')),
              pop('denominator', cql('Denominator')),
              pop('numerator', cql('Numerator')),
            ],
          },
        ],
      });
      await must(call(base, 'PUT', `ValueSet/${hypertensionValueSet.id}`, hypertensionValueSet), 'value set');
      await must(call(base, 'PUT', `Library/${ownLibrary.id}`, ownLibrary), 'library');
      await must(call(base, 'PUT', `Measure/${m.id}`, m), 'measure');
      // The CQL engine loads with the first measure of a process: one patient's report first.
      await must(
        call(
          base,
          'GET',
          'Measure/hostile-measure/$evaluate-measure?periodStart=2019-01-01&periodEnd=2019-12-31&reportType=subject&subject=Patient/m0',
        ),
        'a first report',
      );
    },
    send: async (base) => {
      const res = await call(
        base,
        'GET',
        'Measure/hostile-measure/$evaluate-measure?periodStart=2019-01-01&periodEnd=2019-12-31&reportType=population',
      );
      const body = await res.text();
      if (res.status >= 300) console.log(`evaluate-measure: ${res.status} ${body.slice(0, 300)}`);
      return res.status;
    },
  },
];

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** Asks /metadata back to back until `stop` resolves; answers each probe's time in ms. */
async function probe(base: string, stop: Promise<unknown>): Promise<number[]> {
  const times: number[] = [];
  let done = false;
  void stop.finally(() => (done = true));
  while (!done) {
    const t0 = performance.now();
    const res = await fetch(`${base}/metadata`).catch(() => undefined);
    await res?.arrayBuffer();
    times.push(performance.now() - t0);
  }
  return times.sort((a, b) => a - b);
}

interface Row {
  backend: string;
  input: string;
  status: number;
  ms: number;
  probes: number;
  p50: number;
  p99: number;
  max: number;
  boundMs: number;
  termExitMs?: number;
}

async function measureOne(base: string, hostile: Hostile): Promise<Omit<Row, 'backend'>> {
  const t0 = performance.now();
  const sent = hostile.send(base);
  const times = await probe(
    base,
    sent.catch(() => undefined),
  );
  const status = await sent.catch(() => -1);
  const ms = performance.now() - t0;
  return {
    input: hostile.name,
    status,
    ms: Math.round(ms),
    probes: times.length,
    p50: Math.round(percentile(times, 50)),
    p99: Math.round(percentile(times, 99)),
    max: Math.round(times.at(-1) ?? 0),
    boundMs: hostile.boundMs,
  };
}

/** Sends the input again and a SIGTERM 100 ms later; answers the time from the signal to the exit. */
async function termDuring(base: string, server: ChildProcess, hostile: Hostile): Promise<number> {
  void hostile.send(base).catch(() => undefined);
  await new Promise((r) => setTimeout(r, 100));
  const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));
  const t0 = performance.now();
  server.kill('SIGTERM');
  const timeout = new Promise<void>((resolve) => setTimeout(resolve, DRAIN_MS + 30_000));
  await Promise.race([exited, timeout]);
  if (server.exitCode === null && server.signalCode === null) server.kill('SIGKILL');
  return Math.round(performance.now() - t0);
}

async function runAll(backend: string, env: Record<string, string>): Promise<Row[]> {
  const only = process.env.HOSTILE_ONLY?.split(',');
  const rows: Row[] = [];
  for (const hostile of HOSTILES.filter((h) => !only || only.some((o) => h.name.startsWith(o)))) {
    // A fresh schema per input on PostgreSQL, as the SQLite runs get a fresh folder.
    const schema = env.DATABASE_URL ? await schemaIn(env.DATABASE_URL) : undefined;
    try {
      await withBuiltServer(
        `hostile-${hostile.name}`,
        { DRAIN_TIMEOUT_MS: String(DRAIN_MS), ...env, ...(schema ? { DATABASE_URL: schema.url } : {}) },
        async (base, server) => {
          await hostile.setup?.(base);
          const row: Row = { backend, ...(await measureOne(base, hostile)) };
          row.termExitMs = await termDuring(base, server, hostile);
          rows.push(row);
          console.log(JSON.stringify(row));
        },
      );
    } finally {
      await schema?.drop();
    }
  }
  return rows;
}

async function main(): Promise<void> {
  const rows = await runAll('sqlite', {});
  if (process.env.TEST_DATABASE_URL)
    rows.push(...(await runAll('postgres', { DATABASE_URL: process.env.TEST_DATABASE_URL })));
  console.log(
    '\n| backend | input | status | time ms | probes | probe p50 | p99 | max | bound (p99) | SIGTERM -> exit ms |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows)
    console.log(
      `| ${r.backend} | ${r.input} | ${r.status} | ${r.ms} | ${r.probes} | ${r.p50} | ${r.p99} | ${r.max} | ${r.boundMs} | ${r.termExitMs} |`,
    );
}

runBench(main);
