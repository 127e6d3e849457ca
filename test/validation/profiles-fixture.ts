import type { StructureDefinition } from 'fhir/r4';

/**
 * Profiles written the way people write them by hand: differential only (the server builds the
 * snapshot), using one stored extension. Each element exercises one kind of check.
 */

export const NICKNAME_URL = 'http://example.org/fhir/StructureDefinition/nickname';
export const CHECKS_PATIENT_URL = 'http://example.org/fhir/StructureDefinition/checks-patient';
export const QUANTITY_OBSERVATION_URL = 'http://example.org/fhir/StructureDefinition/quantity-observation';
const MARITAL = 'http://terminology.hl7.org/CodeSystem/v3-MaritalStatus';
const RELATIONSHIP = 'http://terminology.hl7.org/CodeSystem/v2-0131';

export const nicknameExtension = {
  resourceType: 'StructureDefinition',
  id: 'nickname',
  url: NICKNAME_URL,
  name: 'Nickname',
  status: 'active',
  kind: 'complex-type',
  abstract: false,
  context: [{ type: 'element', expression: 'Patient' }],
  type: 'Extension',
  baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Extension',
  derivation: 'constraint',
  differential: {
    element: [
      { id: 'Extension', path: 'Extension', max: '1' },
      { id: 'Extension.extension', path: 'Extension.extension', max: '0' },
      { id: 'Extension.url', path: 'Extension.url', fixedUri: NICKNAME_URL },
      { id: 'Extension.value[x]', path: 'Extension.value[x]', min: 1, type: [{ code: 'string' }] },
    ],
  },
} satisfies StructureDefinition;

export const checksPatient = {
  resourceType: 'StructureDefinition',
  id: 'checks-patient',
  url: CHECKS_PATIENT_URL,
  version: '1.0.0',
  name: 'ChecksPatient',
  status: 'active',
  kind: 'resource',
  abstract: false,
  type: 'Patient',
  baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient',
  derivation: 'constraint',
  differential: {
    element: [
      { id: 'Patient', path: 'Patient' },
      // profile discriminator: an extension is in the slice when it conforms to the nickname extension
      {
        id: 'Patient.extension',
        path: 'Patient.extension',
        slicing: { discriminator: [{ type: 'profile', path: '$this' }], rules: 'open' },
      },
      {
        id: 'Patient.extension:nick',
        path: 'Patient.extension',
        sliceName: 'nick',
        min: 1,
        max: '1',
        type: [{ code: 'Extension', profile: [NICKNAME_URL] }],
      },
      // value discriminator, closed: only the two known systems; an mrn is required, at most 8 characters
      {
        id: 'Patient.identifier',
        path: 'Patient.identifier',
        slicing: { discriminator: [{ type: 'value', path: 'system' }], rules: 'closed' },
      },
      { id: 'Patient.identifier:mrn', path: 'Patient.identifier', sliceName: 'mrn', min: 1, max: '1' },
      {
        id: 'Patient.identifier:mrn.system',
        path: 'Patient.identifier.system',
        min: 1,
        fixedUri: 'http://example.org/mrn',
      },
      { id: 'Patient.identifier:mrn.value', path: 'Patient.identifier.value', min: 1, maxLength: 8 },
      { id: 'Patient.identifier:ssn', path: 'Patient.identifier', sliceName: 'ssn', max: '1' },
      {
        id: 'Patient.identifier:ssn.system',
        path: 'Patient.identifier.system',
        min: 1,
        fixedUri: 'http://example.org/ssn',
      },
      // at most two names
      { id: 'Patient.name', path: 'Patient.name', max: '2' },
      // exists discriminator, ordered: telecoms with a period come before those without
      {
        id: 'Patient.telecom',
        path: 'Patient.telecom',
        slicing: { discriminator: [{ type: 'exists', path: 'period' }], ordered: true, rules: 'open' },
      },
      { id: 'Patient.telecom:dated', path: 'Patient.telecom', sliceName: 'dated' },
      { id: 'Patient.telecom:dated.period', path: 'Patient.telecom.period', min: 1 },
      { id: 'Patient.telecom:undated', path: 'Patient.telecom', sliceName: 'undated' },
      { id: 'Patient.telecom:undated.period', path: 'Patient.telecom.period', max: '0' },
      // fixed and pattern values
      { id: 'Patient.gender', path: 'Patient.gender', fixedCode: 'female' },
      {
        id: 'Patient.maritalStatus',
        path: 'Patient.maritalStatus',
        patternCodeableConcept: { coding: [{ system: MARITAL, code: 'M' }] },
      },
      // pattern discriminator, open at the end: the emergency contacts come first
      {
        id: 'Patient.contact',
        path: 'Patient.contact',
        slicing: { discriminator: [{ type: 'pattern', path: 'relationship' }], rules: 'openAtEnd' },
      },
      { id: 'Patient.contact:emergency', path: 'Patient.contact', sliceName: 'emergency' },
      {
        id: 'Patient.contact:emergency.relationship',
        path: 'Patient.contact.relationship',
        patternCodeableConcept: { coding: [{ system: RELATIONSHIP, code: 'C' }] },
      },
      // an invariant of the profile's own
      {
        id: 'Patient.birthDate',
        path: 'Patient.birthDate',
        constraint: [
          { key: 'chk-1', severity: 'error', human: 'born in this millennium', expression: '$this >= @2000-01-01' },
        ],
      },
    ],
  },
} satisfies StructureDefinition;

/** type discriminator, closed: value[x] may only be a Quantity. */
export const quantityObservation = {
  resourceType: 'StructureDefinition',
  id: 'quantity-observation',
  url: QUANTITY_OBSERVATION_URL,
  name: 'QuantityObservation',
  status: 'active',
  kind: 'resource',
  abstract: false,
  type: 'Observation',
  baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Observation',
  derivation: 'constraint',
  differential: {
    element: [
      { id: 'Observation', path: 'Observation' },
      {
        id: 'Observation.value[x]',
        path: 'Observation.value[x]',
        slicing: { discriminator: [{ type: 'type', path: '$this' }], rules: 'closed' },
      },
      {
        id: 'Observation.value[x]:valueQuantity',
        path: 'Observation.value[x]',
        sliceName: 'valueQuantity',
        type: [{ code: 'Quantity' }],
      },
    ],
  },
} satisfies StructureDefinition;

/** A Patient that satisfies checks-patient. */
export function checksPatientInstance(): Record<string, unknown> {
  return {
    resourceType: 'Patient',
    meta: { profile: [CHECKS_PATIENT_URL] },
    text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml">Ann</div>' },
    extension: [{ url: NICKNAME_URL, valueString: 'Annie' }],
    identifier: [{ system: 'http://example.org/mrn', value: '1234' }],
    name: [{ family: 'Smith' }],
    telecom: [
      { system: 'phone', value: '1', period: { start: '2020-01-01' } },
      { system: 'phone', value: '2' },
    ],
    gender: 'female',
    birthDate: '2001-02-03',
    maritalStatus: { coding: [{ system: MARITAL, code: 'M', display: 'Married' }] },
    contact: [
      { relationship: [{ coding: [{ system: RELATIONSHIP, code: 'C' }] }], name: { family: 'Jones' } },
      { name: { family: 'Brown' } },
    ],
  };
}
