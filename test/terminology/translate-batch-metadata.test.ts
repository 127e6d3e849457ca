import type { CapabilityStatement, ConceptMap, OperationOutcome, Parameters, TerminologyCapabilities } from 'fhir/r4';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { animals, SYSTEM, valueSet } from '../fixtures/terminology';
import { outputs, param, partsOf, postParameters, putResource, serverApp } from '../helpers/server-app';

let app: FastifyInstance;
let close: () => Promise<void>;

const post = (url: string, ...parameter: Record<string, unknown>[]) => postParameters(app, url, ...parameter);
const get = (url: string) => app.inject({ method: 'GET', url });

const LEGACY = 'http://example.org/fhir/CodeSystem/legacy-animals';
const legacyMap: ConceptMap = {
  resourceType: 'ConceptMap',
  id: 'legacy',
  url: 'http://example.org/fhir/ConceptMap/legacy',
  version: '1.0.0',
  status: 'active',
  group: [
    {
      source: LEGACY,
      target: SYSTEM,
      element: [
        { code: 'D', target: [{ code: 'dog', equivalence: 'equivalent' }] },
        {
          code: 'C',
          target: [
            { code: 'cat', equivalence: 'equivalent' },
            { code: 'mammal', equivalence: 'wider' },
          ],
        },
        { code: 'X', target: [{ equivalence: 'unmatched' }] },
      ],
      unmapped: { mode: 'fixed', code: 'animal', display: 'Animal' },
    },
  ],
};

const matches = (body: Parameters) => partsOf(body, 'match');

beforeAll(async () => {
  ({ app, close } = await serverApp());
  await putResource(app, animals);
  await putResource(app, legacyMap);
  await putResource(
    app,
    valueSet('mammals', {
      include: [{ system: SYSTEM, filter: [{ property: 'concept', op: 'is-a', value: 'mammal' }] }],
    }),
  );
});
afterAll(() => close());

describe('ConceptMap/$translate', () => {
  test('R4 names by GET at type level: every map that fits is used', async () => {
    const res = await get(`/fhir/R4/ConceptMap/$translate?system=${encodeURIComponent(LEGACY)}&code=D`);
    expect(res.statusCode, res.body).toBe(200);
    expect(outputs(res.json()).result).toBe(true);
    expect(matches(res.json())).toEqual([
      { equivalence: 'equivalent', concept: { system: SYSTEM, code: 'dog' }, originMap: `${legacyMap.url}|1.0.0` },
    ]);
  });

  test('several targets are several match entries', async () => {
    const res = await post(
      '/fhir/R4/ConceptMap/$translate',
      param('url', legacyMap.url),
      param('coding', { system: LEGACY, code: 'C' }),
    );
    expect(matches(res.json()).map((m) => [m.equivalence, (m.concept as { code: string }).code])).toEqual([
      ['equivalent', 'cat'],
      ['wider', 'mammal'],
    ]);
  });

  test('R5 names, instance level, unmapped codes and unmatched targets', async () => {
    const fixed = await post(
      '/fhir/R4/ConceptMap/legacy/$translate',
      { name: 'sourceSystem', valueUri: LEGACY },
      { name: 'sourceCode', valueCode: 'Q' },
    );
    expect(matches(fixed.json())).toEqual([
      {
        equivalence: 'relatedto',
        concept: { system: SYSTEM, code: 'animal', display: 'Animal' },
        originMap: `${legacyMap.url}|1.0.0`,
      },
    ]);
    const unmatched = await post(
      '/fhir/R4/ConceptMap/legacy/$translate',
      { name: 'sourceSystem', valueUri: LEGACY },
      { name: 'sourceCode', valueCode: 'X' },
    );
    expect(outputs(unmatched.json()).result).toBe(false);
    expect(outputs(unmatched.json()).message).toContain(`${LEGACY}#X`);
  });

  test('reverse: from a target code back to its source', async () => {
    const r4 = await post(
      '/fhir/R4/ConceptMap/$translate',
      param('system', SYSTEM),
      param('code', 'cat'),
      param('reverse', true),
    );
    expect(matches(r4.json())).toEqual([
      {
        equivalence: 'equivalent',
        concept: { system: SYSTEM, code: 'cat' },
        source: { system: LEGACY, code: 'C' },
        originMap: `${legacyMap.url}|1.0.0`,
      },
    ]);
    const r5 = await post(
      '/fhir/R4/ConceptMap/$translate',
      { name: 'targetSystem', valueUri: SYSTEM },
      { name: 'targetCode', valueCode: 'dog' },
    );
    expect(matches(r5.json())[0].source).toEqual({ system: LEGACY, code: 'D' });
  });

  test('nothing to translate, and an unknown map, are clear errors', async () => {
    const nothing = await post('/fhir/R4/ConceptMap/$translate', param('system', LEGACY));
    expect(nothing.statusCode).toBe(400);
    const unknown = await post(
      '/fhir/R4/ConceptMap/$translate',
      param('url', 'http://example.org/none'),
      param('system', LEGACY),
      param('code', 'D'),
    );
    expect(unknown.statusCode).toBe(404);
    expect((unknown.json() as OperationOutcome).issue[0].code).toBe('not-found');
  });
});

describe('ValueSet/$batch-validate-code', () => {
  const validation = (...parameter: Record<string, unknown>[]) => ({
    name: 'validation',
    resource: { resourceType: 'Parameters', parameter },
  });

  test('each validation answers in order; the outer parameters apply to all; a broken one answers its OperationOutcome', async () => {
    const res = await post(
      '/fhir/R4/ValueSet/$batch-validate-code',
      param('url', 'http://example.org/fhir/ValueSet/mammals'),
      validation(param('coding', { system: SYSTEM, code: 'dog' })),
      validation(param('coding', { system: SYSTEM, code: 'owl' })),
      validation({ name: 'codingX', valueCoding: { system: SYSTEM, code: 'dog' } }),
      validation(
        param('url', 'http://example.org/fhir/ValueSet/nope'),
        param('coding', { system: SYSTEM, code: 'dog' }),
      ),
    );
    expect(res.statusCode, res.body).toBe(200);
    const answers = (res.json() as Parameters).parameter ?? [];
    expect(answers.map((a) => a.name)).toEqual(['validation', 'validation', 'validation', 'validation']);
    const [dog, owl, broken, unknownVs] = answers.map((a) => a.resource as Parameters | OperationOutcome);
    expect(outputs(dog as Parameters)).toMatchObject({ result: true, display: 'Dog' });
    expect(outputs(owl as Parameters)).toMatchObject({ result: false });
    expect(broken.resourceType).toBe('OperationOutcome');
    expect((broken as OperationOutcome).issue[0].details?.text).toContain('Unable to find code to validate');
    expect(unknownVs.resourceType).toBe('OperationOutcome');
  });

  test('instance level, and a batch without validations is refused', async () => {
    const res = await post(
      '/fhir/R4/ValueSet/mammals/$batch-validate-code',
      validation(param('coding', { system: SYSTEM, code: 'cat' })),
    );
    expect(res.statusCode, res.body).toBe(200);
    expect(outputs((res.json() as Parameters).parameter?.[0].resource as Parameters).result).toBe(true);
    const empty = await post(
      '/fhir/R4/ValueSet/$batch-validate-code',
      param('url', 'http://example.org/fhir/ValueSet/mammals'),
    );
    expect(empty.statusCode).toBe(400);
    expect((empty.json() as OperationOutcome).issue[0].details?.text).toContain('validation');
  });
});

describe('metadata', () => {
  test('the CapabilityStatement advertises a terminology server with the tx-ecosystem features', async () => {
    const res = await get('/fhir/R4/metadata');
    const cs = res.json() as CapabilityStatement;
    expect(cs.instantiates).toContain('http://hl7.org/fhir/CapabilityStatement/terminology-server');
    const features = (cs.extension ?? []).map((e) =>
      e.extension?.map((x) => x.valueCanonical ?? x.valueCode ?? x.valueBoolean),
    );
    expect(features).toContainEqual([
      'http://hl7.org/fhir/uv/tx-ecosystem/FeatureDefinition/CodeSystemAsParameter',
      true,
    ]);
    const types = cs.rest?.[0].resource?.map((r) => r.type) ?? [];
    expect(types).toContain('ValueSet');
    expect(types).not.toContain('Agent');
    const codeSystem = cs.rest?.[0].resource?.find((r) => r.type === 'CodeSystem');
    expect(codeSystem?.operation?.map((o) => o.name).sort()).toEqual([
      'graphql',
      'lookup',
      'resend',
      'subsumes',
      'validate',
      'validate-code',
    ]);
  });

  test('metadata?mode=terminology is a TerminologyCapabilities listing expansion parameters and code systems', async () => {
    const res = await get('/fhir/R4/metadata?mode=terminology');
    expect(res.statusCode).toBe(200);
    const tc = res.json() as TerminologyCapabilities;
    expect(tc.resourceType).toBe('TerminologyCapabilities');
    const names = tc.expansion?.parameter?.map((p) => p.name) ?? [];
    expect(names).toEqual(expect.arrayContaining(['count', 'offset', 'filter', 'displayLanguage', 'tx-resource']));
    expect(names).not.toContain('url');
    expect(tc.codeSystem?.find((c) => c.uri === SYSTEM)?.version).toEqual([{ code: '2.0.0' }]);
    expect(tc.codeSystem?.some((c) => c.uri === 'http://hl7.org/fhir/administrative-gender')).toBe(true);
  });

  test('resources of types R4 does not define are unknown (Medplum types the server does not serve)', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/fhir/R4/Agent',
      headers: { 'content-type': 'application/fhir+json' },
      payload: { resourceType: 'Agent' },
    });
    expect(res.statusCode).toBe(404);
    expect((res.json() as OperationOutcome).issue[0].code).toBe('not-supported');
  });
});
