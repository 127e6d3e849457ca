import type { Bundle, OperationOutcome, Patient, Resource } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { compartmentTypes, inPatientCompartment, referencesIn } from '../helpers/compartment-oracle';
import { FHIR_JSON, onBothBackends, storeAll } from '../helpers/server-app';
import { skipWithout } from '../helpers/shared';
import { SYNTHEA, syntheaResources } from '../helpers/synthea';

/**
 * Patient $everything over three Synthea patients (with their hospitals and practitioners), on
 * both backends: every page followed, the union compared with the compartment worked out from
 * HL7's CompartmentDefinition (test/helpers/compartment-oracle.ts), never with the server's code.
 */

const OPERATOR = 'everything-operator-token-0123';
const resources = SYNTHEA.present ? syntheaResources({ patients: 3 }) : [];
const patients = resources.filter((r): r is Patient => r.resourceType === 'Patient');
const byKey = new Map(resources.map((r) => [`${r.resourceType}/${r.id}`, r]));
const SUPPORTING = new Set([
  'Practitioner',
  'PractitionerRole',
  'Organization',
  'Location',
  'Medication',
  'Substance',
  'HealthcareService',
  'Endpoint',
  'Group',
  'Binary',
]);

function expectedRecord(id: string): { members: string[]; supporting: string[] } {
  const types = new Set(compartmentTypes());
  const members = resources.filter(
    (r) => types.has(r.resourceType) && r.resourceType !== 'Patient' && inPatientCompartment(r, id),
  );
  const supporting = new Set<string>();
  for (const r of members)
    for (const ref of referencesIn(r)) if (SUPPORTING.has(ref.split('/')[0]) && byKey.has(ref)) supporting.add(ref);
  return {
    members: [`Patient/${id}`, ...members.map((r) => `${r.resourceType}/${r.id}`)].sort(),
    supporting: [...supporting].sort(),
  };
}

function suite(name: string, open: () => Promise<{ server: ServerApp; cleanup: () => Promise<void> }>) {
  describe(`Patient $everything (${name})`, () => {
    let server: ServerApp;
    let cleanup: () => Promise<void>;
    const get = (url: string, token = OPERATOR, headers: Record<string, string> = {}) =>
      server.app.inject({
        method: 'GET',
        url: url.replace(/^https?:\/\/[^/]+/, ''),
        headers: { authorization: `Bearer ${token}`, ...headers },
      });

    async function allPages(url: string): Promise<{ keys: string[]; modes: Map<string, string>; pages: Bundle[] }> {
      const keys: string[] = [];
      const modes = new Map<string, string>();
      const pages: Bundle[] = [];
      let next: string | undefined = url;
      while (next) {
        const res = await get(next);
        expect(res.statusCode, res.body).toBe(200);
        const page = res.json() as Bundle;
        pages.push(page);
        for (const e of page.entry ?? []) {
          const key = `${e.resource?.resourceType}/${e.resource?.id}`;
          keys.push(key);
          modes.set(key, e.search?.mode as string);
          expect(e.fullUrl).toMatch(new RegExp(`/fhir/R4/${key}$`));
        }
        next = page.link?.find((l) => l.relation === 'next')?.url;
      }
      return { keys, modes, pages };
    }

    beforeAll(async () => {
      ({ server, cleanup } = await open());
      await storeAll(server, resources);
    }, 180_000);
    afterAll(() => cleanup?.());

    test.each(patients.map((p, i) => [i, p.id as string]))(
      'patient %i: the union of the pages is its compartment and what that references, once each',
      async (_i, id) => {
        const expected = expectedRecord(id);
        expect(expected.members.length).toBeGreaterThan(50);
        expect(expected.supporting.length).toBeGreaterThan(2);
        const { keys, modes, pages } = await allPages(`/fhir/R4/Patient/${id}/$everything?_count=37`);
        expect(new Set(keys).size, 'no resource twice').toBe(keys.length);
        for (const page of pages) expect(page.entry?.length ?? 0).toBeLessThanOrEqual(37);
        expect(pages.length).toBeGreaterThan(1);
        expect(keys[0]).toBe(`Patient/${id}`);
        expect(keys.filter((k) => modes.get(k) === 'match').sort()).toEqual(expected.members);
        expect(keys.filter((k) => modes.get(k) === 'include').sort()).toEqual(expected.supporting);
      },
    );

    test('one page when _count is not given (no cap below the record), and POST answers the same', async () => {
      const id = patients[0].id as string;
      const expected = expectedRecord(id);
      const total = expected.members.length + expected.supporting.length;
      const { keys, pages } = await allPages(`/fhir/R4/Patient/${id}/$everything`);
      expect(keys.length).toBe(total);
      expect(pages.length).toBe(Math.ceil(total / 1000));
      const post = await server.app.inject({
        method: 'POST',
        url: `/fhir/R4/Patient/${id}/$everything`,
        headers: { ...FHIR_JSON, authorization: `Bearer ${OPERATOR}` },
        payload: { resourceType: 'Parameters', parameter: [{ name: '_type', valueCode: 'Encounter' }] },
      });
      expect(post.statusCode, post.body).toBe(200);
      const bundle = post.json() as Bundle;
      expect(new Set(bundle.entry?.map((e) => e.resource?.resourceType))).toEqual(new Set(['Encounter']));
      expect(bundle.entry?.length).toBe(expected.members.filter((k) => k.startsWith('Encounter/')).length);
    });

    test('_type, start/end (care dates) and _since narrow the record', async () => {
      const id = patients[1].id as string;
      const types = await allPages(`/fhir/R4/Patient/${id}/$everything?_type=Patient,Condition,Organization`);
      expect(new Set(types.keys.map((k) => k.split('/')[0]))).toEqual(
        new Set(['Patient', 'Condition', 'Organization']),
      );
      const encounters = expectedRecord(id)
        .members.filter((k) => k.startsWith('Encounter/'))
        .map((k) => byKey.get(k) as Resource & { period?: { start?: string; end?: string } });
      const from = '2015-01-01';
      const dated = await allPages(`/fhir/R4/Patient/${id}/$everything?_type=Encounter&start=${from}`);
      const expected = encounters
        .filter((e) => Date.parse(e.period?.end ?? e.period?.start ?? '') >= Date.parse(from))
        .map((e) => `Encounter/${e.id}`)
        .sort();
      expect(dated.keys.sort()).toEqual(expected);
      const future = await allPages(`/fhir/R4/Patient/${id}/$everything?_since=2999-01-01T00:00:00Z`);
      expect(future.keys).toEqual([`Patient/${id}`]);
    });

    test('type level: every patient with its record', async () => {
      const { keys } = await allPages('/fhir/R4/Patient/$everything?_type=Patient,Encounter&_count=100');
      const expected = patients.flatMap((p) =>
        expectedRecord(p.id as string).members.filter((k) => /^(Patient|Encounter)\//.test(k)),
      );
      expect(keys.sort()).toEqual([...new Set(expected)].sort());
    });

    test('an unknown patient is 404; another project sees no patient of this one', async () => {
      const unknown = await get('/fhir/R4/Patient/no-such-patient/$everything');
      expect(unknown.statusCode).toBe(404);
      expect((unknown.json() as OperationOutcome).resourceType).toBe('OperationOutcome');
      const init = await server.app.inject({
        method: 'POST',
        url: '/fhir/R4/Project/$init',
        headers: { ...FHIR_JSON, authorization: `Bearer ${OPERATOR}` },
        payload: { resourceType: 'Parameters', parameter: [{ name: 'name', valueString: 'everything-other' }] },
      });
      expect(init.statusCode, init.body).toBe(201);
      const other = (init.json() as Resource).id as string;
      const elsewhere = await get(`/fhir/R4/Patient/${patients[0].id}/$everything`, OPERATOR, { 'x-project': other });
      expect(elsewhere.statusCode).toBe(404);
      const typeLevel = await get('/fhir/R4/Patient/$everything', OPERATOR, { 'x-project': other });
      expect(typeLevel.statusCode, typeLevel.body).toBe(200);
      expect((typeLevel.json() as Bundle).entry).toBeUndefined();
    });
  });
}

if (!SYNTHEA.present) skipWithout(SYNTHEA);
else onBothBackends(suite, { authTokens: [OPERATOR] });
