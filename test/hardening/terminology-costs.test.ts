import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CodeSystem, ConceptMap, OperationOutcome, Parameters, ValueSet } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { MAX_IMPORT_DEPTH } from '../../src/terminology/compose';
import { MAX_TRANSLATE_MATCHES } from '../../src/terminology/translate';
import { freePort, startServer, waitForServer, type ServerProcess } from '../helpers/process';
import { stopServer } from './write-stream';

/**
 * A few kilobytes of terminology cannot stall the server (issue 19, items 2, 3 and 8). Each
 * hostile request answers (a correct answer, or 4xx too-costly) within its budget, without a
 * stack overflow, while a loop of cheap requests beside it (GET /metadata, and a $validate-code
 * the answer cache holds) keeps being answered: their latencies are measured and their 99th
 * percentile must stay under 50 ms. The server runs in a process of its
 * own, so what is measured is what a client sees.
 */

const JSON_HEADERS = { 'content-type': 'application/fhir+json', accept: 'application/fhir+json' };
const GENDER = 'http://hl7.org/fhir/administrative-gender';
const BUDGET_MS = 5_000;
/**
 * The 99th percentile of metadata latency the issue allows while expensive work runs. On a
 * machine so busy that metadata alone is slower than that, the bound is three times what metadata
 * alone takes there: work that held the event loop would make it seconds either way.
 */
const P99_LIMIT_MS = 50;
let p99Limit = P99_LIMIT_MS;
const DEEP = 30_000;
const DEEP_URL = 'http://example.org/hostile/CodeSystem/deep';

let server: ServerProcess;
/** Every metadata latency measured, across the scenarios (reported at the end). */
const latencies: number[] = [];
const figures: string[] = [];

beforeAll(async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'fhir-costs-'));
  server = startServer(
    {
      DATA_DIR: dataDir,
      OPERATION_TIMEOUT_MS: String(BUDGET_MS),
      LOG_LEVEL: 'warn',
      BODY_LIMIT: String(64 * 1024 * 1024),
    },
    await freePort(),
  );
  await waitForServer(server);
  await put(deepCodeSystem());
  // Held in memory once used: indexing 30,000 stored concepts is a one-off cost of the content
  // (paid at the first use after a change), not of the hostile requests measured here.
  const lookup = await fetch(`${server.base}/CodeSystem/$lookup?system=${encodeURIComponent(DEEP_URL)}&code=d0`);
  expect(lookup.status).toBe(200);
  await lookup.arrayBuffer();
  // What metadata takes on this machine now, with nothing else running in the server.
  const baseline: number[] = [];
  for (let i = 0; i < 100; i++) {
    const start = performance.now();
    await cheapRequest(i);
    baseline.push(performance.now() - start);
  }
  const baselineP99 = percentile(baseline, 0.99);
  figures.push(`cheap requests alone: p99 ${baselineP99.toFixed(1)} ms over ${baseline.length} requests`);
  p99Limit = Math.max(P99_LIMIT_MS, 3 * baselineP99);
}, 120_000);

afterAll(async () => {
  if (server) await stopServer(server, 'SIGTERM');
  if (latencies.length > 0) {
    // The figure the issue asks to be reported.
    figures.push(`all: p99 ${percentile(latencies, 0.99).toFixed(1)} ms over ${latencies.length} requests`);
    process.stdout.write(
      `latency of cheap requests (metadata, cached validate-code) while hostile terminology work ran:\n  ${figures.join('\n  ')}\n`,
    );
  }
});

// ---------------------------------------------------------------------------------------------
// content

/** Value sets <prefix>0..<prefix><depth>, each importing the one below `times` times (the lowest holds the gender codes). */
function ladder(depth: number, prefix: string, times: number): ValueSet[] {
  const url = (i: number) => `http://example.org/hostile/ValueSet/${prefix}${i}`;
  return Array.from({ length: depth + 1 }, (_, i): ValueSet => ({
    resourceType: 'ValueSet',
    id: `${prefix}${i}`,
    url: url(i),
    status: 'active',
    compose: {
      include: i === 0 ? [{ system: GENDER }] : Array.from({ length: times }, () => ({ valueSet: [url(i - 1)] })),
    },
  }));
}

/** Each value set imports the one below twice: 2^depth paths through the imports. */
const diamond = (depth: number, prefix: string) => ladder(depth, prefix, 2);
const chain = (depth: number, prefix: string) => ladder(depth, prefix, 1);

/** A hierarchy 30,000 deep, stated by `parent` properties (nesting that deep is refused as JSON). */
function deepCodeSystem(): CodeSystem {
  return {
    resourceType: 'CodeSystem',
    id: 'deep',
    url: DEEP_URL,
    status: 'active',
    content: 'complete',
    hierarchyMeaning: 'is-a',
    property: [{ code: 'parent', uri: 'http://hl7.org/fhir/concept-properties#parent', type: 'code' }],
    concept: Array.from({ length: DEEP }, (_, i) => ({
      code: `d${i}`,
      display: `Level ${i}`,
      ...(i > 0 ? { property: [{ code: 'parent', valueCode: `d${i - 1}` }] } : {}),
    })),
  };
}

// ---------------------------------------------------------------------------------------------
// requests

async function put(resource: CodeSystem | ValueSet): Promise<void> {
  const res = await fetch(`${server.base}/${resource.resourceType}/${resource.id}`, {
    method: 'PUT',
    headers: JSON_HEADERS,
    body: JSON.stringify(resource),
  });
  expect(res.status, await res.clone().text()).toBeLessThan(300);
  await res.arrayBuffer();
}

interface Answer {
  status: number;
  /** What the answers here carry: an expansion, Parameters, or an OperationOutcome. */
  body: { expansion?: ValueSet['expansion']; parameter?: Parameters['parameter']; issue?: OperationOutcome['issue'] };
  ms: number;
}

async function operation(path: string, parameter: Parameters['parameter']): Promise<Answer> {
  const start = performance.now();
  const res = await fetch(`${server.base}/${path}`, {
    method: 'POST',
    headers: JSON_HEADERS,
    body: JSON.stringify({ resourceType: 'Parameters', parameter }),
  });
  const body = (await res.json()) as Answer['body'];
  return { status: res.status, body, ms: performance.now() - start };
}

const resources = (list: (ValueSet | CodeSystem | ConceptMap)[]) =>
  list.map((resource) => ({ name: 'tx-resource', resource }));
const output = (body: Answer['body'], name: string) => body.parameter?.find((p) => p.name === name);

/** GET /metadata, or a $validate-code whose answer is cached after its first time: both must be quick. */
async function cheapRequest(i: number): Promise<void> {
  const path = i % 2 === 0 ? 'metadata' : `CodeSystem/$validate-code?url=${encodeURIComponent(GENDER)}&code=male`;
  const res = await fetch(`${server.base}/${path}`);
  await res.arrayBuffer();
  expect(res.status).toBe(200);
}

/**
 * Runs `work` while a loop of cheap requests runs beside it, one request at a time; answers what
 * `work` answers and records the loop's latencies.
 */
async function withMetadataLoop<T>(name: string, work: () => Promise<T>): Promise<{ result: T; p99: number }> {
  let done = false;
  const here: number[] = [];
  const loop = (async () => {
    for (let i = 0; !done; i++) {
      const start = performance.now();
      await cheapRequest(i);
      here.push(performance.now() - start);
    }
  })();
  let result: T;
  try {
    result = await work();
  } finally {
    // The request in flight when the work ends counts too: it is the one work would have held up.
    done = true;
    await loop;
    latencies.push(...here);
    figures.push(
      `${name}: p99 ${percentile(here, 0.99).toFixed(1)} ms, max ${Math.max(...here).toFixed(1)} ms over ${here.length} requests, peak RSS ${peakRssMb().toFixed(0)} MB`,
    );
  }
  return { result, p99: percentile(here, 0.99) };
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

/** Peak resident memory of the server process so far, in MB (Linux). */
function peakRssMb(): number {
  const status = readFileSync(`/proc/${server.child.pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
}

/** A 4xx too-costly, or a 200: either way within the budget and not a 5xx. */
function answeredWithinBudget(answer: Answer): void {
  expect(answer.status, JSON.stringify(answer.body).slice(0, 500)).toBeLessThan(500);
  if (answer.status !== 200) expect(answer.body.issue?.[0]?.code).toBe('too-costly');
  expect(answer.ms).toBeLessThan(BUDGET_MS + 5_000);
}

// ---------------------------------------------------------------------------------------------

describe('hostile terminology answers within its budget and stalls nothing else', () => {
  test('$expand of a diamond of imports 40 deep, inline as tx-resource: each value set is expanded once', async () => {
    const sets = diamond(40, 'inline-d');
    const { result, p99 } = await withMetadataLoop('diamond 40 inline $expand x5', async () => {
      const answers: Answer[] = [];
      for (let i = 0; i < 5; i++)
        answers.push(
          await operation('ValueSet/$expand', [{ name: 'url', valueUri: sets[40].url }, ...resources(sets)]),
        );
      return answers;
    });
    for (const answer of result) {
      answeredWithinBudget(answer);
      expect(answer.status).toBe(200);
      expect(answer.body.expansion?.total).toBe(4);
    }
    expect(p99).toBeLessThan(p99Limit);
    expect(peakRssMb()).toBeLessThan(500);
  });

  test('$expand of a diamond of imports 40 deep, stored with 41 PUTs', async () => {
    const sets = diamond(40, 'stored-d');
    for (const vs of sets) await put(vs);
    const { result, p99 } = await withMetadataLoop('diamond 40 stored $expand', () =>
      operation('ValueSet/$expand', [{ name: 'url', valueUri: sets[40].url }]),
    );
    answeredWithinBudget(result);
    expect(result.status).toBe(200);
    expect(result.body.expansion?.total).toBe(4);
    expect(p99).toBeLessThan(p99Limit);
  });

  test('$validate-code through the same diamond (a code that is not a member asks every import): bounded', async () => {
    const sets = diamond(40, 'validate-d');
    const { result, p99 } = await withMetadataLoop('diamond 40 inline $validate-code', async () => {
      const answers: Answer[] = [];
      for (const code of ['nonsense', 'male']) {
        answers.push(
          await operation('ValueSet/$validate-code', [
            { name: 'url', valueUri: sets[40].url },
            { name: 'system', valueUri: GENDER },
            { name: 'code', valueCode: code },
            ...resources(sets),
          ]),
        );
      }
      return answers;
    });
    const [absent, present] = result;
    answeredWithinBudget(absent);
    expect(output(absent.body, 'result')?.valueBoolean).toBe(false);
    expect(output(present.body, 'result')?.valueBoolean).toBe(true);
    expect(p99).toBeLessThan(p99Limit);
    expect(peakRssMb()).toBeLessThan(500);
  });

  test('is-not-a and descendent-leaf over a hierarchy 30,000 deep answer within the budget', async () => {
    const filtered = (op: string, value: string): ValueSet => ({
      resourceType: 'ValueSet',
      status: 'active',
      compose: { include: [{ system: DEEP_URL, filter: [{ property: 'concept', op: op as 'is-a', value }] }] },
    });
    const { result, p99 } = await withMetadataLoop('30,000 deep is-not-a, descendent-leaf', async () => ({
      isNotA: await operation('ValueSet/$expand', [
        { name: 'valueSet', resource: filtered('is-not-a', 'd25000') },
        { name: 'count', valueInteger: 10 },
      ]),
      leaf: await operation('ValueSet/$expand', [{ name: 'valueSet', resource: filtered('descendent-leaf', 'd0') }]),
    }));
    answeredWithinBudget(result.isNotA);
    expect(result.isNotA.status).toBe(200);
    expect(result.isNotA.body.expansion?.total).toBe(25_000);
    answeredWithinBudget(result.leaf);
    expect(result.leaf.body.expansion?.contains?.map((c) => c.code)).toEqual([`d${DEEP - 1}`]);
    expect(p99).toBeLessThan(p99Limit);
  });

  test('a request that works for seconds, up to its budget, gives the event loop back: metadata keeps answering', async () => {
    // 400 regular-expression filters over 30,000 concepts: 12 million matches, legitimately slow.
    const vs: ValueSet = {
      resourceType: 'ValueSet',
      status: 'active',
      compose: {
        include: Array.from({ length: 400 }, (_, i) => ({
          system: DEEP_URL,
          filter: [{ property: 'display', op: 'regex' as const, value: `Level .*${i}.*[13579]` }],
        })),
      },
    };
    const { result, p99 } = await withMetadataLoop('400 regex filters over 30,000 concepts', () =>
      operation('ValueSet/$expand', [
        { name: 'valueSet', resource: vs },
        { name: 'count', valueInteger: 10 },
      ]),
    );
    answeredWithinBudget(result);
    expect(p99).toBeLessThan(p99Limit);
  });
});

describe('no stack overflow: deep structures are walked iteratively or refused as too costly', () => {
  test(`an import chain 990 deep inline is refused 422 too-costly (more than ${MAX_IMPORT_DEPTH} deep)`, async () => {
    const sets = chain(990, 'inline-c');
    for (const path of ['ValueSet/$expand', 'ValueSet/$validate-code']) {
      const answer = await operation(
        path,
        [
          { name: 'url', valueUri: sets[990].url },
          { name: 'system', valueUri: GENDER },
          { name: 'code', valueCode: 'male' },
          ...resources(sets),
        ].filter((p) => (path.endsWith('expand') ? !['system', 'code'].includes(p.name) : true)),
      );
      expect(answer.status, JSON.stringify(answer.body).slice(0, 300)).toBe(422);
      expect(answer.body.issue?.[0]?.code).toBe('too-costly');
    }
  });

  test('an import chain 3,000 deep stored is refused 422 too-costly', async () => {
    const sets = chain(3_000, 'stored-c');
    // Stored 8 at a time: order does not matter, an import is resolved when used.
    for (let i = 0; i < sets.length; i += 8) await Promise.all(sets.slice(i, i + 8).map((vs) => put(vs)));
    const expand = await operation('ValueSet/$expand', [{ name: 'url', valueUri: sets[3_000].url }]);
    expect(expand.status).toBe(422);
    expect(expand.body.issue?.[0]?.code).toBe('too-costly');
    const validate = await operation('ValueSet/$validate-code', [
      { name: 'url', valueUri: sets[3_000].url },
      { name: 'system', valueUri: GENDER },
      { name: 'code', valueCode: 'male' },
    ]);
    expect(validate.status).toBe(422);
    expect(validate.body.issue?.[0]?.code).toBe('too-costly');
  }, 180_000);

  test('the whole of a hierarchy 30,000 deep is expanded (paged, and flat beyond a readable depth)', async () => {
    const whole: ValueSet = {
      resourceType: 'ValueSet',
      status: 'active',
      compose: { include: [{ system: DEEP_URL }] },
    };
    const paged = await operation('ValueSet/$expand', [
      { name: 'valueSet', resource: whole },
      { name: 'count', valueInteger: 10 },
    ]);
    expect(paged.status).toBe(200);
    expect(paged.body.expansion?.total).toBe(DEEP);
    expect(paged.body.expansion?.contains?.map((c) => c.code)).toEqual(Array.from({ length: 10 }, (_, i) => `d${i}`));
    // 300 levels, asked for whole: answered, as a flat list (a client could not parse 300 levels of nesting).
    const shallow: ValueSet = {
      resourceType: 'ValueSet',
      status: 'active',
      compose: { include: [{ system: DEEP_URL, filter: [{ property: 'concept', op: 'is-not-a', value: 'd300' }] }] },
    };
    const flat = await operation('ValueSet/$expand', [{ name: 'valueSet', resource: shallow }]);
    expect(flat.status).toBe(200);
    expect(flat.body.expansion?.total).toBe(300);
    expect(flat.body.expansion?.contains).toHaveLength(300);
    expect(flat.body.expansion?.contains?.every((c) => c.contains === undefined)).toBe(true);
  });

  test(`$translate with over 100,000 matches is refused 422 too-costly (at most ${MAX_TRANSLATE_MATCHES} matches), not 500 nor megabytes`, async () => {
    // 1,000 groups that each keep an unmapped code, asked for 100 codes at once: 100,000 matches from a 150 KB request.
    const map: ConceptMap = {
      resourceType: 'ConceptMap',
      status: 'active',
      group: Array.from({ length: 1_000 }, (_, i) => ({
        source: 'http://example.org/a',
        target: `http://example.org/b${i}`,
        element: [{ code: 'listed', target: [{ code: 'x', equivalence: 'equal' as const }] }],
        unmapped: { mode: 'provided' as const },
      })),
    };
    const coding = Array.from({ length: 100 }, (_, i) => ({ system: 'http://example.org/a', code: `c${i}` }));
    const start = performance.now();
    const res = await fetch(`${server.base}/ConceptMap/$translate`, {
      method: 'POST',
      headers: JSON_HEADERS,
      body: JSON.stringify({
        resourceType: 'Parameters',
        parameter: [
          { name: 'conceptMap', resource: map },
          { name: 'codeableConcept', valueCodeableConcept: { coding } },
        ],
      }),
    });
    const text = await res.text();
    expect(res.status, text.slice(0, 300)).toBe(422);
    expect((JSON.parse(text) as OperationOutcome).issue[0].code).toBe('too-costly');
    expect(text.length).toBeLessThan(10_000);
    expect(performance.now() - start).toBeLessThan(BUDGET_MS);
    // Within the limit, the matches are all there.
    const smaller: ConceptMap = { ...map, group: map.group?.slice(0, 10) };
    const few = await operation('ConceptMap/$translate', [
      { name: 'conceptMap', resource: smaller },
      { name: 'codeableConcept', valueCodeableConcept: { coding: coding.slice(0, 10) } },
    ]);
    expect(few.status).toBe(200);
    expect(few.body.parameter?.filter((p) => p.name === 'match')).toHaveLength(100);
  });
});

describe('SIGTERM during expensive work', () => {
  test('ends the process within its drain time', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'fhir-drain-'));
    const busy = startServer(
      { DATA_DIR: dataDir, OPERATION_TIMEOUT_MS: '60000', DRAIN_TIMEOUT_MS: '1000', LOG_LEVEL: 'warn' },
      await freePort(),
    );
    try {
      await waitForServer(busy);
      const vs: ValueSet = {
        resourceType: 'ValueSet',
        status: 'active',
        compose: {
          include: Array.from({ length: 2_000 }, (_, i) => ({
            system: DEEP_URL,
            filter: [{ property: 'display', op: 'regex' as const, value: `Level .*${i}.*` }],
          })),
        },
      };
      const cs = deepCodeSystem();
      await fetch(`${busy.base}/CodeSystem/deep`, {
        method: 'PUT',
        headers: JSON_HEADERS,
        body: JSON.stringify(cs),
      }).then((r) => r.arrayBuffer());
      const work = fetch(`${busy.base}/ValueSet/$expand`, {
        method: 'POST',
        headers: JSON_HEADERS,
        body: JSON.stringify({
          resourceType: 'Parameters',
          parameter: [
            { name: 'valueSet', resource: vs },
            { name: 'count', valueInteger: 10 },
          ],
        }),
      }).catch(() => undefined);
      // The work has started once the server answers slower than usual... wait for what is checked instead:
      // metadata still answers while the expansion runs, so the signal arrives during the work.
      await fetch(`${busy.base}/metadata`).then((r) => r.arrayBuffer());
      const signalled = performance.now();
      busy.child.kill('SIGTERM');
      const code = await busy.exited;
      const took = performance.now() - signalled;
      await work;
      expect(code).toBe(1);
      expect(took).toBeLessThan(1_000 + 3_000);
    } finally {
      await stopServer(busy, 'SIGKILL');
    }
  }, 120_000);
});
