import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { FHIR, parameters, testApp, type TestApp } from '../helpers/app';

const TOKEN = 'secret-token-0123456789';
const ALLOWED = 'https://console.example.org';
const OTHER = 'https://evil.example.net';

describe('CORS with CORS_ORIGINS and AUTH_TOKENS set', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await testApp({ config: { authTokens: [TOKEN], corsOrigins: [ALLOWED, 'http://localhost:3000'] } });
  });
  afterAll(() => t.close());

  const preflight = (origin: string, url = '/fhir/R4/ValueSet/$echo') =>
    t.app.inject({
      method: 'OPTIONS',
      url,
      headers: {
        origin,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type, if-match, prefer, x-project',
      },
    });

  test('a preflight from an allowed origin is answered before authentication, with the methods and headers a FHIR client sends', async () => {
    const res = await preflight(ALLOWED);
    expect(res.statusCode).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(ALLOWED);
    expect(res.headers.vary).toMatch(/Origin/);
    expect(String(res.headers['access-control-allow-methods'])).toMatch(/POST/);
    const allowed = String(res.headers['access-control-allow-headers']).toLowerCase().split(/,\s*/);
    for (const header of ['authorization', 'content-type', 'if-match', 'if-none-exist', 'prefer', 'x-project'])
      expect(allowed).toContain(header);
  });

  test('a preflight from an origin not in the list gets no CORS headers (and goes on to the ordinary 401)', async () => {
    const res = await preflight(OTHER);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    expect(res.statusCode).toBe(401);
    expect(res.json().resourceType).toBe('OperationOutcome');
  });

  test('an allowed origin can read the answer and the FHIR headers; another origin gets nothing to read', async () => {
    const call = (origin: string) =>
      t.app.inject({
        method: 'POST',
        url: '/fhir/R4/Patient',
        headers: { ...FHIR, origin, authorization: `Bearer ${TOKEN}` },
        payload: { resourceType: 'Patient' },
      });
    const allowed = await call(ALLOWED);
    expect(allowed.statusCode).toBe(201);
    expect(allowed.headers['access-control-allow-origin']).toBe(ALLOWED);
    const exposed = String(allowed.headers['access-control-expose-headers']).toLowerCase().split(/,\s*/);
    for (const header of ['etag', 'location', 'content-location', 'x-progress', 'x-request-id'])
      expect(exposed).toContain(header);
    const other = await call(OTHER);
    expect(other.statusCode).toBe(201);
    expect(other.headers['access-control-allow-origin']).toBeUndefined();
    expect(other.headers['access-control-expose-headers']).toBeUndefined();
  });

  test('errors carry the CORS headers too, so a page can read why (a 401 without a token)', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/fhir/R4/$echo',
      headers: { ...FHIR, origin: ALLOWED },
      payload: parameters(),
    });
    expect(res.statusCode).toBe(401);
    expect(res.headers['access-control-allow-origin']).toBe(ALLOWED);
  });
});

describe('CORS without CORS_ORIGINS (the default)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await testApp();
  });
  afterAll(() => t.close());

  test('no origin is allowed: no CORS headers, and a preflight is not answered', async () => {
    const res = await t.app.inject({
      method: 'OPTIONS',
      url: '/fhir/R4/Patient',
      headers: { origin: 'http://localhost:3000', 'access-control-request-method': 'GET' },
    });
    expect(res.statusCode).toBe(404);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    const get = await t.app.inject({
      method: 'GET',
      url: '/fhir/R4/metadata',
      headers: { origin: 'http://localhost:3000' },
    });
    expect(get.headers['access-control-allow-origin']).toBeUndefined();
  });
});
