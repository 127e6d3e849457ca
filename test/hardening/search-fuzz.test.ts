import type { Observation, OperationOutcome, Patient } from 'fhir/r4';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { putResource, serverApp } from '../helpers/server-app';
import { seedFuzzing } from '../helpers/fuzz-seed';

seedFuzzing();

/**
 * Search query strings from a hostile or broken client: known parameters with every modifier and
 * prefix, chains, _has, result parameters, made-up names, and values of every shape. Every answer
 * is a Bundle (200) or an OperationOutcome (4xx), never a 5xx, and the server goes on.
 */

const RUNS = Number(process.env.FUZZ_RUNS ?? 300);
const NAMES = [
  'name',
  'family',
  'birthdate',
  'gender',
  'identifier',
  'general-practitioner',
  'organization',
  '_id',
  '_lastUpdated',
  '_tag',
  'code',
  'value-quantity',
  'subject',
  'patient',
  'date',
  'code-value-quantity',
  'url',
  '_has:Observation:patient:code',
  'subject:Patient.name',
  'subject.organization.name',
  'nonsense',
  '_text',
  '_content',
  '_sort',
  '_count',
  '_include',
  '_revinclude',
  '_total',
  '_summary',
  '_elements',
  '_cursor',
  '_offset',
  '_type',
];
const MODIFIERS = [
  '',
  ':exact',
  ':contains',
  ':missing',
  ':not',
  ':text',
  ':in',
  ':not-in',
  ':below',
  ':above',
  ':of-type',
  ':identifier',
  ':Patient',
  ':iterate',
  ':x',
];
const VALUE = fc.oneof(
  fc.string(),
  fc.constantFrom(
    'eq2020',
    'gt2013-01-14T10:00:00Z',
    'ap1',
    'le-1',
    'sa9999-12-31',
    'xx',
    'true',
    'false',
    '5.4|http://unitsofmeasure.org|mg',
    '5||mg',
    'a|b|c|d',
    '$',
    ',,,',
    '\\,',
    '\\',
    'Patient/1',
    'http://loinc.org|8302-2$gt1',
    'http://hl7.org/fhir/ValueSet/administrative-gender',
    'Observation:patient',
    '*',
    '-date',
    '1e308',
    '-0',
    'NaN',
    '%00',
    '\u0000',
    'é'.repeat(3000),
  ),
  fc.stringMatching(/^[a-z]{0,3}[0-9.\-:|$T+Z]{0,30}$/),
);
const QUERY = fc.array(fc.tuple(fc.constantFrom(...NAMES), fc.constantFrom(...MODIFIERS), VALUE), {
  minLength: 1,
  maxLength: 6,
});

describe('fuzzing search query strings', () => {
  let server: ServerApp;
  beforeAll(async () => {
    server = await serverApp();
    await putResource(server.app, {
      resourceType: 'Patient',
      id: 'p1',
      gender: 'female',
      birthDate: '1970-01-01',
      name: [{ family: 'Doe' }],
    } as Patient);
    await putResource(server.app, {
      resourceType: 'Observation',
      id: 'o1',
      status: 'final',
      code: { text: 'x' },
      subject: { reference: 'Patient/p1' },
    } as Observation);
  });
  afterAll(() => server.close());

  test('any query at type, system and compartment level: 200 or 4xx OperationOutcome, never 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(
        QUERY,
        fc.constantFrom('Patient', 'Observation', '', 'Patient/p1/Observation', 'Patient/_search'),
        async (params, path) => {
          const query = params.map(([n, m, v]) => `${encodeURIComponent(n + m)}=${encodeURIComponent(v)}`).join('&');
          const res = await server.app.inject({
            method: path.endsWith('_search') ? 'POST' : 'GET',
            url: `/fhir/R4/${path}?${query}`,
          });
          expect(res.statusCode, `${path}?${query} -> ${res.body.slice(0, 300)}`).toBeLessThan(500);
          const body = res.json() as { resourceType: string };
          if (res.statusCode >= 400) expect((body as OperationOutcome).issue.length).toBeGreaterThan(0);
          else expect(body.resourceType).toBe('Bundle');
        },
      ),
      { numRuns: RUNS },
    );
    expect((await server.app.inject({ method: 'GET', url: '/fhir/R4/Patient?gender=female' })).statusCode).toBe(200);
  }, 120_000);
});
