import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freePort, startServer, waitForServer, type ServerProcess } from '../helpers/process';
import { stopServer } from './write-stream';

/**
 * A GraphQL document of a kilobyte or two cannot stall the server (hardening round three, item 1).
 * Named fragments spread twice per level stood for 2^40 fields that the depth and cost limits, and
 * graphql-js's validation, walked one by one: the server answered nothing else meanwhile and
 * ignored SIGTERM. Each hostile shape here must answer 4xx too-costly quickly while a loop of GET
 * /metadata beside it keeps its 99th percentile low; the server runs in its own process, so what
 * is measured is what a client sees, and each request is bounded so a regression fails, not hangs.
 */

/** What the issue asks of the hostile query itself (about a second), made generous for a busy machine. */
const ANSWER_LIMIT_MS = 5_000;
/**
 * The issue asks for metadata's p99 under 100 ms; the figures measured are reported (afterAll).
 * The bound tested is generous, for a machine so busy that metadata alone takes tens of ms: a
 * document walked fragment by fragment held the event loop for 16 s (24 levels) or for ever (40).
 */
const P99_LIMIT_MS = 1_000;
let p99Limit = P99_LIMIT_MS;

let server: ServerProcess;
const latencies: number[] = [];
const figures: string[] = [];

const doubling = (levels: number) =>
  [
    `{ Patient(id: "p1") { ...F${levels} } }`,
    'fragment F0 on Patient { id }',
    ...Array.from({ length: levels }, (_, i) => `fragment F${i + 1} on Patient { ...F${i} ...F${i} }`),
  ].join('\n');
const nestedDoubling = (levels: number) =>
  [
    `{ Patient(id: "p1") { extension { ...E${levels} } } }`,
    'fragment E0 on Extension { url }',
    ...Array.from(
      { length: levels },
      (_, i) => `fragment E${i + 1} on Extension { extension { ...E${i} } extension { ...E${i} } }`,
    ),
  ].join('\n');

/** The shapes of the issue, and the variants it names. */
const HOSTILE: [string, string][] = [
  ['40 nested named fragments, each spread twice', doubling(40)],
  ['24 levels of fragments spread twice', doubling(24)],
  ['24 levels through fields, each spread twice', nestedDoubling(24)],
  [
    'inline fragments nested 60 deep, a field at each',
    `{ Patient(id: "p1") { ${'... on Patient { id '.repeat(60)}${'}'.repeat(60)} } }`,
  ],
  [
    'inline fragments nested 5,000 deep',
    `{ Patient(id: "p1") { ${'... on Patient { id '.repeat(5_000)}${'}'.repeat(5_000)} } }`,
  ],
  ['one alias repeated 5,000 times at one level', `{ Patient(id: "p1") { ${'a: id '.repeat(5_000)} } }`],
  ['2,000 fields of one name, each with fields', `{ Patient(id: "p1") { ${'name { family given } '.repeat(2_000)} } }`],
  ['2,000 aliases of one name over a list', `{ PatientList { ${'n: name { family } '.repeat(2_000)} } }`],
];

beforeAll(async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'fhir-graphql-costs-'));
  server = startServer({ DATA_DIR: dataDir, LOG_LEVEL: 'warn' }, await freePort());
  await waitForServer(server);
  const put = await fetch(`${server.base}/Patient/p1`, {
    method: 'PUT',
    headers: { 'content-type': 'application/fhir+json' },
    body: JSON.stringify({ resourceType: 'Patient', id: 'p1', name: [{ family: 'Doe' }] }),
  });
  expect(put.status).toBeLessThan(300);
  // The GraphQL service loads, and builds its schema, with the first query: not what is measured.
  expect((await graphql('{ Patient(id: "p1") { id } }')).status).toBe(200);
  const baseline: number[] = [];
  for (let i = 0; i < 100; i++) baseline.push(await metadata());
  const baselineP99 = percentile(baseline, 0.99);
  figures.push(`metadata alone: p99 ${baselineP99.toFixed(1)} ms over ${baseline.length} requests`);
  p99Limit = Math.max(P99_LIMIT_MS, 5 * baselineP99);
}, 120_000);

afterAll(async () => {
  // A server held by a document (the defect) ignores SIGTERM: it is killed rather than left running.
  if (server && !(await exitsWithin(server, 'SIGTERM', 20_000))) await stopServer(server, 'SIGKILL');
  if (latencies.length > 0) {
    figures.push(`all: p99 ${percentile(latencies, 0.99).toFixed(1)} ms over ${latencies.length} requests`);
    process.stdout.write(
      `GraphQL hostile documents (answer time; metadata latency beside them):\n  ${figures.join('\n  ')}\n`,
    );
  }
});

async function graphql(query: string): Promise<{
  status: number;
  body: { errors?: { message: string; extensions?: { outcome?: { issue: { code: string }[] } } }[] };
}> {
  const res = await fetch(`${server.base}/$graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query }),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: res.status, body: (await res.json()) as never };
}

async function metadata(): Promise<number> {
  const start = performance.now();
  const res = await fetch(`${server.base}/metadata`, { signal: AbortSignal.timeout(30_000) });
  await res.arrayBuffer();
  expect(res.status).toBe(200);
  return performance.now() - start;
}

/** Sends `signal`; whether the process then exits within `ms`. */
async function exitsWithin(target: ServerProcess, signal: NodeJS.Signals, ms: number): Promise<boolean> {
  if (target.child.exitCode !== null || target.child.signalCode !== null) return true;
  target.child.kill(signal);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([target.exited.then(() => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

describe('hostile GraphQL documents answer 4xx too-costly at once, and the server goes on answering', () => {
  test.each(HOSTILE)('%s', async (name, query) => {
    let done = false;
    const here: number[] = [];
    const loop = (async () => {
      while (!done) here.push(await metadata());
    })();
    const answers: number[] = [];
    try {
      // Ten times over, two at once: one held event loop would show in every later answer.
      for (let round = 0; round < 10; round++) {
        const start = performance.now();
        const results = await Promise.all([graphql(query), graphql(query)]);
        answers.push(performance.now() - start);
        for (const res of results) {
          expect(res.status, name).toBe(400);
          expect(res.body.errors?.[0].extensions?.outcome?.issue[0].code, res.body.errors?.[0].message).toBe(
            'too-costly',
          );
        }
      }
    } finally {
      done = true;
      await loop;
    }
    latencies.push(...here);
    const p99 = percentile(here, 0.99);
    figures.push(
      `${name} (${query.length} bytes): answered in at most ${Math.max(...answers).toFixed(0)} ms; metadata p99 ${p99.toFixed(1)} ms, max ${Math.max(...here).toFixed(1)} ms over ${here.length} requests`,
    );
    expect(Math.max(...answers), name).toBeLessThan(ANSWER_LIMIT_MS);
    expect(p99, name).toBeLessThan(p99Limit);
  });

  test('SIGTERM is obeyed while hostile documents arrive', async () => {
    const inFlight = Promise.allSettled([graphql(doubling(40)), graphql(nestedDoubling(24))]);
    const exited = await exitsWithin(server, 'SIGTERM', 20_000);
    await inFlight;
    expect(exited).toBe(true);
  });
});
