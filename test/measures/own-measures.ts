import type {
  Condition,
  Encounter,
  Expression,
  Library,
  Measure,
  MeasureGroupPopulation,
  Patient,
  Resource,
  ValueSet,
} from 'fhir/r4';

/**
 * Small Measures of our own, one per scoring, over four patients built inline, with criteria in
 * each language the server runs: CQL (a hand-written ELM library, as a CQL translator would emit
 * it), FHIRPath and FHIR queries.
 *
 * - alice: female, 1960, Practitioner/dr-who's patient (as bob is), two finished encounters (2 and 1 days long), hypertension
 * - bob: male, 1970, one finished encounter (3 days)
 * - carol: female, 1990, no encounter
 * - dave: male, 1950, hypertension, no encounter
 */

const SCT = 'http://snomed.info/sct';
export const HYPERTENSION = '38341003';

const patient = (id: string, gender: Patient['gender'], birthDate: string): Patient => ({
  resourceType: 'Patient',
  id,
  gender,
  birthDate,
});
const encounter = (id: string, subject: string, days: number): Encounter => ({
  resourceType: 'Encounter',
  id,
  status: 'finished',
  class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
  subject: { reference: `Patient/${subject}` },
  period: { start: '2019-03-01T10:00:00Z', end: `2019-03-${String(1 + days).padStart(2, '0')}T10:00:00Z` },
  length: { value: days, unit: 'd', system: 'http://unitsofmeasure.org', code: 'd' },
});
const condition = (id: string, subject: string): Condition => ({
  resourceType: 'Condition',
  id,
  subject: { reference: `Patient/${subject}` },
  code: { coding: [{ system: SCT, code: HYPERTENSION, display: 'Hypertensive disorder' }] },
});

export const ownData: Resource[] = [
  { resourceType: 'Practitioner', id: 'dr-who' },
  { ...patient('alice', 'female', '1960-05-01'), generalPractitioner: [{ reference: 'Practitioner/dr-who' }] },
  { ...patient('bob', 'male', '1970-05-01'), generalPractitioner: [{ reference: 'Practitioner/dr-who' }] },
  patient('carol', 'female', '1990-05-01'),
  patient('dave', 'male', '1950-05-01'),
  encounter('alice-1', 'alice', 2),
  encounter('alice-2', 'alice', 1),
  encounter('bob-1', 'bob', 3),
  condition('alice-htn', 'alice'),
  condition('dave-htn', 'dave'),
];

export const hypertensionValueSet: ValueSet = {
  resourceType: 'ValueSet',
  id: 'own-hypertension',
  url: 'http://example.org/fhir/ValueSet/hypertension',
  status: 'active',
  compose: { include: [{ system: SCT, concept: [{ code: HYPERTENSION, display: 'Hypertensive disorder' }] }] },
};

const FHIR_TYPE = (name: string) => `{http://hl7.org/fhir}${name}`;

/** The ELM a CQL translator makes of OwnLogic (definitions named as below). */
export const ownElm = {
  library: {
    identifier: { id: 'OwnLogic', system: 'http://example.org/fhir', version: '1.0.0' },
    schemaIdentifier: { id: 'urn:hl7-org:elm', version: 'r1' },
    usings: {
      def: [
        { localIdentifier: 'System', uri: 'urn:hl7-org:elm-types:r1' },
        { localIdentifier: 'FHIR', uri: 'http://hl7.org/fhir', version: '4.0.1' },
      ],
    },
    parameters: { def: [{ name: 'Measurement Period', accessLevel: 'Public' }] },
    valueSets: { def: [{ name: 'Hypertension', id: hypertensionValueSet.url, accessLevel: 'Public' }] },
    statements: {
      def: [
        {
          name: 'Patient',
          context: 'Patient',
          expression: { type: 'SingletonFrom', operand: { type: 'Retrieve', dataType: FHIR_TYPE('Patient') } },
        },
        {
          name: 'Encounters',
          context: 'Patient',
          accessLevel: 'Public',
          expression: { type: 'Retrieve', dataType: FHIR_TYPE('Encounter') },
        },
        {
          name: 'Initial Population',
          context: 'Patient',
          accessLevel: 'Public',
          expression: { type: 'Exists', operand: { type: 'ExpressionRef', name: 'Encounters' } },
        },
        {
          name: 'Denominator',
          context: 'Patient',
          accessLevel: 'Public',
          expression: { type: 'ExpressionRef', name: 'Initial Population' },
        },
        {
          name: 'Numerator',
          context: 'Patient',
          accessLevel: 'Public',
          expression: {
            type: 'Exists',
            operand: {
              type: 'Retrieve',
              dataType: FHIR_TYPE('Condition'),
              codeProperty: 'code',
              codes: { type: 'ValueSetRef', name: 'Hypertension' },
            },
          },
        },
        {
          name: 'Gender',
          context: 'Patient',
          accessLevel: 'Public',
          expression: { type: 'Property', path: 'gender', source: { type: 'ExpressionRef', name: 'Patient' } },
        },
        {
          type: 'FunctionDef',
          name: 'Encounter Days',
          context: 'Patient',
          accessLevel: 'Public',
          operand: [{ name: 'E', operandTypeSpecifier: { type: 'NamedTypeSpecifier', name: FHIR_TYPE('Encounter') } }],
          expression: {
            type: 'Property',
            path: 'value',
            source: { type: 'Property', path: 'length', source: { type: 'OperandRef', name: 'E' } },
          },
        },
      ],
    },
  },
};

export function elmLibrary(id: string, url: string, elm: unknown, version = '1.0.0'): Library {
  return {
    resourceType: 'Library',
    id,
    url,
    version,
    status: 'active',
    type: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/library-type', code: 'logic-library' }] },
    content: [{ contentType: 'application/elm+json', data: Buffer.from(JSON.stringify(elm)).toString('base64') }],
  };
}

export const ownLibrary = elmLibrary('own-logic', 'http://example.org/fhir/Library/OwnLogic', ownElm);

const POPULATION = 'http://terminology.hl7.org/CodeSystem/measure-population';
export const cql = (expression: string): Expression => ({ language: 'text/cql-identifier', expression });
export const fhirpath = (expression: string): Expression => ({ language: 'text/fhirpath', expression });
export const query = (expression: string): Expression => ({ language: 'application/x-fhir-query', expression });
export const pop = (
  code: string,
  criteria: Expression,
  extension?: MeasureGroupPopulation['extension'],
): MeasureGroupPopulation => ({
  code: { coding: [{ system: POPULATION, code }] },
  criteria,
  ...(extension ? { extension } : {}),
});

const CQFM = 'http://hl7.org/fhir/us/cqfmeasures/StructureDefinition/';
export const basis = (code: string) => ({ url: `${CQFM}cqfm-populationBasis`, valueCode: code });
export const aggregate = (code: string) => [{ url: `${CQFM}cqfm-aggregateMethod`, valueCode: code }];
const scoring = (code: string) => ({
  coding: [{ system: 'http://terminology.hl7.org/CodeSystem/measure-scoring', code }],
});

export function measure(id: string, fields: Partial<Measure> & { scoringCode: string }): Measure {
  const { scoringCode, ...rest } = fields;
  return {
    resourceType: 'Measure',
    id,
    url: `http://example.org/fhir/Measure/${id}`,
    version: '1',
    status: 'active',
    scoring: scoring(scoringCode),
    ...rest,
  };
}
