import type { OperationDefinition, Resource } from 'fhir/r4';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../../src/config';
import { isFhirError } from '../../src/fhir/errors';
import { concreteResourceTypes, toOperationSpec } from '../../src/fhir/operation-definition';
import { readParameters } from '../../src/fhir/parameters';
import { R4_RESOURCE_TYPES } from '../../src/fhir/r4-resource-types';
import { ResourceValidator } from '../../src/validation/validator';
import { validateBeforeWrite, validatesOnWrite } from '../../src/validation/write-checks';
import { FHIR_JSON, serverApp } from '../helpers/server-app';

/** The structural check of every write, validation on write, and what the operation framework gained for $validate. */

describe('every create and update is checked against the R4 definitions', () => {
  let server: { app: FastifyInstance; close: () => Promise<void> };
  beforeAll(async () => {
    server = await serverApp();
  });
  afterAll(async () => {
    await server?.close();
  });

  const create = (resource: Record<string, unknown>) =>
    server.app.inject({
      method: 'POST',
      url: `/fhir/R4/${String(resource.resourceType)}`,
      headers: FHIR_JSON,
      payload: resource,
    });

  test('valid R4 the JSON schema refused is stored: an expression language outside its closed list (extensible in R4)', async () => {
    const plan = {
      resourceType: 'PlanDefinition',
      status: 'active',
      action: [
        {
          title: 'adults',
          condition: [
            { kind: 'applicability', expression: { language: 'text/cql.identifier', expression: 'IsAdult' } },
          ],
        },
      ],
    };
    const res = await create(plan);
    expect(res.statusCode, res.body).toBe(201);
  });

  test.each([
    [
      'inside a contained resource',
      {
        resourceType: 'Patient',
        managingOrganization: { reference: '#o' },
        contained: [{ resourceType: 'Organization', id: 'o', colour: 'red' }],
      },
      'Patient.contained[0].colour',
    ],
    [
      'inside a Bundle entry',
      {
        resourceType: 'Bundle',
        type: 'collection',
        entry: [{ resource: { resourceType: 'Patient', birthDate: 'soon' } }],
      },
      'Bundle.entry[0].resource.birthDate',
    ],
    ['a missing required element', { resourceType: 'Observation', code: { text: 'x' } }, 'Observation.status'],
  ])('an error %s is 400 naming its FHIRPath, and nothing is stored', async (_name, resource, expression) => {
    const res = await create(resource);
    expect(res.statusCode).toBe(400);
    expect(res.json().issue[0].expression).toEqual([expression]);
    const listed = await server.app.inject({ method: 'GET', url: `/fhir/R4/${resource.resourceType}` });
    expect(listed.json().total).toBe(0);
  });

  test('codes are not checked against value sets on write (that is $validate, or VALIDATE_ON_WRITE)', async () => {
    const res = await create({ resourceType: 'Patient', gender: 'robot' });
    expect(res.statusCode).toBe(201);
  });
});

describe('validation on write', () => {
  test('VALIDATE_ON_WRITE is off by default and read as a boolean', () => {
    expect(loadConfig({}).validateOnWrite).toBe(false);
    expect(loadConfig({ VALIDATE_ON_WRITE: 'true' }).validateOnWrite).toBe(true);
    expect(() => loadConfig({ VALIDATE_ON_WRITE: 'sometimes' })).toThrow(/VALIDATE_ON_WRITE/);
  });

  test.each([
    [false, undefined, false],
    [true, undefined, true],
    [false, 'true', true],
    [true, 'false', false],
    [false, '1', true],
    [true, '0', false],
  ])('setting %s with header %s validates: %s', (setting, header, expected) => {
    expect(validatesOnWrite(setting, header)).toBe(expected);
  });

  test('a header that is not a boolean is a 400', () => {
    try {
      validatesOnWrite(false, 'maybe');
      expect.unreachable();
    } catch (err) {
      expect(isFhirError(err) && err.status).toBe(400);
    }
  });

  test('a resource with errors is refused with 422 and the OperationOutcome $validate gives; warnings never refuse', async () => {
    const validator = new ResourceValidator();
    const deadline = Date.now() + 30_000;
    try {
      await validateBeforeWrite(validator, { resourceType: 'Patient', contact: [{ gender: 'male' }] } as Resource, {
        deadline,
        project: 'default',
      });
      expect.unreachable();
    } catch (err) {
      if (!isFhirError(err)) throw err;
      expect(err.status).toBe(422);
      expect(err.code).toBe('ERR_VALIDATION_FAILED');
      expect(err.outcome.issue[0]).toMatchObject({
        severity: 'error',
        code: 'invariant',
        expression: ['Patient.contact[0]'],
      });
      expect(err.outcome.issue.some((i) => i.severity === 'warning')).toBe(true);
    }
    // No narrative is a warning (dom-6): stored.
    await expect(
      validateBeforeWrite(validator, { resourceType: 'Patient' } as Resource, { deadline, project: 'default' }),
    ).resolves.toBeUndefined();
  });
});

describe('what the operation framework gained', () => {
  const definition = (
    resource: OperationDefinition['resource'],
    parameter: OperationDefinition['parameter'],
  ): OperationDefinition => ({
    resourceType: 'OperationDefinition',
    id: 'x',
    url: 'http://test.local/x',
    name: 'x',
    status: 'active',
    kind: 'operation',
    code: 'x',
    system: false,
    type: true,
    instance: false,
    resource,
    parameter,
  });

  test('Resource names every resource type, DomainResource all but Binary, Bundle and Parameters', () => {
    expect(concreteResourceTypes(['Resource'])).toEqual([...R4_RESOURCE_TYPES]);
    const domain = concreteResourceTypes(['DomainResource']);
    expect(domain).toHaveLength(R4_RESOURCE_TYPES.length - 3);
    for (const type of ['Binary', 'Bundle', 'Parameters']) expect(domain).not.toContain(type);
    expect(concreteResourceTypes(['Patient', 'Group'])).toEqual(['Patient', 'Group']);
    expect(toOperationSpec(definition(['Resource'], [])).resources).toHaveLength(R4_RESOURCE_TYPES.length);
  });

  test('a POST body that is a resource is the one resource-typed input, the query carrying the others', () => {
    const spec = toOperationSpec(
      definition(
        ['Patient'],
        [
          { name: 'item', use: 'in', min: 1, max: '1', type: 'DomainResource' },
          { name: 'flag', use: 'in', min: 0, max: '1', type: 'boolean' },
          { name: 'return', use: 'out', min: 1, max: '1', type: 'OperationOutcome' },
        ],
      ),
    );
    const patient = { resourceType: 'Patient', id: 'p' };
    expect(readParameters(patient, spec, { strict: false, query: { flag: 'true' } })).toEqual({
      item: patient,
      flag: true,
    });
    expect(() => readParameters({ resourceType: 'Bundle', type: 'collection' }, spec, { strict: false })).toThrow(
      "Parameter 'item' must be of type DomainResource, not Bundle",
    );
    const two = toOperationSpec(
      definition(
        ['Patient'],
        [
          { name: 'a', use: 'in', min: 0, max: '1', type: 'Resource' },
          { name: 'b', use: 'in', min: 0, max: '1', type: 'Resource' },
        ],
      ),
    );
    expect(() => readParameters(patient, two, { strict: false })).toThrow(
      'An operation invoked with POST takes a Parameters resource, not Patient',
    );
  });
});
