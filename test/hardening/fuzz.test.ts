import fc from 'fast-check';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { animals } from '../fixtures/terminology';
import { putResource, serverApp } from '../helpers/server-app';

/**
 * Generated and mutated requests at every kind of route. Whatever comes in, the answer is a FHIR
 * resource with a 2xx-4xx status (an OperationOutcome when it is an error): never a 5xx, never a
 * framework default body, never a stack trace, path or SQL; and the server keeps answering.
 * FUZZ_RUNS sets the cases per property (default 300, so a few thousand in `npm test`).
 */

const RUNS = Number(process.env.FUZZ_RUNS ?? 300);
const BASE = '/fhir/R4';

let app: FastifyInstance;
let close: () => Promise<void>;

beforeAll(async () => {
  ({ app, close } = await serverApp());
  await putResource(app, animals);
});
afterAll(() => close());

const LEAKS = [/\n\s+at /, /node_modules/, /\/work\//, /\.ts:\d+/, /\bSELECT\b/i, /\bINSERT INTO\b/i, /sqlite/i];

function expectFhirAnswer(res: LightMyRequestResponse): void {
  const where = `${res.statusCode} ${res.body.slice(0, 300)}`;
  expect(res.statusCode, where).toBeLessThan(500);
  if (res.statusCode === 304 || res.statusCode === 204) return;
  expect(String(res.headers['content-type']), where).toContain('application/fhir+json');
  const body = res.json() as { resourceType?: string; issue?: { severity?: string; code?: string; details?: { text?: string } }[] };
  expect(typeof body.resourceType, where).toBe('string');
  if (res.statusCode >= 400) {
    expect(body.resourceType, where).toBe('OperationOutcome');
    const issue = body.issue?.[0];
    expect(issue?.severity, where).toBeDefined();
    expect(issue?.code, where).toBeDefined();
    expect(issue?.details?.text, where).toBeDefined();
  }
  for (const leak of LEAKS) expect(leak.test(res.body), `${where} leaks ${leak}`).toBe(false);
}

/**
 * After a batch of hostile input, an ordinary request still gets its ordinary answer (about
 * bundled content: the batches may well have deleted or replaced what the test stored).
 */
async function stillServing(): Promise<void> {
  const res = await app.inject({ method: 'GET', url: `${BASE}/CodeSystem/$lookup?system=http://hl7.org/fhir/administrative-gender&code=female` });
  expect(res.statusCode, res.body).toBe(200);
  expect(res.json().parameter.find((p: { name: string }) => p.name === 'display').valueString).toBe('Female');
}

const OPERATION_PATHS = [
  '/ValueSet/$validate-code',
  '/ValueSet/$expand',
  '/ValueSet/$batch-validate-code',
  '/CodeSystem/$lookup',
  '/CodeSystem/$validate-code',
  '/CodeSystem/$subsumes',
  '/ConceptMap/$translate',
  '/$versions',
  '/ValueSet/administrative-gender/$expand',
  '/CodeSystem/animals/$validate-code',
];
const RESOURCE_PATHS = ['/Patient', '/ValueSet', '/CodeSystem/animals', '/Observation/x1', '/ValueSet/vs-1/_history/1', '/OperationDefinition'];
const PARAM_NAMES = ['url', 'code', 'system', 'coding', 'codeableConcept', 'valueSet', 'count', 'offset', 'filter', 'display', 'tx-resource', 'property', 'validation', 'codeA', 'x', ''];
const VALUE_KEYS = ['valueString', 'valueCode', 'valueUri', 'valueBoolean', 'valueInteger', 'valueDecimal', 'valueCoding', 'valueCodeableConcept', 'valueCanonical', 'valueDateTime', 'resource', 'part', 'valueFoo'];

const anyPath = fc.constantFrom(...OPERATION_PATHS, ...RESOURCE_PATHS).map((p) => `${BASE}${p}`);
const jsonValue = fc.jsonValue({ maxDepth: 6 });
const parameterEntry = fc.record(
  { name: fc.oneof(fc.constantFrom(...PARAM_NAMES), fc.string()), key: fc.constantFrom(...VALUE_KEYS), value: jsonValue },
  { requiredKeys: ['key', 'value'] },
).map(({ name, key, value }) => (name === undefined ? { [key]: value } : { name, [key]: value }));

describe('fuzzing every route', () => {
  test('arbitrary JSON bodies', async () => {
    await fc.assert(
      fc.asyncProperty(anyPath, fc.constantFrom('POST', 'PUT'), jsonValue, async (url, method, body) => {
        const res = await app.inject({ method, url, headers: { 'content-type': 'application/fhir+json' }, payload: JSON.stringify(body) });
        expectFhirAnswer(res);
      }),
      { numRuns: RUNS },
    );
    await stillServing();
  });

  test('Parameters with generated entries: every value[x] of every wrong type, unknown names, nameless entries', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...OPERATION_PATHS), fc.array(parameterEntry, { maxLength: 12 }), async (path, parameter) => {
        const res = await app.inject({ method: 'POST', url: `${BASE}${path}`, headers: { 'content-type': 'application/fhir+json' }, payload: { resourceType: 'Parameters', parameter } });
        expectFhirAnswer(res);
      }),
      { numRuns: RUNS },
    );
    await stillServing();
  });

  test('resources of a wrong or made-up type, and mutated valid ones', async () => {
    const mutated = fc.record({
      resourceType: fc.oneof(fc.constantFrom('Patient', 'ValueSet', 'CodeSystem', 'Parameters', 'Bot', ''), fc.string()),
      id: fc.oneof(fc.constant('vs-1'), fc.string()),
      status: fc.oneof(fc.constantFrom('active', 'draft'), jsonValue),
      compose: jsonValue,
      concept: jsonValue,
    }, { requiredKeys: [] });
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('/ValueSet/vs-1', '/CodeSystem/cs-1', '/Patient', '/Patient/p-1'), mutated, async (path, body) => {
        const method = /\/[a-z]+-1$/.test(path) ? 'PUT' : 'POST';
        const res = await app.inject({ method, url: `${BASE}${path}`, headers: { 'content-type': 'application/fhir+json' }, payload: body });
        expectFhirAnswer(res);
      }),
      { numRuns: RUNS },
    );
    await stillServing();
  });

  test('huge strings, deep nesting and thousands of parameters', async () => {
    const shapes = fc.oneof(
      fc.integer({ min: 1, max: 300 }).map((depth) => {
        let value: unknown = 'x';
        for (let i = 0; i < depth; i++) value = i % 2 ? [value] : { a: value };
        return JSON.stringify({ resourceType: 'Parameters', parameter: [{ name: 'valueSet', resource: { resourceType: 'ValueSet', compose: value } }] });
      }),
      fc.integer({ min: 1, max: 3000 }).map((n) =>
        JSON.stringify({ resourceType: 'Parameters', parameter: Array.from({ length: n }, (_, i) => ({ name: 'property', valueString: `p${i}` })) }),
      ),
      fc.integer({ min: 1, max: 200_000 }).map((n) => JSON.stringify({ resourceType: 'Parameters', parameter: [{ name: 'code', valueCode: 'c'.repeat(n) }] })),
      fc.integer({ min: 1, max: 500 }).map((n) =>
        JSON.stringify({ resourceType: 'Parameters', parameter: [{ name: 'codeableConcept', valueCodeableConcept: { coding: Array.from({ length: n }, (_, i) => ({ system: 'http://x', code: `c${i}` })) } }] }),
      ),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...OPERATION_PATHS), shapes, async (path, payload) => {
        const res = await app.inject({ method: 'POST', url: `${BASE}${path}`, headers: { 'content-type': 'application/fhir+json' }, payload });
        expectFhirAnswer(res);
      }),
      { numRuns: Math.max(20, Math.floor(RUNS / 5)) },
    );
    await stillServing();
  });

  test('bytes that are not UTF-8, or not JSON, under a JSON content type', async () => {
    await fc.assert(
      fc.asyncProperty(anyPath, fc.uint8Array({ maxLength: 300 }), async (url, bytes) => {
        const res = await app.inject({ method: 'POST', url, headers: { 'content-type': 'application/fhir+json' }, payload: Buffer.from(bytes) });
        expectFhirAnswer(res);
      }),
      { numRuns: RUNS },
    );
    await stillServing();
  });

  test('wrong, odd and missing headers', async () => {
    const header = fc.oneof(fc.constant(undefined), fc.constantFrom('application/fhir+json', 'application/json; charset=utf-8', 'text/xml', 'application/x-www-form-urlencoded', '*/*', ''), fc.string({ maxLength: 60 }));
    await fc.assert(
      fc.asyncProperty(anyPath, fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'), header, header, header, async (url, method, contentType, accept, prefer) => {
        const headers: Record<string, string> = {};
        const printable = (v: string | undefined) => v !== undefined && /^[\x20-\x7e]*$/.test(v);
        if (printable(contentType)) headers['content-type'] = contentType as string;
        if (printable(accept)) headers.accept = accept as string;
        if (printable(prefer)) headers.prefer = prefer as string;
        const payload = method === 'GET' || method === 'DELETE' || method === 'OPTIONS' ? undefined : '{"resourceType":"Parameters"}';
        const res = await app.inject({ method: method as 'GET', url, headers, payload });
        expectFhirAnswer(res);
      }),
      { numRuns: RUNS },
    );
    await stillServing();
  });

  test('query strings with repeated, empty and garbled names and values', async () => {
    const part = fc.oneof(fc.constantFrom(...PARAM_NAMES, '_format', '_count', 'url', 'code', '%', '%zz', '=', '&'), fc.string({ maxLength: 20 }));
    const query = fc.array(fc.tuple(part, part), { maxLength: 12 }).map((pairs) =>
      pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&'),
    );
    const raw = fc.array(fc.constantFrom('a', '=', '&', '%', '%2', '%41', '+', ' ', '?', '#', 'é', '\u0000', 'url', 'code'), { maxLength: 30 }).map((c) => c.join(''));
    await fc.assert(
      fc.asyncProperty(anyPath, fc.oneof(query, raw), async (url, q) => {
        const res = await app.inject({ method: 'GET', url: `${url}?${q}` });
        expectFhirAnswer(res);
      }),
      { numRuns: RUNS },
    );
    await stillServing();
  });

  test('path ids with odd characters, and over-long URLs', async () => {
    const oddId = fc.oneof(
      fc.string({ maxLength: 80 }),
      fc.constantFrom("x'; DROP TABLE resources; --", '../../etc/passwd', '%00', '%2F', 'a'.repeat(65), '..', '.', '$', '$expand', '_history', 'é', '%E9'),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('ValueSet', 'Patient', 'CodeSystem', 'Nope'), oddId, fc.constantFrom('', '/_history', '/_history/1', '/$expand', '/$validate-code'), async (type, id, tail) => {
        const res = await app.inject({ method: 'GET', url: `${BASE}/${type}/${encodeURIComponent(id)}${tail}` });
        expectFhirAnswer(res);
      }),
      { numRuns: RUNS },
    );
    for (const length of [1_000, 10_000, 60_000]) {
      const res = await app.inject({ method: 'GET', url: `${BASE}/ValueSet/$validate-code?url=${'u'.repeat(length)}&code=x` });
      expectFhirAnswer(res);
      const path = await app.inject({ method: 'GET', url: `${BASE}/ValueSet/${'i'.repeat(length)}` });
      expectFhirAnswer(path);
    }
    await stillServing();
  });
});
