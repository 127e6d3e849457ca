import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Patient, Resource } from 'fhir/r4';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { onBothBackends, putResource, type OpenServer } from '../helpers/server-app';
import { seedFuzzing } from '../helpers/fuzz-seed';

seedFuzzing();

/** FHIR GraphQL (R4 graphql.html) over the spec's example resources, on both backends. */

const require = createRequire(import.meta.url);
const example = <T>(name: string) =>
  JSON.parse(readFileSync(require.resolve(`hl7.fhir.r4.examples/${name}`), 'utf8')) as T;

function suite(name: string, open: () => Promise<OpenServer>) {
  describe(`$graphql (${name})`, () => {
    let server: ServerApp;
    let cleanup: () => Promise<void>;
    const post = async (query: string, url = '/fhir/R4/$graphql', variables?: object) => {
      const res = await server.app.inject({
        method: 'POST',
        url,
        headers: { 'content-type': 'application/json' },
        payload: { query, variables },
      });
      return {
        status: res.statusCode,
        type: res.headers['content-type'],
        body: res.json() as {
          data?: Record<string, unknown>;
          errors?: { message: string; extensions?: { outcome?: { resourceType: string } } }[];
        },
      };
    };

    const put = (resource: object) => putResource(server.app, resource as Resource);
    beforeAll(async () => {
      ({ server, cleanup } = await open());
      const patient = example<Patient>('Patient-example.json');
      await putResource(server.app, patient);
      await put({ resourceType: 'Organization', id: 'org1', name: 'Good Health Clinic' });
      await putResource(server.app, {
        ...patient,
        id: 'pat2',
        name: [{ use: 'official', family: 'Chalmers', given: ['Peter'] }],
        managingOrganization: { reference: 'Organization/org1' },
      } as Patient);
      for (let i = 0; i < 5; i++) {
        await put({
          resourceType: 'Observation',
          id: `obs${i}`,
          status: 'final',
          code: { coding: [{ system: 'http://loinc.org', code: '8867-4', display: 'Heart rate' }] },
          subject: { reference: 'Patient/example' },
          effectiveDateTime: `2024-01-0${i + 1}`,
          valueQuantity: { value: 60 + i, unit: 'beats/minute', system: 'http://unitsofmeasure.org', code: '/min' },
          extension: [{ url: 'http://example.org/ext/source', valueString: `device-${i}` }],
        });
      }
      await put({
        resourceType: 'Observation',
        id: 'withcontained',
        status: 'final',
        code: { text: 'contained' },
        contained: [{ resourceType: 'Practitioner', id: 'p1', name: [{ family: 'Contained' }] }],
        performer: [{ reference: '#p1' }],
      });
      await put({
        resourceType: 'Condition',
        id: 'cond1',
        subject: { reference: 'Patient/example' },
        code: { text: 'Asthma' },
      });
    });
    afterAll(() => cleanup?.());

    test('instance level: the resource is the root (graphql.html "{ name { text given family } }")', async () => {
      const res = await post('{ id name { text given family } }', '/fhir/R4/Patient/example/$graphql');
      expect(res.status).toBe(200);
      expect(res.type).toContain('application/json');
      expect(res.body.data).toEqual({
        id: 'example',
        name: [
          { text: null, given: ['Peter', 'James'], family: 'Chalmers' },
          { text: null, given: ['Jim'], family: null },
          { text: null, given: ['Peter', 'James'], family: 'Windsor' },
        ],
      });
    });

    test('GET with query, and application/graphql bodies', async () => {
      const get = await server.app.inject({
        method: 'GET',
        url: `/fhir/R4/$graphql?query=${encodeURIComponent('{ Patient(id: "example") { id gender } }')}`,
      });
      expect(get.statusCode).toBe(200);
      expect(get.json().data).toEqual({ Patient: { id: 'example', gender: 'male' } });
      const text = await server.app.inject({
        method: 'POST',
        url: '/fhir/R4/$graphql',
        headers: { 'content-type': 'application/graphql' },
        payload: '{ Patient(id: "pat2") { id } }',
      });
      expect(text.json().data).toEqual({ Patient: { id: 'pat2' } });
    });

    test('lists with search parameters, polymorphic fields, primitive extensions, field filters', async () => {
      const res = await post(`{
        ObservationList(subject: "Patient/example", _sort: "date", _count: 3) {
          id valueQuantity { value unit } effectiveDateTime
          extension(url: "http://example.org/ext/source") { valueString }
        }
        PatientList(family: "chalmers", _sort: "_id") { id name(use: official) { family } }
      }`);
      expect(res.status).toBe(200);
      const list = res.body.data?.ObservationList as {
        id: string;
        valueQuantity: { value: number };
        extension: { valueString: string }[];
      }[];
      expect(list.map((o) => o.id)).toEqual(['obs0', 'obs1', 'obs2']);
      expect(list[1].valueQuantity).toEqual({ value: 61, unit: 'beats/minute' });
      expect(list[2].extension).toEqual([{ valueString: 'device-2' }]);
      expect(res.body.data?.PatientList).toEqual([
        { id: 'example', name: [{ family: 'Chalmers' }] },
        { id: 'pat2', name: [{ family: 'Chalmers' }] },
      ]);
    });

    test('references are followed (resource, with type and optional), reverse references with _reference', async () => {
      const res = await post(`{
        Patient(id: "pat2") { managingOrganization { reference resource { ... on Organization { name } } } }
        Condition(id: "cond1") { subject { resource(type: "Patient") { ... on Patient { id birthDate } } } }
      }`);
      expect(res.body.errors).toBeUndefined();
      expect(res.body.data).toEqual({
        Patient: { managingOrganization: { reference: 'Organization/org1', resource: { name: 'Good Health Clinic' } } },
        Condition: { subject: { resource: { id: 'example', birthDate: '1974-12-25' } } },
      });
      const reverse = await post(
        '{ ObservationList(_reference: subject, _sort: "-date", _count: 2) { id } ConditionList(_reference: patient) { code { text } } }'
          .replace('subject,', '"subject",')
          .replace('patient)', '"patient")'),
        '/fhir/R4/Patient/example/$graphql',
      );
      expect(reverse.body.errors).toBeUndefined();
      expect(reverse.body.data).toEqual({
        ObservationList: [{ id: 'obs4' }, { id: 'obs3' }],
        ConditionList: [{ code: { text: 'Asthma' } }],
      });
      const contained = await post(
        '{ performer { reference resource { ... on Practitioner { name { family } } } } }',
        '/fhir/R4/Observation/withcontained/$graphql',
      );
      expect(contained.body.errors).toBeUndefined();
      expect(contained.body.data).toEqual({
        performer: [{ reference: '#p1', resource: { name: [{ family: 'Contained' }] } }],
      });
      const missing = await post(
        '{ Observation(id: "obs0") { subject { resource(type: "Group") { ... on Group { id } } } } }',
      );
      expect(missing.body.data).toEqual({ Observation: { subject: { resource: null } } });
    });

    test('connections: count, paging cursors, edges with mode', async () => {
      const first = await post(
        '{ ObservationConnection(subject: "Patient/example", _sort: "date", _count: 2) { count pagesize next edges { mode resource { id } } } }',
      );
      const page = first.body.data?.ObservationConnection as {
        count: number;
        next: string;
        edges: { mode: string; resource: { id: string } }[];
      };
      expect(page.count).toBe(5);
      expect(page.edges).toEqual([
        { mode: 'match', resource: { id: 'obs0' } },
        { mode: 'match', resource: { id: 'obs1' } },
      ]);
      const second = await post(
        'query ($c: String) { ObservationConnection(_cursor: $c) { edges { resource { id } } } }',
        undefined,
        { c: page.next },
      );
      expect(
        (second.body.data?.ObservationConnection as { edges: { resource: { id: string } }[] }).edges.map(
          (e) => e.resource.id,
        ),
      ).toEqual(['obs2', 'obs3']);
    });

    test('the FHIR directives: @first, @singleton, @flatten, @slice', async () => {
      const res = await post(
        '{ name @first @flatten { family given @first } telecom @slice(path: "use") { value } managingOrganization @flatten { reference } }',
        '/fhir/R4/Patient/pat2/$graphql',
      );
      expect(res.body.errors).toBeUndefined();
      expect(res.body.data).toEqual({
        family: 'Chalmers',
        given: 'Peter',
        'telecom.home': { value: null },
        'telecom.work': { value: '(03) 5555 6473' },
        'telecom.mobile': { value: '(03) 3410 5613' },
        'telecom.old': { value: '(03) 5555 8834' },
        reference: 'Organization/org1',
      });
      const single = await post('{ name @singleton { family } }', '/fhir/R4/Patient/pat2/$graphql');
      expect(single.body.data).toEqual({ name: { family: 'Chalmers' } });
      const spread = await post('{ name @flatten { given } }', '/fhir/R4/Patient/example/$graphql');
      expect(spread.body.data).toEqual({ given: ['Peter', 'James', 'Jim', 'Peter', 'James'] });
    });

    test.each([
      ['@skip(if: $flag), $flag true', 'skip', true, ['id']],
      ['@skip(if: $flag), $flag false', 'skip', false, ['id', 'gender']],
      ['@include(if: $flag), $flag true', 'include', true, ['id', 'gender']],
      ['@include(if: $flag), $flag false', 'include', false, ['id']],
    ])(
      '%s, with $flag declared Boolean (as the FHIR GraphQL test cases write it)',
      async (_name, directive, flag, keys) => {
        const query = `query ($flag: Boolean) { id gender @${directive}(if: $flag) }`;
        const res = await post(query, '/fhir/R4/Patient/example/$graphql', { flag });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        expect(Object.keys(res.body.data ?? {})).toEqual(keys);
        // A variable used elsewhere too still fits there: a non-null value fits a nullable argument.
        const spread = await post(
          `query ($flag: Boolean) { ...on Patient { id gender @${directive}(if: $flag) } }`,
          '/fhir/R4/Patient/example/$graphql',
          { flag },
        );
        expect(Object.keys(spread.body.data ?? {})).toEqual(keys);
      },
    );

    test('a Boolean condition variable that is null or not given is refused (GraphQL refuses them for Boolean!); one with a default takes it', async () => {
      const query = 'query ($flag: Boolean) { id gender @skip(if: $flag) }';
      const absent = await post(query, '/fhir/R4/Patient/example/$graphql');
      expect(absent.status).toBe(400);
      expect(absent.body.errors?.[0].message).toBe(
        'the variable $flag decides @skip or @include, so it must be true or false; it is not given',
      );
      const nulled = await post(query, '/fhir/R4/Patient/example/$graphql', { flag: null });
      expect(nulled.status).toBe(400);
      expect(nulled.body.errors?.[0].message).toContain('it is null');
      const defaulted = await post(
        'query ($flag: Boolean = true) { id gender @skip(if: $flag) }',
        '/fhir/R4/Patient/example/$graphql',
      );
      expect(defaulted.status, JSON.stringify(defaulted.body)).toBe(200);
      expect(Object.keys(defaulted.body.data ?? {})).toEqual(['id']);
    });

    test('mutations go through the REST core; never by GET (405)', async () => {
      const created = await post(
        'mutation { PatientCreate(res: { resourceType: "Patient", gender: "female" }) { id gender } }',
      );
      expect(created.body.errors).toBeUndefined();
      const id = (created.body.data?.PatientCreate as { id: string }).id;
      expect((await server.app.inject({ method: 'GET', url: `/fhir/R4/Patient/${id}` })).statusCode).toBe(200);
      const updated = await post(
        `mutation { PatientUpdate(id: "${id}", res: { resourceType: "Patient", id: "${id}", gender: "other" }) { gender } }`,
      );
      expect(updated.body.data).toEqual({ PatientUpdate: { gender: 'other' } });
      // As graphql.html writes it: a variable of the type's input type.
      const typed = await post('mutation ($res: PatientInput!) { PatientCreate(res: $res) { gender } }', undefined, {
        res: { resourceType: 'Patient', gender: 'male' },
      });
      expect(typed.body.errors).toBeUndefined();
      expect(typed.body.data).toEqual({ PatientCreate: { gender: 'male' } });
      const wrongType = await post('mutation ($res: PatientInput!) { PatientCreate(res: $res) { id } }', undefined, {
        res: { resourceType: 'Observation' },
      });
      expect(wrongType.body.errors?.[0].message).toContain('PatientInput must be a Patient resource');
      const invalid = await post('mutation { PatientCreate(res: { resourceType: "Patient", gender: 12 }) { id } }');
      expect(invalid.body.errors?.[0].extensions?.outcome?.resourceType).toBe('OperationOutcome');
      const byGet = await server.app.inject({
        method: 'GET',
        url: `/fhir/R4/$graphql?query=${encodeURIComponent(`mutation { PatientDelete(id: "${id}") { id } }`)}`,
      });
      expect(byGet.statusCode).toBe(405);
      expect(byGet.json().errors[0].extensions.outcome.resourceType).toBe('OperationOutcome');
      expect((await server.app.inject({ method: 'GET', url: `/fhir/R4/Patient/${id}` })).statusCode).toBe(200);
      await post(`mutation { PatientDelete(id: "${id}") { id } }`);
      expect((await server.app.inject({ method: 'GET', url: `/fhir/R4/Patient/${id}` })).statusCode).toBe(410);
    });

    test('refused with 400 and an OperationOutcome: syntax, unknown fields, depth 13, an over-budget query', async () => {
      for (const query of ['{ Patient(id: "example") { id ', '{ Patient(id: "example") { nope } }']) {
        const res = await post(query);
        expect(res.status, query).toBe(400);
        expect(res.body.errors?.[0].extensions?.outcome?.resourceType).toBe('OperationOutcome');
      }
      // 13 levels: Patient > managingOrganization > resource > ... nested through references.
      let deep = 'id';
      for (let i = 0; i < 12; i++) deep = `extension { ${deep === 'id' ? 'url' : deep} }`;
      const tooDeep = await post(`{ Patient(id: "example") { ${deep} } }`);
      expect(tooDeep.status).toBe(400);
      expect(tooDeep.body.errors?.[0].message).toMatch(/levels deep/);
      const costly = await post(
        '{ PatientList(_count: 1000) { ObservationList(_reference: "subject", _count: 1000) { id code { text } } } }',
      );
      expect(costly.status).toBe(400);
      expect(costly.body.errors?.[0].message).toMatch(/cost/);
      const unknown = await post('{ Patient(id: "nope") { id } }');
      expect(unknown.status).toBe(200);
      expect(unknown.body.data).toEqual({ Patient: null });
      expect(unknown.body.errors?.[0].message).toMatch(/nope/);
    });

    test('documents whose fragments or repeats multiply are refused before validation: 400 too-costly', async () => {
      const tooCostly = async (query: string, message: RegExp) => {
        const res = await post(query);
        expect(res.status, query.slice(0, 80)).toBe(400);
        expect(res.body.errors?.[0].message).toMatch(message);
        expect(
          (res.body.errors?.[0].extensions?.outcome as { issue?: { code: string }[] } | undefined)?.issue?.[0].code,
        ).toBe('too-costly');
      };
      // Fragments each spreading the one below twice: 2^12 fields in 500 bytes (40 levels, in
      // test/hardening/graphql-costs.test.ts, held the event loop for ever; here they stay small
      // enough that a regression fails instead of hanging this process).
      const doubling = [
        'fragment F0 on Patient { id }',
        ...Array.from({ length: 12 }, (_, i) => `fragment F${i + 1} on Patient { ...F${i} ...F${i} }`),
      ];
      await tooCostly(`{ Patient(id: "example") { ...F12 } }\n${doubling.join('\n')}`, /pairs/);
      // The same through fields: 10 levels, each holding the one below twice.
      const nested = [
        'fragment E0 on Extension { url }',
        ...Array.from(
          { length: 10 },
          (_, i) => `fragment E${i + 1} on Extension { extension { ...E${i} } extension { ...E${i} } }`,
        ),
      ];
      await tooCostly(`{ Patient(id: "example") { extension { ...E10 } } }\n${nested.join('\n')}`, /pairs/);
      // What graphql-js's OverlappingFieldsCanBeMerged compares pairwise: one response name many times.
      await tooCostly(`{ Patient(id: "example") { ${'a: id '.repeat(500)} } }`, /pairs/);
      await tooCostly(`{ Patient(id: "example") { ${'name { family } '.repeat(400)} } }`, /pairs/);
      await tooCostly(
        `{ Patient(id: "example") { ${'... on Patient { id '.repeat(100)}${'}'.repeat(100)} } }`,
        /nests selections 102 deep/,
      );
      // A fragment spread in itself is refused (graphql-js would, after walking it).
      const cycle = await post(
        '{ Patient(id: "example") { ...A } } fragment A on Patient { ...B } fragment B on Patient { id ...A }',
      );
      expect(cycle.status).toBe(400);
      expect(cycle.body.errors?.[0].message).toMatch(/within itself/);
    });

    test('a fragment spread several times is measured once and answers as written', async () => {
      const res = await post(`{ Patient(id: "example") { ...Names ...Names other: name { ...Family } } }
        fragment Names on Patient { id name { ...Family } }
        fragment Family on HumanName { family }`);
      expect(res.status).toBe(200);
      expect(res.body.data?.Patient).toEqual({
        id: 'example',
        name: [{ family: 'Chalmers' }, { family: null }, { family: 'Windsor' }],
        other: [{ family: 'Chalmers' }, { family: null }, { family: 'Windsor' }],
      });
      // The resource shorthand puts fields under every type that has them (~140 for id): five of
      // those in one query are within the pairs limit.
      const untyped = await post(
        '{ ObservationList(_count: 2) { subject { resource { id } } performer { resource { id } } encounter { resource { id } } basedOn { resource { id } } partOf { resource { id } } } }',
      );
      expect(untyped.status, JSON.stringify(untyped.body.errors)).toBe(200);
    });

    test('fuzzed queries: never a 5xx, always {data} or {errors}', async () => {
      const names = [
        'Patient',
        'PatientList',
        'ObservationConnection',
        'ObservationList',
        'id',
        'name',
        'given',
        'subject',
        'resource',
        'valueQuantity',
        'value',
        'extension',
        'nope',
        '__typename',
        'edges',
        '... on Patient',
        'PatientCreate',
      ];
      const args = fc.oneof(
        fc.constant(''),
        fc.constant('(id: "example")'),
        fc.constant('(_count: -1)'),
        fc.constant('(_count: 99999999999)'),
        fc.constant('(_reference: subject)'),
        fc.constant('(url: 1.5)'),
        fc.constant('(fhirpath: "((")'),
        fc.string({ maxLength: 12 }).map((t) => `(name: ${JSON.stringify(t)})`),
      );
      const field: fc.Memo<string> = fc.memo((depth) =>
        depth <= 1
          ? fc.tuple(fc.constantFrom(...names), args).map(([n, a]) => `${n}${a}`)
          : fc
              .tuple(
                fc.constantFrom(...names),
                args,
                fc.array(field(depth - 1), { maxLength: 3 }),
                fc.constantFrom('', ' @first', ' @flatten', ' @slice(path: "use")', ' @singleton'),
              )
              .map(([n, a, children, d]) => `${n}${a}${d}${children.length ? ` { ${children.join(' ')} }` : ''}`),
      );
      const query = fc.oneof(
        fc.array(field(4), { minLength: 1, maxLength: 3 }).map((f) => `{ ${f.join(' ')} }`),
        fc.string({ maxLength: 40 }),
      );
      await fc.assert(
        fc.asyncProperty(
          query,
          fc.constantFrom('/fhir/R4/$graphql', '/fhir/R4/Patient/example/$graphql'),
          async (q, url) => {
            const res = await post(q, url);
            expect(res.status, q).toBeLessThan(500);
            expect(res.body.data !== undefined || res.body.errors !== undefined, q).toBe(true);
          },
        ),
        { numRuns: 150 },
      );
    });

    test('a patient with its observations: the SQL statements do not grow with the number of observations', async () => {
      const store = server.core.repository.store;
      const spy = vi.spyOn(store, 'query');
      const query =
        '{ ObservationList(_reference: "subject", _count: 2) { id subject { resource { ... on Patient { id } } } } ConditionList(_reference: "patient") { id } }';
      spy.mockClear();
      await post(query.replace('_count: 2', '_count: 2'), '/fhir/R4/Patient/example/$graphql');
      const few = spy.mock.calls.length;
      spy.mockClear();
      const all = await post(query.replace('_count: 2', '_count: 5'), '/fhir/R4/Patient/example/$graphql');
      expect((all.body.data?.ObservationList as unknown[]).length).toBe(5);
      expect(spy.mock.calls.length).toBe(few);
      spy.mockRestore();
    });
  });
}

onBothBackends(suite);
