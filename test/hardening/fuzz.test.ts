import fc from 'fast-check';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ParamSpec } from '../../src/fhir/operation-definition';
import { operationModules } from '../../src/operations/index';
import { buildRegistry, loadDefinitions } from '../../src/operations/registry';
import { DEFINITIONS_DIR } from '../../src/project';
import type { AppServices } from '../../src/services';
import { animals } from '../fixtures/terminology';
import { putResource, serverApp } from '../helpers/server-app';
import { seedFuzzing } from '../helpers/fuzz-seed';

seedFuzzing();

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
  const body = res.json() as {
    resourceType?: string;
    issue?: { severity?: string; code?: string; details?: { text?: string } }[];
  };
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
  const res = await app.inject({
    method: 'GET',
    url: `${BASE}/CodeSystem/$lookup?system=http://hl7.org/fhir/administrative-gender&code=female`,
  });
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
const RESOURCE_PATHS = [
  '/Patient',
  '/ValueSet',
  '/CodeSystem/animals',
  '/Observation/x1',
  '/ValueSet/vs-1/_history/1',
  '/OperationDefinition',
];
const PARAM_NAMES = [
  'url',
  'code',
  'system',
  'coding',
  'codeableConcept',
  'valueSet',
  'count',
  'offset',
  'filter',
  'display',
  'tx-resource',
  'property',
  'validation',
  'codeA',
  'x',
  '',
];
const VALUE_KEYS = [
  'valueString',
  'valueCode',
  'valueUri',
  'valueBoolean',
  'valueInteger',
  'valueDecimal',
  'valueCoding',
  'valueCodeableConcept',
  'valueCanonical',
  'valueDateTime',
  'resource',
  'part',
  'valueFoo',
];

const anyPath = fc.constantFrom(...OPERATION_PATHS, ...RESOURCE_PATHS).map((p) => `${BASE}${p}`);
const jsonValue = fc.jsonValue({ maxDepth: 6 });
const parameterEntry = fc
  .record(
    {
      name: fc.oneof(fc.constantFrom(...PARAM_NAMES), fc.string()),
      key: fc.constantFrom(...VALUE_KEYS),
      value: jsonValue,
    },
    { requiredKeys: ['key', 'value'] },
  )
  .map(({ name, key, value }) => (name === undefined ? { [key]: value } : { name, [key]: value }));

describe('fuzzing every route', () => {
  test('arbitrary JSON bodies', async () => {
    await fc.assert(
      fc.asyncProperty(anyPath, fc.constantFrom('POST', 'PUT'), jsonValue, async (url, method, body) => {
        const res = await app.inject({
          method,
          url,
          headers: { 'content-type': 'application/fhir+json' },
          payload: JSON.stringify(body),
        });
        expectFhirAnswer(res);
      }),
      { numRuns: RUNS },
    );
    await stillServing();
  });

  test('Parameters with generated entries: every value[x] of every wrong type, unknown names, nameless entries', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...OPERATION_PATHS),
        fc.array(parameterEntry, { maxLength: 12 }),
        async (path, parameter) => {
          const res = await app.inject({
            method: 'POST',
            url: `${BASE}${path}`,
            headers: { 'content-type': 'application/fhir+json' },
            payload: { resourceType: 'Parameters', parameter },
          });
          expectFhirAnswer(res);
        },
      ),
      { numRuns: RUNS },
    );
    await stillServing();
  });

  test('resources of a wrong or made-up type, and mutated valid ones', async () => {
    const mutated = fc.record(
      {
        resourceType: fc.oneof(
          fc.constantFrom('Patient', 'ValueSet', 'CodeSystem', 'Parameters', 'Bot', ''),
          fc.string(),
        ),
        id: fc.oneof(fc.constant('vs-1'), fc.string()),
        status: fc.oneof(fc.constantFrom('active', 'draft'), jsonValue),
        compose: jsonValue,
        concept: jsonValue,
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('/ValueSet/vs-1', '/CodeSystem/cs-1', '/Patient', '/Patient/p-1'),
        mutated,
        async (path, body) => {
          const method = /\/[a-z]+-1$/.test(path) ? 'PUT' : 'POST';
          const res = await app.inject({
            method,
            url: `${BASE}${path}`,
            headers: { 'content-type': 'application/fhir+json' },
            payload: body,
          });
          expectFhirAnswer(res);
        },
      ),
      { numRuns: RUNS },
    );
    await stillServing();
  });

  test('huge strings, deep nesting and thousands of parameters', async () => {
    const shapes = fc.oneof(
      fc.integer({ min: 1, max: 300 }).map((depth) => {
        let value: unknown = 'x';
        for (let i = 0; i < depth; i++) value = i % 2 ? [value] : { a: value };
        return JSON.stringify({
          resourceType: 'Parameters',
          parameter: [{ name: 'valueSet', resource: { resourceType: 'ValueSet', compose: value } }],
        });
      }),
      fc.integer({ min: 1, max: 3000 }).map((n) =>
        JSON.stringify({
          resourceType: 'Parameters',
          parameter: Array.from({ length: n }, (_, i) => ({ name: 'property', valueString: `p${i}` })),
        }),
      ),
      fc
        .integer({ min: 1, max: 200_000 })
        .map((n) =>
          JSON.stringify({ resourceType: 'Parameters', parameter: [{ name: 'code', valueCode: 'c'.repeat(n) }] }),
        ),
      fc.integer({ min: 1, max: 500 }).map((n) =>
        JSON.stringify({
          resourceType: 'Parameters',
          parameter: [
            {
              name: 'codeableConcept',
              valueCodeableConcept: {
                coding: Array.from({ length: n }, (_, i) => ({ system: 'http://x', code: `c${i}` })),
              },
            },
          ],
        }),
      ),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...OPERATION_PATHS), shapes, async (path, payload) => {
        const res = await app.inject({
          method: 'POST',
          url: `${BASE}${path}`,
          headers: { 'content-type': 'application/fhir+json' },
          payload,
        });
        expectFhirAnswer(res);
      }),
      { numRuns: Math.max(20, Math.floor(RUNS / 5)) },
    );
    await stillServing();
  });

  test('bytes that are not UTF-8, or not JSON, under a JSON content type', async () => {
    await fc.assert(
      fc.asyncProperty(anyPath, fc.uint8Array({ maxLength: 300 }), async (url, bytes) => {
        const res = await app.inject({
          method: 'POST',
          url,
          headers: { 'content-type': 'application/fhir+json' },
          payload: Buffer.from(bytes),
        });
        expectFhirAnswer(res);
      }),
      { numRuns: RUNS },
    );
    await stillServing();
  });

  test('wrong, odd and missing headers', async () => {
    const header = fc.oneof(
      fc.constant(undefined),
      fc.constantFrom(
        'application/fhir+json',
        'application/json; charset=utf-8',
        'text/xml',
        'application/x-www-form-urlencoded',
        '*/*',
        '',
      ),
      fc.string({ maxLength: 60 }),
    );
    await fc.assert(
      fc.asyncProperty(
        anyPath,
        fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'),
        header,
        header,
        header,
        async (url, method, contentType, accept, prefer) => {
          const headers: Record<string, string> = {};
          const printable = (v: string | undefined) => v !== undefined && /^[\x20-\x7e]*$/.test(v);
          if (printable(contentType)) headers['content-type'] = contentType as string;
          if (printable(accept)) headers.accept = accept as string;
          if (printable(prefer)) headers.prefer = prefer as string;
          const payload =
            method === 'GET' || method === 'DELETE' || method === 'OPTIONS'
              ? undefined
              : '{"resourceType":"Parameters"}';
          const res = await app.inject({ method: method as 'GET', url, headers, payload });
          expectFhirAnswer(res);
        },
      ),
      { numRuns: RUNS },
    );
    await stillServing();
  });

  test('query strings with repeated, empty and garbled names and values', async () => {
    const part = fc.oneof(
      fc.constantFrom(...PARAM_NAMES, '_format', '_count', 'url', 'code', '%', '%zz', '=', '&'),
      fc.string({ maxLength: 20 }),
    );
    const query = fc
      .array(fc.tuple(part, part), { maxLength: 12 })
      .map((pairs) => pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&'));
    const raw = fc
      .array(fc.constantFrom('a', '=', '&', '%', '%2', '%41', '+', ' ', '?', '#', 'é', '\u0000', 'url', 'code'), {
        maxLength: 30,
      })
      .map((c) => c.join(''));
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
      fc.constantFrom(
        "x'; DROP TABLE resources; --",
        '../../etc/passwd',
        '%00',
        '%2F',
        'a'.repeat(65),
        '..',
        '.',
        '$',
        '$expand',
        '_history',
        'é',
        '%E9',
      ),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('ValueSet', 'Patient', 'CodeSystem', 'Nope'),
        oddId,
        fc.constantFrom('', '/_history', '/_history/1', '/$expand', '/$validate-code'),
        async (type, id, tail) => {
          const res = await app.inject({ method: 'GET', url: `${BASE}/${type}/${encodeURIComponent(id)}${tail}` });
          expectFhirAnswer(res);
        },
      ),
      { numRuns: RUNS },
    );
    for (const length of [1_000, 10_000, 60_000]) {
      const res = await app.inject({
        method: 'GET',
        url: `${BASE}/ValueSet/$validate-code?url=${'u'.repeat(length)}&code=x`,
      });
      expectFhirAnswer(res);
      const path = await app.inject({ method: 'GET', url: `${BASE}/ValueSet/${'i'.repeat(length)}` });
      expectFhirAnswer(path);
    }
    await stillServing();
  });
});

// ---------------------------------------------------------------------------------------------
// Complex-typed parameter values, across every operation in the registry

const GENDER_VS = 'http://hl7.org/fhir/ValueSet/administrative-gender';
const GENDER_CS = 'http://hl7.org/fhir/administrative-gender';

/** Parameters that let each operation reach its handler, so a fuzzed value that passes is really used. */
const BASELINE: Record<string, Record<string, unknown>[]> = {
  'ValueSet/validate-code': [{ name: 'url', valueUri: GENDER_VS }],
  'ValueSet/expand': [{ name: 'url', valueUri: GENDER_VS }],
  'ValueSet/batch-validate-code': [{ name: 'url', valueUri: GENDER_VS }],
  'CodeSystem/validate-code': [{ name: 'url', valueUri: GENDER_CS }],
  'CodeSystem/lookup': [{ name: 'system', valueUri: GENDER_CS }],
  'CodeSystem/subsumes': [{ name: 'system', valueUri: GENDER_CS }],
  'ConceptMap/translate': [
    { name: 'system', valueUri: GENDER_CS },
    { name: 'targetsystem', valueUri: 'http://terminology.hl7.org/CodeSystem/v3-AdministrativeGender' },
  ],
};
const INSTANCES: Record<string, string> = { ValueSet: 'administrative-gender', CodeSystem: 'animals' };

/** Element names of the data types fuzzed, written from the R4 specification (not from the server's table). */
const ELEMENTS: Record<string, string[]> = {
  Coding: ['system', 'version', 'code', 'display', 'userSelected'],
  CodeableConcept: ['coding', 'text'],
  Quantity: ['value', 'comparator', 'unit', 'system', 'code'],
  Reference: ['reference', 'type', 'identifier', 'display'],
  Identifier: ['use', 'type', 'system', 'value', 'period', 'assigner'],
  Period: ['start', 'end'],
  Range: ['low', 'high'],
  Ratio: ['numerator', 'denominator'],
  Money: ['value', 'currency'],
  ContactPoint: ['system', 'value', 'use', 'rank', 'period'],
  HumanName: ['use', 'text', 'family', 'given', 'prefix'],
  Attachment: ['contentType', 'data', 'url', 'size', 'title', 'creation'],
  Annotation: ['authorString', 'authorReference', 'time', 'text'],
  Meta: ['versionId', 'lastUpdated', 'source', 'profile', 'tag'],
};
const FUZZED_TYPES = Object.keys(ELEMENTS);
/** Elements whose value is another data type (or a list of one). */
const NESTED: Record<string, string> = {
  coding: 'Coding',
  identifier: 'Identifier',
  period: 'Period',
  assigner: 'Reference',
  low: 'Quantity',
  high: 'Quantity',
  numerator: 'Quantity',
  denominator: 'Quantity',
  authorReference: 'Reference',
  tag: 'Coding',
  type: 'CodeableConcept',
};
const LISTS = new Set(['coding', 'given', 'prefix', 'profile', 'tag']);

const junk = fc.oneof(
  fc.constantFrom(
    null,
    0,
    -1,
    1.5,
    true,
    false,
    '',
    ' ',
    'female ',
    ' female',
    'fe male',
    'http://x y',
    'a\tb',
    'x\u0001y',
    '2020-13-45',
    'urn:oid:1.2.',
    '[]',
    '{}',
  ),
  fc.constantFrom(
    [],
    [null],
    [1, 2],
    {},
    { a: 1 },
    { coding: 'x' },
    { extension: 'x' },
    { extension: [{}] },
    { extension: [{ url: 'http://x', valueFoo: 1 }] },
  ),
  fc.string({ maxLength: 20 }),
  fc.jsonValue({ maxDepth: 2 }),
);
const plausible = fc.constantFrom(
  'male',
  'female',
  GENDER_CS,
  GENDER_VS,
  '1.0',
  '2020-01-01',
  'http://unitsofmeasure.org',
  'kg',
  'Patient/1',
  12,
  3.5,
  true,
);

function datatypeValue(type: string, depth: number): fc.Arbitrary<unknown> {
  const fields = ELEMENTS[type] ?? ELEMENTS.Coding;
  const field = (name: string): fc.Arbitrary<unknown> => {
    const nested = NESTED[name] && depth < 2 ? datatypeValue(NESTED[name], depth + 1) : plausible;
    const one = fc.oneof({ weight: 3, arbitrary: nested }, { weight: 2, arbitrary: junk });
    return LISTS.has(name) ? fc.oneof(fc.array(one, { maxLength: 3 }), one) : one;
  };
  const record = fc.record(Object.fromEntries(fields.map((f) => [f, field(f)])), { requiredKeys: [] });
  const withExtra = fc
    .tuple(record, fc.option(fc.tuple(fc.constantFrom('foo', 'id', 'extension', '_code', 'resourceType'), junk)))
    .map(([value, extra]) => (extra ? { ...(value as object), [extra[0]]: extra[1] } : value));
  return fc.oneof(
    { weight: 6, arbitrary: withExtra },
    { weight: 1, arbitrary: junk },
    { weight: 1, arbitrary: fc.array(withExtra, { maxLength: 2 }) },
  );
}

interface Target {
  url: string;
  /** Where the fuzzed entry goes, given the entry. */
  wrap: (entry: Record<string, unknown>) => Record<string, unknown>[];
  /** The declared type of the parameter the entry fills. */
  param: ParamSpec;
}

/** Every operation, at every level it allows, with every input parameter (parts and batch entries too). */
function targets(): Target[] {
  const registry = buildRegistry<AppServices>(loadDefinitions(DEFINITIONS_DIR), operationModules);
  const list: Target[] = [];
  for (const { spec, raw } of registry.operations) {
    // Raw operations ($graphql) take their own bodies and answer application/json; test/graphql fuzzes them.
    if (raw) continue;
    const urls: { url: string; key: string }[] = [];
    if (spec.system) urls.push({ url: `${BASE}/$${spec.code}`, key: spec.code });
    for (const type of spec.resources) {
      if (spec.typeLevel) urls.push({ url: `${BASE}/${type}/$${spec.code}`, key: `${type}/${spec.code}` });
      if (spec.instance && INSTANCES[type])
        urls.push({ url: `${BASE}/${type}/${INSTANCES[type]}/$${spec.code}`, key: `${type}/${spec.code}` });
    }
    for (const { url, key } of urls) {
      const baseline = BASELINE[key] ?? [];
      for (const param of spec.inputs) {
        if (param.part.length > 0) {
          for (const part of param.part)
            list.push({
              url,
              param: part,
              wrap: (entry) => [...baseline, { name: param.name, part: [{ ...entry, name: part.name }] }],
            });
        } else if (param.type === 'Parameters') {
          // A batch entry is a whole request of its own: fuzz its coded parameters.
          for (const name of ['coding', 'codeableConcept']) {
            const inner = { ...param, name, type: name === 'coding' ? 'Coding' : 'CodeableConcept' };
            list.push({
              url,
              param: inner,
              wrap: (entry) => [
                ...baseline,
                {
                  name: param.name,
                  resource: {
                    resourceType: 'Parameters',
                    parameter: [
                      { name: 'url', valueUri: GENDER_VS },
                      { ...entry, name },
                    ],
                  },
                },
              ],
            });
          }
        } else {
          list.push({
            url,
            param,
            wrap: (entry) => [...baseline.filter((b) => b.name !== param.name), { ...entry, name: param.name }],
          });
        }
      }
    }
  }
  return list;
}

describe('fuzzing complex-typed operation parameters', () => {
  test('Coding, CodeableConcept, Quantity, Reference, Identifier ... with wrong types, nulls, arrays and bad primitives, at every operation: never a 5xx', async () => {
    const all = targets();
    const complex = all.filter(
      (t) => t.param.type !== undefined && /^[A-Z]/.test(t.param.type) && ELEMENTS[t.param.type],
    );
    expect(complex.length).toBeGreaterThan(10);
    const request = fc.oneof(
      // The declared type, fuzzed: what gets past the type check reaches the handler.
      {
        weight: 3,
        arbitrary: fc.constantFrom(...complex).chain((t) =>
          fc.record({
            target: fc.constant(t),
            type: fc.constant(t.param.type as string),
            value: datatypeValue(t.param.type as string, 0),
          }),
        ),
      },
      // Any data type at any parameter.
      {
        weight: 1,
        arbitrary: fc
          .record({ target: fc.constantFrom(...all), type: fc.constantFrom(...FUZZED_TYPES) })
          .chain((r) => datatypeValue(r.type, 0).map((value) => ({ ...r, value }))),
      },
    );
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(request, async ({ target, type, value }) => {
        const entry = { [`value${type}`]: value };
        const res = await app.inject({
          method: 'POST',
          url: target.url,
          headers: { 'content-type': 'application/fhir+json' },
          payload: { resourceType: 'Parameters', parameter: target.wrap(entry) },
        });
        expectFhirAnswer(res);
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      }),
      { numRuns: RUNS * 4 },
    );
    // Some values pass and reach the handlers (2xx), so the property is not only about refusals.
    expect([...statuses].filter(([s]) => s < 300).reduce((n, [, c]) => n + c, 0)).toBeGreaterThan(0);
    console.info(`complex-typed parameter fuzz: answers by status ${JSON.stringify(Object.fromEntries(statuses))}`);
    await stillServing();
  }, 120_000);

  test('a Coding.version with whitespace in $validate-code gets 200, the unknown system|version as a valid canonical', async () => {
    const res = await app.inject({
      method: 'POST',
      url: `${BASE}/ValueSet/$validate-code`,
      headers: { 'content-type': 'application/fhir+json' },
      payload: {
        resourceType: 'Parameters',
        parameter: [
          { name: 'url', valueUri: 'http://hl7.org/fhir/ValueSet/administrative-gender' },
          { name: 'coding', valueCoding: { system: GENDER_CS, version: 'a b', code: 'male' } },
        ],
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    const caused = (res.json().parameter as { name: string; valueCanonical?: string }[]).filter((p) =>
      p.name.startsWith('x-'),
    );
    expect(caused.map((p) => p.valueCanonical)).toEqual([`${GENDER_CS}|a%20b`]);
  });

  test('the values the issue found: whitespace around codes, spaces in uris, wrong JSON types', async () => {
    const cases: [string, Record<string, unknown>][] = [
      ['ValueSet/$validate-code', { name: 'coding', valueCoding: { system: GENDER_CS, code: 'female ' } }],
      ['ValueSet/$validate-code', { name: 'coding', valueCoding: { system: 'http://x y', code: 'female' } }],
      ['ValueSet/$validate-code', { name: 'coding', valueCoding: { system: GENDER_CS, code: 7 } }],
      [
        'ValueSet/$validate-code',
        { name: 'codeableConcept', valueCodeableConcept: { coding: { system: GENDER_CS, code: 'female' } } },
      ],
      ['ValueSet/$validate-code', { name: 'codeableConcept', valueCodeableConcept: { coding: [null] } }],
      ['CodeSystem/$lookup', { name: 'coding', valueCoding: { system: GENDER_CS, code: ['female'] } }],
      ['CodeSystem/$subsumes', { name: 'codingA', valueCoding: { system: GENDER_CS, code: 'male', version: 3 } }],
      // A control character in a uri or a code (found by the fuzz: $translate echoed it into its message).
      ['ConceptMap/$translate', { name: 'targetCoding', valueCoding: { system: 'x\u0001y' } }],
      ['ValueSet/$validate-code', { name: 'coding', valueCoding: { system: GENDER_CS, code: 'ma\u0002le' } }],
    ];
    for (const [path, entry] of cases) {
      const res = await app.inject({
        method: 'POST',
        url: `${BASE}/${path}`,
        headers: { 'content-type': 'application/fhir+json' },
        payload: {
          resourceType: 'Parameters',
          parameter: [{ name: 'url', valueUri: path.startsWith('ValueSet') ? GENDER_VS : GENDER_CS }, entry],
        },
      });
      expect(res.statusCode, `${path} ${JSON.stringify(entry)}: ${res.body}`).toBe(400);
      const issue = res.json().issue[0];
      expect(issue.details.text).toContain(`Parameter '${entry.name}'`);
      expect(issue.expression[0]).toMatch(/^Parameters\.parameter\[1\]\.value(Coding|CodeableConcept)\./);
    }
  });
});
