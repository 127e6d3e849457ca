import type { FastifyInstance } from 'fastify';
import type { ValueSet } from 'fhir/r4';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { issueTexts, outputs, param, partsOf, postParameters, serverApp } from '../helpers/server-app';

/** Terminologies the server knows by rules or tables, behind the same provider seam as CodeSystems. */

let app: FastifyInstance;
let close: () => Promise<void>;

const UCUM = 'http://unitsofmeasure.org';
const BCP47 = 'urn:ietf:bcp:47';
const ISO3166 = 'urn:iso:std:iso:3166';

const inSystem = async (url: string, code: string, ...extra: Record<string, unknown>[]) => {
  const res = await postParameters(
    app,
    '/fhir/R4/CodeSystem/$validate-code',
    param('url', url),
    param('code', code),
    ...extra,
  );
  expect(res.statusCode, res.body).toBe(200);
  return { out: outputs(res.json()), texts: issueTexts(res.json()), body: res.json() };
};
const inValueSet = async (vs: ValueSet, system: string, code: string) => {
  const res = await postParameters(
    app,
    '/fhir/R4/ValueSet/$validate-code',
    param('valueSet', vs),
    param('system', system),
    param('code', code),
  );
  expect(res.statusCode, res.body).toBe(200);
  return { out: outputs(res.json()), texts: issueTexts(res.json()) };
};
const expand = (vs: ValueSet) => postParameters(app, '/fhir/R4/ValueSet/$expand', param('valueSet', vs));
const all = (system: string): ValueSet => ({
  resourceType: 'ValueSet',
  url: 'http://example.org/vs/all',
  status: 'active',
  compose: { include: [{ system }] },
});

beforeAll(async () => {
  ({ app, close } = await serverApp());
});
afterAll(() => close());

describe('UCUM', () => {
  test('any valid expression is a code, its display the expression itself', async () => {
    for (const code of ['kg', 'mg/dL', '10*6/uL', 'mg/dL{milligram per deciliter}', 'cm2']) {
      const { out } = await inSystem(UCUM, code);
      expect(out, code).toMatchObject({ result: true, display: code, version: '2.2' });
    }
  });

  test('an invalid expression is an unknown code, with the reason as a note', async () => {
    const { out, body } = await inSystem(UCUM, 'kgXX');
    expect(out.result).toBe(false);
    const issues = (outputs(body).issues as { issue: { severity: string; details: { text: string } }[] }).issue;
    expect(issues.map((i) => [i.severity, i.details.text])).toContainEqual([
      'information',
      "Error processing unit 'kgXX': The unit 'kgXX' is unknown at character 1",
    ]);
    expect((await inSystem(UCUM, 'MG/DL')).out.result).toBe(false);
  });

  test('$lookup gives the expression in words and the common-units name', async () => {
    const res = await postParameters(app, '/fhir/R4/CodeSystem/$lookup', param('system', UCUM), param('code', 'mg/dL'));
    expect(res.statusCode).toBe(200);
    expect(outputs(res.json())).toMatchObject({ name: 'UCUM', version: '2.2', display: 'mg/dL' });
    const values = partsOf(res.json(), 'designation').map((d) => d.value);
    expect(values).toEqual(['mg/dL', '(milligram) / (deciliter)', 'milligram per deciliter']);
  });

  test('the canonical filter keeps the units of one dimension and says why another is not', async () => {
    const grams: ValueSet = {
      resourceType: 'ValueSet',
      url: 'http://example.org/vs/g',
      status: 'active',
      compose: { include: [{ system: UCUM, filter: [{ property: 'canonical', op: '=', value: 'g' }] }] },
    };
    expect((await inValueSet(grams, UCUM, 'g/mol')).out.result).toBe(true);
    const ml = await inValueSet(grams, UCUM, 'mL');
    expect(ml.out.result).toBe(false);
    expect(String(ml.out.message)).toContain('Code mL has canonical form m3, not g as required');
    const res = await expand(grams);
    expect(res.statusCode).toBe(200);
    const codes = (res.json().expansion.contains as { code: string }[]).map((c) => c.code);
    expect(codes).toEqual(expect.arrayContaining(['g', 'kg', 'mg', 'ug', 'g/mol']));
    expect(codes).not.toContain('mL');
    expect(res.json().expansion.total).toBe(codes.length);
  });

  test('all of UCUM expands to the common units, unclosed and without a total', async () => {
    const res = await expand(all(UCUM));
    expect(res.statusCode).toBe(200);
    const expansion = res.json().expansion;
    expect(expansion.total).toBeUndefined();
    expect(expansion.extension).toContainEqual({
      url: 'http://hl7.org/fhir/StructureDefinition/valueset-unclosed',
      valueBoolean: true,
    });
    expect(expansion.contains.length).toBeGreaterThan(1000);
  });
});

describe('BCP-47 language tags', () => {
  test('registered subtags in their conventional case are codes, displayed from the registry', async () => {
    expect((await inSystem(BCP47, 'en-US')).out).toMatchObject({ result: true, display: 'English (United States)' });
    expect((await inSystem(BCP47, 'de')).out).toMatchObject({ result: true, display: 'German' });
    expect((await inSystem(BCP47, 'de-Latn-CH')).out).toMatchObject({
      result: true,
      display: 'German (Latin, Switzerland)',
    });
    // A whole tag the registry lists (a redundant one) has the registry's own description.
    expect((await inSystem(BCP47, 'zh-Hant-TW')).out).toMatchObject({
      result: true,
      display: 'Taiwan Chinese in traditional script',
    });
  });

  test('wrong case, unregistered subtags and broken syntax are unknown codes', async () => {
    for (const code of ['en-us', 'xx-US', 'en-QQQ', 'english', 'en--US']) {
      const { out, texts } = await inSystem(BCP47, code);
      expect(out.result, code).toBe(false);
      expect(texts, code).toContain(`Unknown code '${code}' in the CodeSystem '${BCP47}'`);
    }
  });

  test('all languages cannot be listed without a value set that stands for them', async () => {
    const res = await expand(all(BCP47));
    expect(res.statusCode).toBe(422);
    expect(res.json().issue[0]).toMatchObject({ code: 'not-supported' });
  });
});

describe('ISO 3166, ISO 4217, MIME types, HGVS', () => {
  test('countries by alpha-2, alpha-3 and numeric code; user-assigned codes take any display with a note', async () => {
    for (const code of ['NL', 'NLD', '528'])
      expect((await inSystem(ISO3166, code)).out).toMatchObject({
        result: true,
        display: 'Netherlands',
        version: '2018',
      });
    const own = await inSystem(ISO3166, 'QX', param('display', 'My Region'));
    expect(own.out).toMatchObject({ result: true, display: 'User-assigned' });
    expect(own.texts[0]).toMatch(
      /^The display name 'My Region' is not a known display name for urn:iso:std:iso:3166#QX/,
    );
    const wrong = await inSystem(ISO3166, 'NL', param('display', 'Holland'));
    expect(wrong.out.result).toBe(false);
    expect((await inSystem(ISO3166, 'QQQ')).out.result).toBe(false);
    const res = await expand(all(ISO3166));
    expect(res.json().expansion.total).toBe(249 * 3 + 42);
  });

  test('currencies with their English names', async () => {
    expect((await inSystem('urn:iso:std:iso:4217', 'EUR')).out).toMatchObject({ result: true, display: 'Euro' });
    expect((await inSystem('urn:iso:std:iso:4217', 'EURO')).out.result).toBe(false);
  });

  test('MIME types by their grammar', async () => {
    expect((await inSystem('urn:ietf:bcp:13', 'application/fhir+json')).out.result).toBe(true);
    expect((await inSystem('urn:ietf:bcp:13', 'text/plain;charset=UTF-8')).out.result).toBe(true);
    expect((await inSystem('urn:ietf:bcp:13', 'fhir+json')).out.result).toBe(false);
  });

  test('HGVS: descriptions by shape; all of it cannot be expanded', async () => {
    expect((await inSystem('http://varnomen.hgvs.org', 'NM_004006.2:c.4375C>T')).out.result).toBe(true);
    expect((await inSystem('http://varnomen.hgvs.org', 'BRCA1 bad')).out.result).toBe(false);
    const res = await expand(all('http://varnomen.hgvs.org'));
    expect(res.statusCode).toBe(422);
    expect(res.json().issue[0]).toMatchObject({
      code: 'not-supported',
      details: {
        text: "The code system 'http://varnomen.hgvs.org' cannot be expanded because its codes cannot be iterated or enumerated in any meaningful sense",
      },
    });
  });

  test('the terminology capabilities list the built-in systems with their versions', async () => {
    const res = await app.inject({ method: 'GET', url: '/fhir/R4/metadata?mode=terminology' });
    const systems = res.json().codeSystem as { uri: string; version?: { code: string }[] }[];
    expect(systems).toContainEqual({ uri: UCUM, version: [{ code: '2.2' }] });
    expect(systems.map((s) => s.uri)).toEqual(
      expect.arrayContaining([BCP47, ISO3166, 'urn:iso:std:iso:4217', 'urn:ietf:bcp:13', 'http://varnomen.hgvs.org']),
    );
  });
});

/** The CodeSystem-resource provider's own files, and the registry that picks it. */
const KNOW_THE_RESOURCE_PROVIDER = [
  'resource-provider.ts',
  'filters.ts',
  'select.ts',
  'supplemented-provider.ts',
  'registry.ts',
];

describe('the provider seam', () => {
  test('outside the CodeSystem-resource provider and the registry, the engine talks to CodeSystemProvider only', () => {
    const root = join(__dirname, '../../src/terminology');
    const files = (dir: string): string[] =>
      readdirSync(dir).flatMap((f) => (statSync(join(dir, f)).isDirectory() ? files(join(dir, f)) : [join(dir, f)]));
    const offenders = files(root)
      .filter((f) => !KNOW_THE_RESOURCE_PROVIDER.some((own) => f.endsWith(join('terminology', 'providers', own))))
      .filter((f) => /ResourceCodeSystemProvider|ConceptNode|resource-provider/.test(readFileSync(f, 'utf8')));
    expect(offenders).toEqual([]);
  });
});
