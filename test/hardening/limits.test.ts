import type { OperationOutcome } from 'fhir/r4';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { syntheticContent, SYNTHETIC_URL } from '../../bench/synthetic';
import { MAX_CODINGS, MAX_PARAMETERS } from '../../src/fhir/parameters';
import { FHIR_JSON, putResource, serverApp } from '../helpers/server-app';

/** Every limit answers a clear 4xx OperationOutcome, and the server goes on answering. */

let app: FastifyInstance;
let close: () => Promise<void>;
const issue = (body: string) => (JSON.parse(body) as OperationOutcome).issue[0];

beforeAll(async () => {
  // A 10 ms budget per operation, so an expansion that walks 30,000 concepts runs out of it.
  ({ app, close } = await serverApp({ operationTimeoutMs: 10, bodyLimit: 64 * 1024 * 1024 }));
});
afterAll(() => close());

describe('limits', () => {
  test(`more than ${MAX_PARAMETERS} parameters, in a body or a query string, is 400 too-costly`, async () => {
    const parameter = Array.from({ length: MAX_PARAMETERS + 1 }, (_, i) => ({ name: 'property', valueCode: `p${i}` }));
    const body = await app.inject({
      method: 'POST',
      url: '/fhir/R4/CodeSystem/$lookup',
      headers: FHIR_JSON,
      payload: { resourceType: 'Parameters', parameter },
    });
    expect(body.statusCode).toBe(400);
    expect(issue(body.body).code).toBe('too-costly');
    expect(issue(body.body).details?.text).toBe(
      `The request carries ${MAX_PARAMETERS + 1} parameters; at most ${MAX_PARAMETERS} are accepted`,
    );
    const query = Array.from({ length: MAX_PARAMETERS + 1 }, (_, i) => `property=p${i}`).join('&');
    const get = await app.inject({ method: 'GET', url: `/fhir/R4/CodeSystem/$lookup?${query}` });
    expect(get.statusCode).toBe(400);
    expect(issue(get.body).code).toBe('too-costly');
    // Parts count too: one entry with too many parts is as heavy as many entries.
    const parts = [
      {
        name: 'dependency',
        part: Array.from({ length: MAX_PARAMETERS }, () => ({ name: 'element', valueUri: 'http://x' })),
      },
    ];
    const nested = await app.inject({
      method: 'POST',
      url: '/fhir/R4/ConceptMap/$translate',
      headers: FHIR_JSON,
      payload: { resourceType: 'Parameters', parameter: parts },
    });
    expect(nested.statusCode).toBe(400);
    expect(issue(nested.body).code).toBe('too-costly');
  });

  test(`a CodeableConcept with more than ${MAX_CODINGS} codings is 400 too-costly`, async () => {
    const coding = Array.from({ length: MAX_CODINGS + 1 }, (_, i) => ({
      system: 'http://hl7.org/fhir/administrative-gender',
      code: `c${i}`,
    }));
    const res = await app.inject({
      method: 'POST',
      url: '/fhir/R4/ValueSet/$validate-code',
      headers: FHIR_JSON,
      payload: {
        resourceType: 'Parameters',
        parameter: [
          { name: 'url', valueUri: 'http://hl7.org/fhir/ValueSet/administrative-gender' },
          { name: 'codeableConcept', valueCodeableConcept: { coding } },
        ],
      },
    });
    expect(res.statusCode).toBe(400);
    expect(issue(res.body).code).toBe('too-costly');
    expect(issue(res.body).details?.text).toBe(
      `Parameter 'codeableConcept' has ${MAX_CODINGS + 1} codings; at most ${MAX_CODINGS} are accepted`,
    );
  });

  test('an operation that outruns its time budget stops with 422 too-costly, and the server goes on', async () => {
    const { codeSystem } = syntheticContent(30_000);
    await putResource(app, codeSystem);
    const vs = { resourceType: 'ValueSet', status: 'active', compose: { include: [{ system: SYNTHETIC_URL }] } };
    const res = await app.inject({
      method: 'POST',
      url: '/fhir/R4/ValueSet/$expand?count=10',
      headers: FHIR_JSON,
      payload: {
        resourceType: 'Parameters',
        parameter: [
          { name: 'valueSet', resource: vs },
          { name: 'count', valueInteger: 10 },
        ],
      },
    });
    expect(res.statusCode).toBe(422);
    expect(issue(res.body).code).toBe('too-costly');
    expect(issue(res.body).details?.text).toBe('Operation $expand did not finish within its time budget of 10 ms');
    const after = await app.inject({
      method: 'GET',
      url: `/fhir/R4/CodeSystem/$lookup?system=${encodeURIComponent(SYNTHETIC_URL)}&code=S000001`,
    });
    expect(after.statusCode).toBe(200);
  }, 30_000);
});
