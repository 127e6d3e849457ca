import type { Bundle } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { testApp, type TestApp } from '../helpers/app';

/** Absolute URLs in answers: from BASE_URL when it is configured, never from a Host header then. */

const search = (t: TestApp, host: string) =>
  t.app.inject({ method: 'GET', url: '/fhir/R4/OperationDefinition?_id=echo', headers: { host } });

describe('with BASE_URL set', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await testApp({ config: { baseUrl: 'https://tx.example.org/fhir/R4' } });
  });
  afterAll(() => t.close());

  test('links and fullUrls start with it, whatever Host the client sends', async () => {
    const bundle = (await search(t, 'attacker.example:666')).json() as Bundle;
    expect(bundle.link?.[0].url).toMatch(/^https:\/\/tx\.example\.org\/fhir\/R4\/OperationDefinition\?_id=echo(&|$)/);
    expect(bundle.entry?.[0].fullUrl).toBe('https://tx.example.org/fhir/R4/OperationDefinition/echo');
    expect(JSON.stringify(bundle)).not.toContain('attacker');
    const created = await t.app.inject({
      method: 'POST',
      url: '/fhir/R4/Patient',
      headers: { host: 'attacker.example:666', 'content-type': 'application/fhir+json' },
      payload: { resourceType: 'Patient' },
    });
    expect(created.headers.location).toMatch(/^https:\/\/tx\.example\.org\/fhir\/R4\/Patient\//);
  });
});

describe('without BASE_URL', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await testApp();
  });
  afterAll(() => t.close());

  test('absolute URLs follow the request, as they always did', async () => {
    const bundle = (await search(t, 'fhir.local:8080')).json() as Bundle;
    expect(bundle.entry?.[0].fullUrl).toBe('http://fhir.local:8080/fhir/R4/OperationDefinition/echo');
  });
});
