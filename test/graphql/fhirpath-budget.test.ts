import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { largePatient } from '../helpers/costly-fhirpath';
import { FHIR_JSON, putResource, serverApp } from '../helpers/server-app';

/**
 * A GraphQL `fhirpath:` argument is the client's own expression: one that costs a minute on a
 * 150 KB resource ends the query with a too-costly error after FHIRPATH_TIMEOUT_MS, while other
 * requests are answered; an ordinary one filters as before.
 */

describe('GraphQL fhirpath arguments under a time limit', () => {
  let server: ServerApp;

  beforeAll(async () => {
    server = await serverApp({ fhirpathTimeoutMs: 500 });
    await putResource(server.app, { ...largePatient(), id: 'large' });
  });
  afterAll(() => server?.close());

  const graphql = (query: string) =>
    server.app.inject({
      method: 'POST',
      url: '/fhir/R4/$graphql',
      headers: { 'content-type': 'application/json' },
      payload: { query },
    });

  test('a costly fhirpath argument is stopped with too-costly, and /metadata is answered meanwhile', async () => {
    let querying = true;
    const query = graphql('{ PatientList(fhirpath: "name.select(%context.name.given).count() > 0") { id } }').finally(
      () => (querying = false),
    );
    const answered: number[] = [];
    while (querying) {
      answered.push(
        (await server.app.inject({ method: 'GET', url: '/fhir/R4/metadata', headers: FHIR_JSON })).statusCode,
      );
      // Injected requests settle without I/O: pace the probes so that the query's I/O gets its turns.
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const res = await query;
    expect(res.body).toContain('was stopped: it did not finish within 500 ms');
    expect(answered.length).toBeGreaterThanOrEqual(5);
    expect(answered.every((s) => s === 200)).toBe(true);
  });

  test('an ordinary fhirpath argument filters as before', async () => {
    const res = await graphql('{ Patient(id: "large") { name(fhirpath: "family = \'Family7\'") { family } } }');
    expect(res.json()).toEqual({ data: { Patient: { name: [{ family: 'Family7' }] } } });
  });
});
