import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { FHIR, parameters, testApp, type TestApp } from '../helpers/app';

const TOKEN = 'secret-token-0123456789';
const OTHER = 'another-token-9876543210';

describe('with AUTH_TOKENS set', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await testApp({ config: { authTokens: [TOKEN, OTHER], logLevel: 'info' } });
  });
  afterAll(() => t.close());

  test('metadata stays public', async () => {
    expect((await t.app.inject({ method: 'GET', url: '/fhir/R4/metadata' })).statusCode).toBe(200);
    expect((await t.app.inject({ method: 'GET', url: '/fhir/R4/metadata?mode=full' })).statusCode).toBe(200);
  });

  test('other metadata modes describe content and need a token (mode=terminology lists stored code systems)', async () => {
    for (const mode of ['terminology', 'anything']) {
      const anonymous = await t.app.inject({ method: 'GET', url: `/fhir/R4/metadata?mode=${mode}` });
      expect(anonymous.statusCode).toBe(401);
      expect(anonymous.headers['www-authenticate']).toMatch(/^Bearer/);
    }
    // With a token the request reaches the route (the test app has no terminology mode: 400).
    const authorized = await t.app.inject({
      method: 'GET',
      url: '/fhir/R4/metadata?mode=terminology',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(authorized.statusCode).toBe(400);
  });

  test.each([
    ['GET', '/fhir/R4/Patient/x'],
    ['GET', '/fhir/R4/Patient'],
    ['POST', '/fhir/R4/Patient'],
    ['PUT', '/fhir/R4/Patient/x'],
    ['DELETE', '/fhir/R4/Patient/x'],
    ['GET', '/fhir/R4/Patient/x/_history'],
    ['GET', '/fhir/R4/Patient/x/_history/1'],
    ['GET', '/fhir/R4/OperationDefinition/echo'],
    ['POST', '/fhir/R4/$echo'],
    ['GET', '/fhir/R4/Patient/$echo'],
    ['POST', '/fhir/R4/Patient/x/$echo'],
    ['POST', '/fhir/R4/metadata'],
    ['GET', '/nowhere'],
  ])('%s %s without a token is 401 with WWW-Authenticate', async (method, url) => {
    const res = await t.app.inject({
      method: method as 'GET',
      url,
      headers: FHIR,
      payload: method === 'GET' || method === 'DELETE' ? undefined : parameters(),
    });
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(res.json().issue[0].code).toBe('login');
  });

  test('a wrong token is 401, a right one (either) passes', async () => {
    const wrong = await t.app.inject({
      method: 'GET',
      url: '/fhir/R4/$echo',
      headers: { authorization: 'Bearer nope-nope-nope-nope' },
    });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.headers['www-authenticate']).toContain('invalid_token');
    for (const token of [TOKEN, OTHER]) {
      const ok = await t.app.inject({
        method: 'GET',
        url: '/fhir/R4/$echo',
        headers: { authorization: `Bearer ${token}` },
      });
      expect(ok.statusCode).toBe(200);
    }
    const basic = await t.app.inject({
      method: 'GET',
      url: '/fhir/R4/$echo',
      headers: { authorization: `Basic ${TOKEN}` },
    });
    expect(basic.statusCode).toBe(401);
  });

  test('tokens never reach the log', async () => {
    await t.app.inject({ method: 'GET', url: '/fhir/R4/$echo', headers: { authorization: `Bearer ${TOKEN}` } });
    await t.app.inject({
      method: 'GET',
      url: '/fhir/R4/$echo',
      headers: { authorization: 'Bearer wrong-wrong-wrong-wrong' },
    });
    const log = t.logs.join('');
    expect(log).toContain('"status":200');
    expect(log).not.toContain(TOKEN);
    expect(log).not.toContain('wrong-wrong');
  });

  test('a token sent in the query string is redacted in the request log line', async () => {
    t.logs.length = 0;
    await t.app.inject({ method: 'GET', url: `/fhir/R4/$echo?text=hello&access_token=${TOKEN}&count=2` });
    await t.app.inject({ method: 'GET', url: `/fhir/R4/$echo?Access_Token=${OTHER}` });
    const log = t.logs.join('');
    expect(log).not.toContain(TOKEN);
    expect(log).not.toContain(OTHER);
    expect(log).toContain('/fhir/R4/$echo?text=hello&access_token=[redacted]&count=2');
    expect(log).toContain('?Access_Token=[redacted]');
  });
});

describe('without AUTH_TOKENS', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await testApp();
  });
  afterAll(() => t.close());

  test('anonymous requests are served', async () => {
    expect((await t.app.inject({ method: 'GET', url: '/fhir/R4/$echo' })).statusCode).toBe(200);
  });
});
