import type { OperationOutcome, OperationOutcomeIssue } from 'fhir/r4';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { putResource, serverApp } from '../helpers/server-app';
import {
  checksPatient,
  checksPatientInstance,
  NICKNAME_URL,
  nicknameExtension,
  QUANTITY_OBSERVATION_URL,
  quantityObservation,
} from './profiles-fixture';

/**
 * One hand-made invalid resource per check, each with the issue it must produce (severity, FHIRPath
 * expression, words of the message), and a valid variant that must not produce it.
 */

type Resource = Record<string, unknown>;
type Expected = [severity: 'error' | 'warning', expression: string, text: string];

let server: { app: FastifyInstance; close: () => Promise<void> };
beforeAll(async () => {
  server = await serverApp();
  for (const sd of [nicknameExtension, checksPatient, quantityObservation]) await putResource(server.app, sd);
});
afterAll(async () => {
  await server?.close();
});

async function validate(resource: Resource): Promise<OperationOutcomeIssue[]> {
  const res = await server.app.inject({
    method: 'POST',
    url: `/fhir/R4/${String(resource.resourceType)}/$validate`,
    headers: { 'content-type': 'application/fhir+json' },
    payload: { resourceType: 'Parameters', parameter: [{ name: 'resource', resource }] },
  });
  // 200 whether or not the resource is valid.
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as OperationOutcome).issue;
}

const narrative = { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml">x</div>' };
const patient = (extra: Resource = {}): Resource => ({ resourceType: 'Patient', text: narrative, ...extra });
const observation = (extra: Resource = {}): Resource => ({
  resourceType: 'Observation',
  text: narrative,
  status: 'final',
  code: { text: 'weight' },
  ...extra,
});
const profiled = (change: (p: Resource) => void): Resource => {
  const p = checksPatientInstance();
  change(p);
  return p;
};
const MARITAL = 'http://terminology.hl7.org/CodeSystem/v3-MaritalStatus';

function matching(issues: OperationOutcomeIssue[], [severity, expression, text]: Expected): OperationOutcomeIssue[] {
  return issues.filter(
    (i) => i.severity === severity && i.expression?.[0] === expression && (i.details?.text ?? '').includes(text),
  );
}

const cases: [name: string, invalid: Resource, expected: Expected, valid: Resource][] = [
  // JSON shape
  [
    'an unknown property',
    patient({ colour: 'blue' }),
    ['error', 'Patient.colour', "'colour' is not an element of Patient"],
    patient(),
  ],
  [
    'an array for a single element',
    patient({ gender: ['female'] }),
    ['error', 'Patient.gender', 'must be a single value, not a JSON array'],
    patient({ gender: 'female' }),
  ],
  [
    'a single value for a list',
    patient({ name: { family: 'x' } }),
    ['error', 'Patient.name', 'must be a JSON array'],
    patient({ name: [{ family: 'x' }] }),
  ],
  ['null', patient({ gender: null }), ['error', 'Patient.gender', 'null is not allowed'], patient({ gender: 'male' })],
  [
    'null in a list',
    patient({ name: [null] }),
    ['error', 'Patient.name[0]', 'null is not allowed'],
    patient({ name: [{ text: 'x' }] }),
  ],
  [
    'an empty object',
    patient({ maritalStatus: {} }),
    ['error', 'Patient.maritalStatus', 'empty object'],
    patient({ maritalStatus: { text: 'single' } }),
  ],
  [
    'an empty list',
    patient({ name: [] }),
    ['error', 'Patient.name', 'must not be an empty array'],
    patient({ name: [{ text: 'x' }] }),
  ],
  [
    'an empty string',
    patient({ birthDate: '' }),
    ['error', 'Patient.birthDate', 'must not be empty'],
    patient({ birthDate: '2000' }),
  ],
  [
    'a _primitive twin with a property an element does not have',
    patient({ birthDate: '2000', _birthDate: { colour: 'x' } }),
    ['error', 'Patient.birthDate.colour', "'colour' is not an element of Element"],
    patient({ birthDate: '2000', _birthDate: { id: 'b1' } }),
  ],
  [
    'primitive lists and their _twins of different lengths',
    patient({ name: [{ given: ['a', 'b'], _given: [null] }] }),
    ['error', 'Patient.name[0].given', 'arrays of the same length'],
    patient({ name: [{ given: ['a', 'b'], _given: [null, { id: 'g2' }] }] }),
  ],
  // primitives
  [
    'a date that breaks the pattern',
    patient({ birthDate: '1970-13-01' }),
    ['error', 'Patient.birthDate', "'1970-13-01' is not a valid date"],
    patient({ birthDate: '1970-12-01' }),
  ],
  [
    'a date that is no day',
    patient({ birthDate: '1970-02-30' }),
    ['error', 'Patient.birthDate', 'no such day'],
    patient({ birthDate: '1972-02-29' }),
  ],
  [
    'a boolean written as a string',
    patient({ active: 'true' }),
    ['error', 'Patient.active', 'must be a JSON boolean'],
    patient({ active: true }),
  ],
  [
    'a fractional integer',
    patient({ multipleBirthInteger: 1.5 }),
    ['error', 'Patient.multipleBirth.ofType(integer)', 'is not a valid integer'],
    patient({ multipleBirthInteger: 2 }),
  ],
  [
    'a negative unsignedInt',
    patient({ photo: [{ size: -1 }] }),
    ['error', 'Patient.photo[0].size', 'is not a valid unsignedInt'],
    patient({ photo: [{ size: 0 }] }),
  ],
  [
    'an id with a space',
    patient({ id: 'a b' }),
    ['error', 'Patient.id', "'a b' is not a valid id"],
    patient({ id: 'a-b' }),
  ],
  [
    'base64 with a stray character',
    patient({ photo: [{ contentType: 'image/png', data: 'aGk*' }] }),
    ['error', 'Patient.photo[0].data', 'is not valid base64'],
    patient({ photo: [{ contentType: 'image/png', data: 'aGk=' }] }),
  ],
  // cardinality
  [
    'a missing required element',
    { resourceType: 'Observation', text: narrative, code: { text: 'x' } },
    ['error', 'Observation.status', 'minimum required = 1'],
    observation(),
  ],
  [
    'more than a profile allows',
    profiled((p) => (p.name = [{ family: 'a' }, { family: 'b' }, { family: 'c' }])),
    ['error', 'Patient.name', 'maximum allowed = 2, but found 3'],
    checksPatientInstance(),
  ],
  // choice types
  [
    'two types of one choice',
    observation({ valueString: 'a', valueBoolean: true }),
    ['error', 'Observation.value', 'only one of valueString, valueBoolean'],
    observation({ valueString: 'a' }),
  ],
  [
    'a type the choice does not have',
    observation({ valueAddress: { city: 'x' } }),
    ['error', 'Observation.valueAddress', "'valueAddress' is not an element of Observation"],
    observation({ valueQuantity: { value: 1 } }),
  ],
  // fixed, pattern, maxLength
  [
    'a value other than the fixed one',
    profiled((p) => (p.gender = 'male')),
    ['error', 'Patient.gender', "is 'male' but must be 'female'"],
    checksPatientInstance(),
  ],
  [
    'a value without the pattern',
    profiled((p) => (p.maritalStatus = { coding: [{ system: MARITAL, code: 'S' }] })),
    ['error', 'Patient.maritalStatus', 'must match the pattern'],
    checksPatientInstance(),
  ],
  [
    'a string over maxLength',
    profiled((p) => (p.identifier = [{ system: 'http://example.org/mrn', value: '123456789' }])),
    ['error', 'Patient.identifier[0].value', 'at most 8 are allowed'],
    checksPatientInstance(),
  ],
  // slicing
  [
    'a value discriminator: the required slice missing',
    profiled((p) => (p.identifier = [{ system: 'http://example.org/ssn', value: '1' }])),
    ['error', 'Patient.identifier', 'Patient.identifier:mrn: minimum required = 1, but only found 0'],
    profiled(
      (p) =>
        (p.identifier = [
          { system: 'http://example.org/mrn', value: '1' },
          { system: 'http://example.org/ssn', value: '1' },
        ]),
    ),
  ],
  [
    'a closed slicing: an item in no slice',
    profiled(
      (p) =>
        (p.identifier = [
          { system: 'http://example.org/mrn', value: '1' },
          { system: 'http://other.org', value: '2' },
        ]),
    ),
    ['error', 'Patient.identifier[1]', 'does not match any slice'],
    checksPatientInstance(),
  ],
  [
    'slice cardinality: one slice twice',
    profiled(
      (p) =>
        (p.identifier = [
          { system: 'http://example.org/mrn', value: '1' },
          { system: 'http://example.org/mrn', value: '2' },
        ]),
    ),
    ['error', 'Patient.identifier', 'Patient.identifier:mrn: maximum allowed = 1, but found 2'],
    checksPatientInstance(),
  ],
  [
    'an exists discriminator, ordered: slices out of order',
    profiled(
      (p) =>
        (p.telecom = [
          { system: 'phone', value: '2' },
          { system: 'phone', value: '1', period: { start: '2020-01-01' } },
        ]),
    ),
    ['error', 'Patient.telecom[1]', "is in slice 'dated', out of the order"],
    checksPatientInstance(),
  ],
  [
    'a pattern discriminator, open at the end: a slice after an item in none',
    profiled(
      (p) =>
        (p.contact = [
          { name: { family: 'Brown' } },
          {
            relationship: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v2-0131', code: 'C' }] }],
            name: { family: 'Jones' },
          },
        ]),
    ),
    ['error', 'Patient.contact[1]', 'open at the end only'],
    checksPatientInstance(),
  ],
  [
    'a profile discriminator: no extension conforms to the slice',
    profiled((p) => (p.extension = [{ url: NICKNAME_URL, valueInteger: 1 }])),
    ['error', 'Patient.extension', 'Patient.extension:nick: minimum required = 1, but only found 0'],
    checksPatientInstance(),
  ],
  [
    'a type discriminator, closed: a type outside the slices',
    { ...observation({ valueString: 'heavy' }), meta: { profile: [QUANTITY_OBSERVATION_URL] } },
    ['error', 'Observation.value.ofType(string)', 'does not match any slice'],
    { ...observation({ valueQuantity: { value: 70 } }), meta: { profile: [QUANTITY_OBSERVATION_URL] } },
  ],
  // invariants
  [
    'an error invariant (pat-1)',
    patient({ contact: [{ gender: 'male' }] }),
    ['error', 'Patient.contact[0]', 'Constraint failed: pat-1'],
    patient({ contact: [{ name: { family: 'x' } }] }),
  ],
  [
    'an invariant only the full FHIRPath engine answers (obs-7)',
    observation({
      valueQuantity: { value: 1 },
      code: { coding: [{ system: 'http://loinc.org', code: '8480-6' }] },
      component: [{ code: { coding: [{ system: 'http://loinc.org', code: '8480-6' }] } }],
    }),
    ['error', 'Observation', 'Constraint failed: obs-7'],
    observation({
      valueQuantity: { value: 1 },
      code: { coding: [{ system: 'http://loinc.org', code: '8480-6' }] },
      component: [{ code: { coding: [{ system: 'http://loinc.org', code: '8462-4' }] } }],
    }),
  ],
  [
    'a warning invariant (dom-6)',
    { resourceType: 'Patient' },
    ['warning', 'Patient', 'Constraint failed: dom-6'],
    patient(),
  ],
  [
    'an invariant of a profile',
    profiled((p) => (p.birthDate = '1999-12-31')),
    ['error', 'Patient.birthDate', 'Constraint failed: chk-1'],
    checksPatientInstance(),
  ],
  [
    'an invariant of a data type (per-1)',
    patient({ name: [{ text: 'x', period: { start: '2020-02-01', end: '2020-01-01' } }] }),
    ['error', 'Patient.name[0].period', 'Constraint failed: per-1'],
    patient({ name: [{ text: 'x', period: { start: '2020-01-01', end: '2020-02-01' } }] }),
  ],
  // bindings
  [
    'a code outside a required value set',
    patient({ gender: 'robot' }),
    ['error', 'Patient.gender', 'required binding'],
    patient({ gender: 'other' }),
  ],
  [
    'a code outside an extensible value set',
    patient({ maritalStatus: { coding: [{ system: MARITAL, code: 'ZZ' }] } }),
    ['warning', 'Patient.maritalStatus', 'extensible binding'],
    patient({ maritalStatus: { coding: [{ system: MARITAL, code: 'W' }] } }),
  ],
  [
    // MIME types are answered by the engine's built-in provider (urn:ietf:bcp:13).
    'a code a built-in code system refuses, in a required binding',
    patient({ photo: [{ contentType: 'not a mime type' }] }),
    ['error', 'Patient.photo[0].contentType', ''],
    patient({ photo: [{ contentType: 'image/png' }] }),
  ],
  [
    'a code of a system this server does not hold',
    {
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'x' },
      valueCodeableConcept: { text: 'x' },
      interpretation: [{ coding: [{ system: 'http://snomed.info/sct', code: '281302008' }] }],
    },
    ['warning', 'Observation.interpretation[0]', 'cannot be checked'],
    { resourceType: 'Observation', status: 'final', code: { text: 'x' }, valueCodeableConcept: { text: 'x' } },
  ],
  // extensions
  [
    'a known extension with a value of the wrong type',
    patient({
      extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/patient-birthPlace', valueString: 'Paris' }],
    }),
    ['error', 'Patient.extension[0].valueString', "'valueString' is not an element of Extension"],
    patient({
      extension: [
        { url: 'http://hl7.org/fhir/StructureDefinition/patient-birthPlace', valueAddress: { city: 'Paris' } },
      ],
    }),
  ],
  [
    'an unknown extension',
    patient({ extension: [{ url: 'http://example.org/unknown-extension', valueString: 'x' }] }),
    ['warning', 'Patient.extension[0]', "'http://example.org/unknown-extension' is not known"],
    patient({ extension: [{ url: NICKNAME_URL, valueString: 'x' }] }),
  ],
  [
    'a modifier extension in extension',
    patient({
      extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/request-doNotPerform', valueBoolean: true }],
    }),
    ['error', 'Patient.extension[0]', 'is a modifier extension: it belongs in modifierExtension'],
    patient({
      modifierExtension: [{ url: 'http://hl7.org/fhir/StructureDefinition/request-doNotPerform', valueBoolean: true }],
    }),
  ],
  [
    'an extension with a value and extensions (ext-1)',
    patient({
      extension: [{ url: 'http://example.org/x', valueString: 'a', extension: [{ url: 'y', valueString: 'b' }] }],
    }),
    ['error', 'Patient.extension[0]', 'Constraint failed: ext-1'],
    patient({ extension: [{ url: 'http://example.org/x', extension: [{ url: 'y', valueString: 'b' }] }] }),
  ],
  // references
  [
    'a reference to a type the element does not allow',
    observation({ subject: { reference: 'Medication/m1' } }),
    ['error', 'Observation.subject.reference', 'points to a Medication'],
    observation({ subject: { reference: 'Patient/p1' } }),
  ],
  [
    'a local reference to nothing contained (ref-1)',
    observation({ subject: { reference: '#nobody' } }),
    ['error', 'Observation.subject.reference', 'ref-1'],
    observation({ subject: { reference: '#p' }, contained: [{ resourceType: 'Patient', id: 'p' }] }),
  ],
  [
    'a contained resource nothing refers to (dom-3)',
    patient({ contained: [{ resourceType: 'Organization', id: 'o', name: 'x' }] }),
    ['error', 'Patient.contained[0]', 'dom-3'],
    patient({
      contained: [{ resourceType: 'Organization', id: 'o', name: 'x' }],
      managingOrganization: { reference: '#o' },
    }),
  ],
  [
    'a contained resource with contained resources (dom-2)',
    patient({
      managingOrganization: { reference: '#o' },
      contained: [{ resourceType: 'Organization', id: 'o', contained: [{ resourceType: 'Organization', id: 'p' }] }],
    }),
    ['error', 'Patient.contained[0]', 'dom-2'],
    patient({
      managingOrganization: { reference: '#o' },
      contained: [{ resourceType: 'Organization', id: 'o', name: 'x' }],
    }),
  ],
  [
    'a contained resource with a version (dom-4)',
    patient({
      managingOrganization: { reference: '#o' },
      contained: [{ resourceType: 'Organization', id: 'o', meta: { versionId: '1' } }],
    }),
    ['error', 'Patient.contained[0]', 'dom-4'],
    patient({
      managingOrganization: { reference: '#o' },
      contained: [{ resourceType: 'Organization', id: 'o', name: 'x', meta: { tag: [{ code: 't' }] } }],
    }),
  ],
  [
    'a structural error inside a contained resource',
    patient({
      managingOrganization: { reference: '#o' },
      contained: [{ resourceType: 'Organization', id: 'o', colour: 'red' }],
    }),
    ['error', 'Patient.contained[0].colour', "'colour' is not an element of Organization"],
    patient({
      managingOrganization: { reference: '#o' },
      contained: [{ resourceType: 'Organization', id: 'o', name: 'x' }],
    }),
  ],
  // Bundles
  [
    'a Bundle entry whose fullUrl names another resource',
    {
      resourceType: 'Bundle',
      type: 'collection',
      entry: [{ fullUrl: 'http://x.org/fhir/Patient/a', resource: { resourceType: 'Patient', id: 'b' } }],
    },
    ['error', 'Bundle.entry[0].fullUrl', 'does not match the resource it holds'],
    {
      resourceType: 'Bundle',
      type: 'collection',
      entry: [{ fullUrl: 'http://x.org/fhir/Patient/b', resource: { resourceType: 'Patient', id: 'b' } }],
    },
  ],
  [
    'a total outside a search or history (bdl-1)',
    { resourceType: 'Bundle', type: 'collection', total: 1 },
    ['error', 'Bundle', 'bdl-1'],
    { resourceType: 'Bundle', type: 'searchset', total: 1 },
  ],
  [
    'a transaction entry without request (bdl-3)',
    { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: { resourceType: 'Patient' } }] },
    ['error', 'Bundle', 'bdl-3'],
    {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [{ resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } }],
    },
  ],
  [
    'an error inside a Bundle entry',
    {
      resourceType: 'Bundle',
      type: 'collection',
      entry: [{ resource: { resourceType: 'Patient', birthDate: 'soon' } }],
    },
    ['error', 'Bundle.entry[0].resource.birthDate', "'soon' is not a valid date"],
    {
      resourceType: 'Bundle',
      type: 'collection',
      entry: [{ resource: { resourceType: 'Patient', birthDate: '2000' } }],
    },
  ],
  [
    'a reference inside a Bundle to an entry of a type not allowed',
    {
      resourceType: 'Bundle',
      type: 'collection',
      entry: [
        { fullUrl: 'urn:uuid:2f0e4a6c-1111-4c1b-9a0e-000000000001', resource: { resourceType: 'Medication' } },
        {
          resource: {
            resourceType: 'Observation',
            status: 'final',
            code: { text: 'x' },
            subject: { reference: 'urn:uuid:2f0e4a6c-1111-4c1b-9a0e-000000000001' },
          },
        },
      ],
    },
    ['error', 'Bundle.entry[1].resource.subject.reference', 'points to a Medication'],
    {
      resourceType: 'Bundle',
      type: 'collection',
      entry: [
        { fullUrl: 'urn:uuid:2f0e4a6c-1111-4c1b-9a0e-000000000001', resource: { resourceType: 'Patient' } },
        {
          resource: {
            resourceType: 'Observation',
            status: 'final',
            code: { text: 'x' },
            subject: { reference: 'urn:uuid:2f0e4a6c-1111-4c1b-9a0e-000000000001' },
          },
        },
      ],
    },
  ],
];

describe('each check finds its problem, at its FHIRPath, and not in the valid variant', () => {
  test.each(cases)('%s', async (_name, invalid, expected, valid) => {
    const found = await validate(invalid);
    expect(matching(found, expected), JSON.stringify(found, null, 1)).toHaveLength(1);
    const clean = await validate(valid);
    expect(matching(clean, expected), JSON.stringify(clean, null, 1)).toHaveLength(0);
    if (expected[0] === 'error')
      expect(
        clean.filter((i) => i.severity === 'error'),
        JSON.stringify(clean, null, 1),
      ).toEqual([]);
  });

  test('the valid profiled Patient has no issue at all but the unknown-terminology ones', async () => {
    const issues = await validate(checksPatientInstance());
    expect(issues.filter((i) => i.severity === 'error' || i.severity === 'warning')).toEqual([]);
  });

  test('a resource with no finding answers the one information issue R4 needs', async () => {
    const issues = await validate({ resourceType: 'Basic', text: narrative, code: { text: 'note' } });
    expect(issues).toEqual([{ severity: 'information', code: 'informational', details: { text: 'All OK' } }]);
  });
});
