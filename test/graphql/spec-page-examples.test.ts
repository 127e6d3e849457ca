import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { List, Resource } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { onBothBackends, putResource, type OpenServer } from '../helpers/server-app';

/**
 * Every example query of R4 graphql.html, run on the spec's own example resources (Patient/example,
 * Observation/example, the Conditions of Patient/example, List/long), with the output shaped as the
 * page shows it. The queries are the page's, as written; where one cannot run as written (an R3 leftover,
 * a typo in a type name, a link whose braces do not balance) the test says so and runs the nearest
 * query that can, and where the page's own rules make the literal query an error, it checks the error.
 */

const require = createRequire(import.meta.url);
const example = (name: string) =>
  JSON.parse(readFileSync(require.resolve(`hl7.fhir.r4.examples/${name}`), 'utf8')) as Resource;

/** The page leaves out fields that have no value; GraphQL answers them as null. Compared without the nulls. */
function withoutNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNulls);
  if (value && typeof value === 'object')
    return Object.fromEntries(
      Object.entries(value)
        .filter(([, v]) => v !== null)
        .map(([k, v]) => [k, withoutNulls(v)]),
    );
  return value;
}

interface Answer {
  status: number;
  data?: Record<string, unknown> | null;
  errors?: { message: string; extensions?: { resource?: unknown } }[];
}

const PATIENT_NAMES = [
  { given: ['Peter', 'James'], family: 'Chalmers' },
  { given: ['Jim'] },
  { given: ['Peter', 'James'], family: 'Windsor' },
];
const CONDITIONS_OF_EXAMPLE = ['example', 'example2', 'family-history', 'stroke'];
const IDENTIFIER = { system: 'urn:oid:1.2.36.146.595.217.0.1', value: '12345' };
/** The identifier and active of Patient/example as the flattened examples print them. */
const FLAT_START = { system: [IDENTIFIER.system], value: [IDENTIFIER.value], active: true };

/** The page's directive examples on Patient/example: its query and its output, as printed. */
const FLATTENING: [string, string, Record<string, unknown>][] = [
  [
    '@flatten',
    '{\n  identifier @flatten { system value }\n  active \n  name @flatten { text given family } \n}',
    { ...FLAT_START, given: ['Peter', 'James', 'Jim', 'Peter', 'James'], family: ['Chalmers', 'Windsor'] },
  ],
  [
    '@first',
    '{\n  identifier @flatten { system value }\n  active \n  name @flatten { text given @first family } \n}',
    { ...FLAT_START, given: ['Peter', 'Jim', 'Peter'], family: ['Chalmers', 'Windsor'] },
  ],
  [
    '@singleton',
    '{\n  identifier @flatten { system @singleton value @singleton }\n  active \n  name @flatten @first { text given family @singleton } \n}',
    { ...IDENTIFIER, active: true, given: ['Peter', 'James'], family: 'Chalmers' },
  ],
  // The page prints this one's keys capitalised ("Given.0") and over placeholder text; its other examples use the element names.
  [
    '@slice(path: "$index") with @first and @singleton',
    '{ name @slice(path: "$index") @flatten {given @first @singleton family}}',
    { 'given.0': 'Peter', 'family.0': ['Chalmers'], 'given.1': 'Jim', 'given.2': 'Peter', 'family.2': ['Windsor'] },
  ],
  [
    '@slice(path: "use")',
    '{\n  identifier @flatten { system value }\n  active \n  name @flatten @slice(path: "use") { given family @singleton } \n}',
    {
      ...FLAT_START,
      'given.official': ['Peter', 'James'],
      'family.official': 'Chalmers',
      'given.usual': ['Jim'],
      'given.maiden': ['Peter', 'James'],
      'family.maiden': 'Windsor',
    },
  ],
  [
    '@slice(path: "$index")',
    '{\n  identifier @flatten { system value }\n  active \n  name @flatten @slice(path: "$index") { given family @singleton } \n}',
    {
      ...FLAT_START,
      'given.0': ['Peter', 'James'],
      'family.0': 'Chalmers',
      'given.1': ['Jim'],
      'given.2': ['Peter', 'James'],
      'family.2': 'Windsor',
    },
  ],
];

function suite(name: string, open: () => Promise<OpenServer>) {
  describe(`graphql.html examples (${name})`, () => {
    let server: ServerApp;
    let cleanup: () => Promise<void>;

    const run = async (query: string, at = ''): Promise<Answer> => {
      const res = await server.app.inject({
        method: 'GET',
        url: `/fhir/R4${at}/$graphql?query=${encodeURIComponent(query)}`,
      });
      const body = res.json() as Omit<Answer, 'status'>;
      return { status: res.statusCode, ...body };
    };
    /** Runs a query the page shows and insists it answered without errors. */
    const ok = async (query: string, at = ''): Promise<Record<string, unknown>> => {
      const answer = await run(query, at);
      expect(answer.errors, query).toBeUndefined();
      expect(answer.status, query).toBe(200);
      return answer.data as Record<string, unknown>;
    };

    beforeAll(async () => {
      ({ server, cleanup } = await open());
      const files = [
        'Patient-example.json',
        'Observation-example.json',
        'List-long.json',
        ...CONDITIONS_OF_EXAMPLE.map((id) => `Condition-${id}.json`),
      ];
      for (const file of files) await putResource(server.app, example(file));
      // The page's extension example names a made-up URL; Patient/example with that extension added.
      const patient = example('Patient-example.json');
      await putResource(server.app, {
        ...patient,
        id: 'with-ext',
        extension: [{ url: 'http://myextension.url/details', valueString: 'some value' }],
      } as Resource);
    });
    afterAll(() => cleanup?.());

    describe('Error Handling', () => {
      test('each error has a message and an OperationOutcome in extensions.resource', async () => {
        const unknown = await run('{ Patient(id: nope) { id } }');
        expect(unknown.status).toBe(200);
        expect(unknown.data).toEqual({ Patient: null });
        const invalid = await run('{ Patient(id: example) { nope } }');
        expect(invalid.status).toBe(400);
        for (const errors of [unknown.errors, invalid.errors]) {
          expect(errors?.length).toBeGreaterThan(0);
          for (const error of errors ?? []) {
            expect(typeof error.message).toBe('string');
            expect(error.extensions?.resource).toMatchObject({
              resourceType: 'OperationOutcome',
              issue: [{ severity: 'error' }],
            });
          }
        }
      });
    });

    describe('Field Selection', () => {
      test('{ name { text given family } } on Patient/example', async () => {
        const data = await ok('{ name { text given family } }', '/Patient/example');
        expect(withoutNulls(data)).toEqual({ name: PATIENT_NAMES });
      });

      test('polymorphic fields by their JSON name: { valueQuantity { value unit } } on Observation/example', async () => {
        expect(await ok('{ valueQuantity { value unit } }', '/Observation/example')).toEqual({
          valueQuantity: { value: 185, unit: 'lbs' },
        });
      });

      test('extensions on primitives: { birthDate _birthDate { extension {valueDateTime} } }', async () => {
        expect(await ok('{\n  birthDate _birthDate { extension {valueDateTime} } \n }', '/Patient/example')).toEqual({
          birthDate: '1974-12-25',
          _birthDate: { extension: [{ valueDateTime: '1974-12-25T14:35:45-05:00' }] },
        });
      });
    });

    describe('Field Arguments: List Navigation', () => {
      test('fhirpath: name(fhirpath: "family.exists()") { text given family }', async () => {
        const data = await ok('{ \n  name(fhirpath: "family.exists()") { text given family } \n }', '/Patient/example');
        expect(withoutNulls(data)).toEqual({ name: [PATIENT_NAMES[0], PATIENT_NAMES[2]] });
      });

      test('field filter: name(use: official) { text given family }', async () => {
        const data = await ok('{ \n  name(use: official) { text given family } \n }', '/Patient/example');
        expect(withoutNulls(data)).toEqual({ name: [PATIENT_NAMES[0]] });
      });

      test('selecting an extension: myext: extension(url: "...") { value : valueString }', async () => {
        const query = '{ \n  myext: extension(url: "http://myextension.url/details") { value : valueString } \n }';
        // Extension repeats, so GraphQL answers a list; the page prints its one item.
        expect(await ok(query, '/Patient/with-ext')).toEqual({ myext: [{ value: 'some value' }] });
        // With @singleton the answer is the object exactly as the page prints it.
        expect(await ok(query.replace('{ value', '@singleton { value'), '/Patient/with-ext')).toEqual({
          myext: { value: 'some value' },
        });
      });

      test('list offsets: entry(_count: 5, _offset: 5) { deleted item { reference } } on List/long', async () => {
        const data = await ok('{ \n  entry(_count: 5, _offset: 5) { deleted item { reference } } \n }', '/List/long');
        const entries = (example('List-long.json') as List).entry?.slice(5, 10) ?? [];
        expect(withoutNulls(data)).toEqual({ entry: entries.map((e) => ({ item: { reference: e.item.reference } })) });
      });
    });

    describe('Resource references', () => {
      test('{ subject { reference, resource {active} } } on Observation/example', async () => {
        expect(await ok('{ \n   subject { reference, resource {active} } \n }', '/Observation/example')).toEqual({
          subject: { reference: 'Patient/example', resource: { active: true } },
        });
      });

      test('the shorthand is costed as one type: a thousand subjects with resource { id } are within the limit', async () => {
        const data = await ok('{ ObservationList(_count: 1000) { subject { resource { id } } } }');
        expect(data.ObservationList).toEqual([{ subject: { resource: { id: 'example' } } }]);
      });

      test('type conditions: resource { ...on Patient { birthDate } ...on Group { name } }', async () => {
        const query = `{
  id
  subject {
   reference
   resource {
      ...on Patient {
          birthDate
    }
    ...on Group {
        name
    }
   }
  }
  code {coding {system code} }
 }`;
        const data = await ok(query, '/Observation/example');
        expect(data).toEqual({
          id: 'example',
          subject: { reference: 'Patient/example', resource: { birthDate: '1974-12-25' } },
          code: {
            coding: [
              { system: 'http://loinc.org', code: '29463-7' },
              { system: 'http://loinc.org', code: '3141-9' },
              { system: 'http://snomed.info/sct', code: '27113001' },
              { system: 'http://acme.org/devices/clinical-codes', code: 'body-weight' },
            ],
          },
        });
      });

      test('the denser form: resource(type : Patient) { birthDate } beside a second resource(type: ...)', async () => {
        const literal = `{
  id
  subject {
   reference
    resource(type : Patient) { birthDate }
    resource(type : Practioner) { practitionerRole {  speciality } }
  }
  code {coding {system code} }
 }`;
        // As printed, the second branch names a type R4 does not have ("Practioner", and no
        // practitionerRole on Practitioner): the page's conformance rules make that an error.
        const refused = await run(literal, '/Observation/example');
        expect(refused.status).toBe(400);
        expect(refused.errors?.[0].message).toMatch(/Practioner/);
        const corrected = literal.replace(
          'resource(type : Practioner) { practitionerRole {  speciality } }',
          'resource(type : Practitioner) { name { family } }',
        );
        const data = await ok(corrected, '/Observation/example');
        expect(data.subject).toEqual({ reference: 'Patient/example', resource: { birthDate: '1974-12-25' } });
        expect(await ok('{ subject { resource(type : Patient) { birthDate } } }', '/Observation/example')).toEqual({
          subject: { resource: { birthDate: '1974-12-25' } },
        });
      });
    });

    describe('Searching resources', () => {
      test('a single resource: { Patient(id: example) { id, active } }', async () => {
        expect(await ok('{ \n   Patient(id: example) { id, active } \n }')).toEqual({
          Patient: { id: 'example', active: true },
        });
        const linked = await ok('{Patient(id:example){id,name{given,family}}}');
        expect(withoutNulls(linked)).toEqual({ Patient: { id: 'example', name: PATIENT_NAMES } });
      });

      test('a list: ConditionList(clinical_status: relapse, patient: example) { id, clinicalStatus }', async () => {
        // R4 made Condition.clinicalStatus a CodeableConcept (the page's `clinicalStatus` leaf is from R3),
        // so it is selected with its fields. No example Condition is in relapse: an empty list.
        const relapse = await ok(
          '{ \n   ConditionList(clinical_status: relapse, patient: example) { id, clinicalStatus { coding { code } } } \n }',
        );
        expect(relapse).toEqual({ ConditionList: [] });
        const active = await ok(
          '{ ConditionList(clinical_status: active, patient: example, _sort: _id) { id, clinicalStatus { coding { code } } } }',
        );
        expect(active).toEqual({
          ConditionList: CONDITIONS_OF_EXAMPLE.map((id) => ({ id, clinicalStatus: { coding: [{ code: 'active' }] } })),
        });
      });

      test('the linked list example: PatientList(name:"pet") { name { family, given } }', async () => {
        const data = await ok('{PatientList(name:"pet"){name{family,given}}}');
        expect(withoutNulls(data)).toEqual({ PatientList: [{ name: PATIENT_NAMES }, { name: PATIENT_NAMES }] });
      });

      test('a connection: ConditionConnection (clinical_status: active, patient: example) { count offset pagesize edges {...} first previous next last }', async () => {
        // The page selects `resource { id, active }`; Condition has no `active`, so its status is selected instead.
        const query = `{
   ConditionConnection (clinical_status: active, patient: example, _count: 3, _sort: _id) {
     count offset pagesize
     edges {
       mode, score, resource { id, clinicalStatus { coding { code } } }
     }
     first previous next last
   }
 }`;
        const connection = (await ok(query)).ConditionConnection as Record<string, unknown> & {
          edges: { mode: string; resource: { id: string } }[];
          next: string;
        };
        expect(connection).toMatchObject({ count: 4, offset: 0, pagesize: 3 });
        expect(Object.keys(connection).sort()).toEqual([
          'count',
          'edges',
          'first',
          'last',
          'next',
          'offset',
          'pagesize',
          'previous',
        ]);
        expect(connection.edges.map((e) => [e.mode, e.resource.id])).toEqual([
          ['match', 'example'],
          ['match', 'example2'],
          ['match', 'family-history'],
        ]);
        expect(typeof connection.next).toBe('string');

        // Following a cursor, as `_cursor` (the page's query) and as `cursor` (its linked example).
        for (const argument of ['_cursor', 'cursor']) {
          const next = await ok(
            `{ ConditionConnection (${argument} : ${JSON.stringify(connection.next)}) { count offset pagesize edges { resource { id } } first previous next last } }`,
          );
          const page = next.ConditionConnection as { offset: number; edges: { resource: { id: string } }[] };
          expect(page.offset, argument).toBe(3);
          expect(
            page.edges.map((e) => e.resource.id),
            argument,
          ).toEqual(['stroke']);
        }
      });

      test('the linked connection examples: PatientConnection(name:"pet") and PatientConnection with no criteria', async () => {
        const data = await ok(
          '{PatientConnection(name:"pet"){count,offset,pagesize,first,previous,next,last,edges{mode,score,resource{name{family,given}}}}}',
        );
        const connection = data.PatientConnection as {
          count: number;
          edges: { mode: string; resource: { name: unknown } }[];
        };
        expect(connection.count).toBe(2);
        expect(withoutNulls(connection.edges)).toEqual([
          { mode: 'match', resource: { name: PATIENT_NAMES } },
          { mode: 'match', resource: { name: PATIENT_NAMES } },
        ]);
        // "Example 2" is printed as `PatientConnection(){...}}}}}}}}`: empty parentheses and extra
        // closing braces are not GraphQL. Without them it runs.
        expect((await run('{PatientConnection(){count}}')).status).toBe(400);
        const all = await ok(
          '{PatientConnection{count,offset,pagesize,first,previous,next,last,edges{mode,score,resource{resourceType,id,name{family,given}}}}}',
        );
        expect((all.PatientConnection as { count: number }).count).toBe(2);
        expect(
          (all.PatientConnection as { edges: { resource: { resourceType: string } }[] }).edges.map(
            (e) => e.resource.resourceType,
          ),
        ).toEqual(['Patient', 'Patient']);
      });
    });

    describe('Search arguments the page describes', () => {
      test('an array of values is ORed: _id: [1,2,example]', async () => {
        const data = await ok('{ ConditionList(_id: [1, 2, example, stroke], _sort: _id) { id } }');
        expect(data).toEqual({ ConditionList: [{ id: 'example' }, { id: 'stroke' }] });
      });

      test('fhirpath is evaluated on the matches of a list, a connection and a reverse reference', async () => {
        const onlyStroke = `fhirpath: "id = 'stroke'"`;
        expect(await ok(`{ ConditionList(patient: example, ${onlyStroke}) { id } }`)).toEqual({
          ConditionList: [{ id: 'stroke' }],
        });
        const connection = (
          await ok(`{ ConditionConnection(patient: example, ${onlyStroke}) { count edges { resource { id } } } }`)
        ).ConditionConnection;
        expect(connection).toEqual({ count: 4, edges: [{ resource: { id: 'stroke' } }] });
        expect(await ok(`{ ConditionList(_reference: patient, ${onlyStroke}) { id } }`, '/Patient/example')).toEqual({
          ConditionList: [{ id: 'stroke' }],
        });
      });
    });

    describe('Reverse References', () => {
      test('offered by the types with a reference parameter that can point at the resource, refused for others', async () => {
        const refused = await run('{ ValueSetList(_reference: url) { id } }', '/Patient/example');
        expect(refused.status).toBe(400);
        expect(refused.errors?.[0].message).toMatch(/ValueSetList/);
      });

      test('{ name {...} ConditionList(_reference: patient) {...} } on Patient/example', async () => {
        const data = await ok(
          '{name{family,given}ConditionList(_reference:patient){id,clinicalStatus{coding{code}}}}',
          '/Patient/example',
        );
        expect(withoutNulls(data.name)).toEqual(PATIENT_NAMES);
        expect((data.ConditionList as { id: string }[]).map((c) => c.id).sort()).toEqual(CONDITIONS_OF_EXAMPLE);
      });

      test('a reverse connection: ConditionConnection(_reference: patient) {... edges { resource { ... on Condition {...} } } }', async () => {
        const data = await ok(
          '{name{family,given}ConditionConnection(_reference:patient){count,offset,pagesize,first,previous,next,last,edges{mode,score,resource{... on Condition{resourceType,id,clinicalStatus{coding{code}}}}}}}',
          '/Patient/example',
        );
        const connection = data.ConditionConnection as {
          count: number;
          edges: { mode: string; resource: { resourceType: string; id: string } }[];
        };
        expect(connection.count).toBe(4);
        expect(connection.edges.map((e) => e.resource.resourceType)).toEqual([
          'Condition',
          'Condition',
          'Condition',
          'Condition',
        ]);
        expect(connection.edges.map((e) => e.resource.id).sort()).toEqual(CONDITIONS_OF_EXAMPLE);
      });
    });

    describe('Operations', () => {
      test('_graphql on an operation: $validate-code ... &_graphql={result:parameter(name:"result"){value:valueBoolean}}', async () => {
        const graphql = '{result:parameter(name:"result"){value:valueBoolean}}';
        const url = `/fhir/R4/ValueSet/doc-typecodes/$validate-code?system=http://loinc.org&code=1963-8&display=test&_graphql=${encodeURIComponent(graphql)}`;
        const res = await server.app.inject({ method: 'GET', url });
        expect(res.statusCode, res.body).toBe(200);
        expect(res.headers['content-type']).toContain('application/json');
        const plain = await server.app.inject({ method: 'GET', url: url.slice(0, url.indexOf('&_graphql')) });
        const result = (plain.json() as { parameter: { name: string; valueBoolean?: boolean }[] }).parameter.find(
          (p) => p.name === 'result',
        )?.valueBoolean;
        expect(typeof result).toBe('boolean');
        expect(res.json()).toEqual({ data: { result: [{ value: result }] } });
      });

      test('a failed operation answers its OperationOutcome; the query is not run', async () => {
        const res = await server.app.inject({
          method: 'GET',
          url: `/fhir/R4/ValueSet/no-such-set/$validate-code?code=x&_graphql=${encodeURIComponent('{ parameter { name } }')}`,
        });
        expect(res.statusCode).toBe(404);
        expect(res.json().resourceType).toBe('OperationOutcome');
      });
    });

    describe('Data Flattening Directives', () => {
      test('the query they start from, without directives', async () => {
        expect(
          withoutNulls(
            await ok(
              '{\n  identifier { system value }\n  active \n  name { text given family } \n}',
              '/Patient/example',
            ),
          ),
        ).toEqual({
          identifier: [{ system: IDENTIFIER.system, value: IDENTIFIER.value }],
          active: true,
          name: PATIENT_NAMES,
        });
      });

      test.each(FLATTENING)('%s', async (_title, query, expected) => {
        expect(await ok(query, '/Patient/example')).toEqual(expected);
      });

      test('@singleton over more than one value is an error', async () => {
        const answer = await run('{ name @flatten { family @singleton } }', '/Patient/example');
        expect(answer.errors?.[0].message).toMatch(/singleton/);
      });
    });

    describe('Mutations', () => {
      test('PatientCreate(res:), PatientUpdate(id:, res:), PatientDelete(id:) (the page sketches their signatures only)', async () => {
        const post = async (query: string, variables: object) => {
          const res = await server.app.inject({
            method: 'POST',
            url: '/fhir/R4/$graphql',
            headers: { 'content-type': 'application/json' },
            payload: { query, variables },
          });
          const body = res.json() as Omit<Answer, 'status'>;
          expect(body.errors, query).toBeUndefined();
          return body.data as Record<string, { id: string; active?: boolean } | null>;
        };
        const created = await post('mutation ($res: PatientInput!) { PatientCreate(res: $res) { id active } }', {
          res: { ...example('Patient-example.json'), id: 'ignored' },
        });
        const id = created.PatientCreate?.id as string;
        expect(id).not.toBe('ignored');
        const updated = await post(
          'mutation ($id: ID!, $res: PatientInput!) { PatientUpdate(id: $id, res: $res) { id active } }',
          { id, res: { resourceType: 'Patient', id, active: false } },
        );
        expect(updated).toEqual({ PatientUpdate: { id, active: false } });
        expect(await post('mutation ($id: ID!) { PatientDelete(id: $id) { id } }', { id })).toEqual({
          PatientDelete: null,
        });
      });
    });
  });
}

onBothBackends(suite);
