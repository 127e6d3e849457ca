import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { FHIR_JSON, serverApp } from '../helpers/server-app';

/** Full validation on write: off by default (structure only), on by setting, per request by header. */

const robot = { resourceType: 'Patient', gender: 'robot' };

describe('validation on write', () => {
  let off: ServerApp;
  let on: ServerApp;
  beforeAll(async () => {
    off = await serverApp();
    on = await serverApp({ validateOnWrite: true });
  });
  afterAll(async () => {
    await off.close();
    await on.close();
  });
  const create = (server: ServerApp, headers: Record<string, string> = {}) =>
    server.app.inject({
      method: 'POST',
      url: '/fhir/R4/Patient',
      headers: { ...FHIR_JSON, ...headers },
      payload: robot,
    });

  test('off by default: a code outside its required value set is stored (structure is still checked)', async () => {
    expect((await create(off)).statusCode).toBe(201);
    expect(
      (
        await off.app.inject({
          method: 'POST',
          url: '/fhir/R4/Patient',
          headers: FHIR_JSON,
          payload: { resourceType: 'Patient', birthDate: 'soon' },
        })
      ).statusCode,
    ).toBe(400);
  });

  test('VALIDATE_ON_WRITE=true refuses it with 422 and the $validate OperationOutcome; the header turns it off', async () => {
    const refused = await create(on);
    expect(refused.statusCode).toBe(422);
    expect(refused.json().issue.some((i: { expression?: string[] }) => i.expression?.[0] === 'Patient.gender')).toBe(
      true,
    );
    expect((await create(on, { 'x-validate-on-write': 'false' })).statusCode).toBe(201);
    expect((await create(off, { 'x-validate-on-write': 'true' })).statusCode).toBe(422);
    expect((await create(off, { 'x-validate-on-write': 'perhaps' })).statusCode).toBe(400);
  });

  test('it applies inside transactions too', async () => {
    const res = await on.app.inject({
      method: 'POST',
      url: '/fhir/R4',
      headers: FHIR_JSON,
      payload: {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [{ resource: robot, request: { method: 'POST', url: 'Patient' } }],
      },
    });
    expect(res.statusCode).toBe(422);
    expect(res.json().issue[0].expression).toEqual(['Bundle.entry[0]']);
  });
});
