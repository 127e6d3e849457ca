import type { CodeSystem, OperationOutcome, Parameters } from 'fhir/r4';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { animals, SYSTEM } from '../fixtures/terminology';
import { outputs, param, partsOf, postParameters, putResource, serverApp } from '../helpers/server-app';

let app: FastifyInstance;
let close: () => Promise<void>;

const post = (url: string, ...parameter: Record<string, unknown>[]) => postParameters(app, url, ...parameter);
const get = (url: string) => app.inject({ method: 'GET', url });

const supplement: CodeSystem = {
  resourceType: 'CodeSystem',
  id: 'animals-fr',
  url: 'http://example.org/fhir/CodeSystem/animals-fr',
  version: '1.0.0',
  status: 'active',
  content: 'supplement',
  supplements: SYSTEM,
  concept: [{ code: 'dog', designation: [{ language: 'fr', value: 'Chien' }] }],
};

beforeAll(async () => {
  ({ app, close } = await serverApp());
  await putResource(app, animals);
  await putResource(app, supplement);
});
afterAll(() => close());

describe('CodeSystem/$lookup', () => {
  test('code+system by GET at type level: name, version, display, definition, designations, properties', async () => {
    const res = await get(`/fhir/R4/CodeSystem/$lookup?system=${encodeURIComponent(SYSTEM)}&code=dog`);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json() as Parameters;
    expect(outputs(body)).toMatchObject({
      name: 'Animals',
      version: '2.0.0',
      display: 'Dog',
      code: 'dog',
      system: SYSTEM,
      abstract: false,
    });
    const designations = partsOf(body, 'designation');
    expect(designations).toContainEqual({ language: 'de', value: 'Hund' });
    const properties = partsOf(body, 'property');
    // Repeated outputs are repeated entries, never an array inside one entry.
    expect(properties).toContainEqual({ code: 'parent', value: 'mammal', description: 'Mammal' });
    expect(properties).toContainEqual({ code: 'legs', value: 4 });
    expect(properties).toContainEqual({ code: 'inactive', value: false });
  });

  test('coding by POST, asking for one property', async () => {
    const res = await post('/fhir/R4/CodeSystem/$lookup', param('coding', { system: SYSTEM, code: 'mammal' }), {
      name: 'property',
      valueCode: 'child',
    });
    expect(res.statusCode, res.body).toBe(200);
    const children = partsOf(res.json(), 'property');
    expect(children.map((p) => p.value)).toEqual(['dog', 'cat', 'mammoth']);
    expect(children.every((p) => p.code === 'child')).toBe(true);
  });

  test('instance level: the code system is the one in the URL', async () => {
    const res = await get('/fhir/R4/CodeSystem/animals/$lookup?code=owl');
    expect(res.statusCode, res.body).toBe(200);
    expect(outputs(res.json())).toMatchObject({ display: 'Owl', system: SYSTEM });
  });

  test('bundled content can be looked up', async () => {
    const res = await get('/fhir/R4/CodeSystem/$lookup?system=http://hl7.org/fhir/administrative-gender&code=female');
    expect(res.statusCode, res.body).toBe(200);
    expect(outputs(res.json()).display).toBe('Female');
  });

  test('a supplement adds designations, with their source, and is reported as used', async () => {
    const res = await post('/fhir/R4/CodeSystem/$lookup', param('system', SYSTEM), param('code', 'dog'), {
      name: 'useSupplement',
      valueCanonical: supplement.url,
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json() as Parameters;
    expect(partsOf(body, 'designation')).toContainEqual({
      language: 'fr',
      value: 'Chien',
      source: `${supplement.url}|1.0.0`,
    });
    expect(outputs(body)['used-supplement']).toBe(`${supplement.url}|1.0.0`);
  });

  test('unknown code, unknown system and missing supplement are clear OperationOutcomes', async () => {
    const unknownCode = await get(`/fhir/R4/CodeSystem/$lookup?system=${encodeURIComponent(SYSTEM)}&code=unicorn`);
    expect(unknownCode.statusCode).toBe(404);
    expect((unknownCode.json() as OperationOutcome).issue[0].details?.text).toBe(
      `Unable to find code 'unicorn' in ${SYSTEM} version 2.0.0`,
    );
    const unknownSystem = await get('/fhir/R4/CodeSystem/$lookup?system=http://example.org/nothing&code=x');
    expect(unknownSystem.statusCode).toBe(404);
    expect((unknownSystem.json() as OperationOutcome).issue[0].code).toBe('not-found');
    const noSupplement = await post('/fhir/R4/CodeSystem/$lookup', param('system', SYSTEM), param('code', 'dog'), {
      name: 'useSupplement',
      valueCanonical: 'http://example.org/none',
    });
    expect(noSupplement.statusCode).toBe(404);
    expect((noSupplement.json() as OperationOutcome).issue[0].details?.text).toBe(
      'Required supplement not found: http://example.org/none',
    );
  });

  test('an unknown system, version or content speaks of lookup, never of validation', async () => {
    const text = async (url: string) => {
      const res = await get(url);
      expect(res.statusCode, url).toBe(404);
      const issue = (res.json() as OperationOutcome).issue[0];
      expect(issue.code).toBe('not-found');
      return issue.details?.text;
    };
    // LOINC is not loaded here; example.org/nothing is known nowhere.
    expect(await text('/fhir/R4/CodeSystem/$lookup?system=http://loinc.org&code=8302-2')).toBe(
      "A definition for CodeSystem 'http://loinc.org' could not be found, so the code cannot be looked up",
    );
    expect(await text('/fhir/R4/CodeSystem/$lookup?system=http://example.org/nothing&code=x')).toBe(
      "A definition for CodeSystem 'http://example.org/nothing' could not be found, so the code cannot be looked up",
    );
    expect(
      await text(`/fhir/R4/CodeSystem/$lookup?system=${encodeURIComponent(SYSTEM)}&version=9.9.9&code=dog`),
    ).toMatch(
      /^A definition for CodeSystem '.*' version '9\.9\.9' could not be found, so the code cannot be looked up\. Valid versions: /,
    );
    // SNOMED CT is bundled as content = not-present.
    expect(await text('/fhir/R4/CodeSystem/$lookup?system=http://snomed.info/sct&code=22298006')).toMatch(
      /so its codes cannot be looked up$/,
    );
    // An unknown code in a known system was already a lookup's message.
    expect(await text(`/fhir/R4/CodeSystem/$lookup?system=${encodeURIComponent(SYSTEM)}&code=unicorn`)).toBe(
      `Unable to find code 'unicorn' in ${SYSTEM} version 2.0.0`,
    );
  });

  test('a missing code is refused before the engine runs', async () => {
    const res = await get(`/fhir/R4/CodeSystem/$lookup?system=${encodeURIComponent(SYSTEM)}`);
    expect(res.statusCode).toBe(400);
    expect((res.json() as OperationOutcome).issue[0].code).toBe('required');
  });
});

describe('CodeSystem/$validate-code', () => {
  test('url+code by GET, coding and codeableConcept by POST', async () => {
    const byGet = await get(`/fhir/R4/CodeSystem/$validate-code?url=${encodeURIComponent(SYSTEM)}&code=cat`);
    expect(byGet.statusCode, byGet.body).toBe(200);
    expect(outputs(byGet.json())).toMatchObject({ result: true, display: 'Cat', version: '2.0.0' });
    const coding = await post(
      '/fhir/R4/CodeSystem/$validate-code',
      param('coding', { system: SYSTEM, code: 'unicorn' }),
    );
    expect(outputs(coding.json())).toMatchObject({ result: false });
    expect(String(outputs(coding.json()).message)).toContain("Unknown code 'unicorn'");
    const concept = await post(
      '/fhir/R4/CodeSystem/$validate-code',
      param('codeableConcept', { coding: [{ system: SYSTEM, code: 'owl' }] }),
    );
    expect(outputs(concept.json()).result).toBe(true);
  });

  test('instance level, and a wrong display', async () => {
    const res = await get('/fhir/R4/CodeSystem/animals/$validate-code?code=dog&display=Wolf');
    expect(res.statusCode, res.body).toBe(200);
    const out = outputs(res.json());
    expect(out.result).toBe(false);
    expect(String(out.message)).toContain("Wrong Display Name 'Wolf'");
  });

  test('a code system given inline is used for that request only', async () => {
    const inline: CodeSystem = {
      resourceType: 'CodeSystem',
      url: 'http://example.org/inline',
      status: 'active',
      content: 'complete',
      concept: [{ code: 'a', display: 'A' }],
    };
    const res = await post('/fhir/R4/CodeSystem/$validate-code', param('codeSystem', inline), param('code', 'a'));
    expect(outputs(res.json())).toMatchObject({ result: true, display: 'A' });
    const later = await get('/fhir/R4/CodeSystem/$validate-code?url=http://example.org/inline&code=a');
    expect(outputs(later.json()).result).toBe(false);
  });

  test('an unknown system is a result, not an error', async () => {
    const res = await get('/fhir/R4/CodeSystem/$validate-code?url=http://example.org/nothing&code=x');
    expect(res.statusCode).toBe(200);
    const out = outputs(res.json());
    expect(out.result).toBe(false);
    expect(out['x-caused-by-unknown-system']).toBe('http://example.org/nothing');
  });

  test('a supplement named as the system is not a code system', async () => {
    const res = await post(
      '/fhir/R4/CodeSystem/$validate-code',
      param('coding', { system: supplement.url, code: 'dog' }),
    );
    expect(res.statusCode).toBe(200);
    expect(outputs(res.json()).message).toBe(
      `CodeSystem ${supplement.url}|1.0.0 is a supplement, so can't be used as a value in Coding.system`,
    );
  });
});

describe('CodeSystem/$subsumes', () => {
  const cases = [
    ['animal', 'dog', 'subsumes'],
    ['dog', 'animal', 'subsumed-by'],
    ['dog', 'dog', 'equivalent'],
    ['dog', 'owl', 'not-subsumed'],
  ] as const;

  test.each(cases)('%s vs %s is %s (GET, type level)', async (a, b, outcome) => {
    const res = await get(`/fhir/R4/CodeSystem/$subsumes?system=${encodeURIComponent(SYSTEM)}&codeA=${a}&codeB=${b}`);
    expect(res.statusCode, res.body).toBe(200);
    expect(outputs(res.json())).toEqual({ outcome });
  });

  test('codings by POST, and the instance level', async () => {
    const res = await post(
      '/fhir/R4/CodeSystem/$subsumes',
      param('codingA', { system: SYSTEM, code: 'bird' }),
      param('codingB', { system: SYSTEM, code: 'owl' }),
    );
    expect(outputs(res.json())).toEqual({ outcome: 'subsumes' });
    const instance = await get('/fhir/R4/CodeSystem/animals/$subsumes?codeA=owl&codeB=bird');
    expect(outputs(instance.json())).toEqual({ outcome: 'subsumed-by' });
  });

  test('an unknown system speaks of subsumption, never of validation', async () => {
    const res = await get('/fhir/R4/CodeSystem/$subsumes?system=http://loinc.org&codeA=1&codeB=2');
    expect(res.statusCode).toBe(404);
    expect((res.json() as OperationOutcome).issue[0].details?.text).toBe(
      "A definition for CodeSystem 'http://loinc.org' could not be found, so subsumption cannot be tested",
    );
  });

  test('codes of two systems, and an unknown code, are refused', async () => {
    const mixed = await post(
      '/fhir/R4/CodeSystem/$subsumes',
      param('codingA', { system: SYSTEM, code: 'dog' }),
      param('codingB', { system: 'http://example.org/x', code: 'y' }),
    );
    expect(mixed.statusCode).toBe(400);
    expect((mixed.json() as OperationOutcome).issue[0].details?.text).toContain('one code system');
    const unknown = await get(
      `/fhir/R4/CodeSystem/$subsumes?system=${encodeURIComponent(SYSTEM)}&codeA=dog&codeB=unicorn`,
    );
    expect(unknown.statusCode).toBe(404);
    expect((unknown.json() as OperationOutcome).issue[0].details?.text).toContain("Unknown code 'unicorn'");
  });
});
