import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { testApp, type TestApp } from '../helpers/app';

describe('the web console', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await testApp({ config: { authTokens: ['secret-token-0123456789'] } });
  });
  afterAll(() => t.close());

  test('the page, its script (bundled on first use) and its style are served without a token to a browser', async () => {
    const page = await t.app.inject({
      method: 'GET',
      url: '/',
      headers: { accept: 'text/html,application/xhtml+xml' },
    });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.headers['content-security-policy']).toContain("default-src 'self'");
    expect(page.body).toContain('/console/app.js');
    // Nothing from another host: no CDN.
    expect(page.body).not.toMatch(/(src|href)="https?:/);
    const script = await t.app.inject({ method: 'GET', url: '/console/app.js' });
    expect(script.statusCode).toBe(200);
    expect(script.headers['content-type']).toMatch(/^text\/javascript/);
    expect(script.body).toContain('$validate-code');
    const style = await t.app.inject({ method: 'GET', url: '/console/app.css' });
    expect(style.headers['content-type']).toMatch(/^text\/css/);
  });

  test('a file the console does not have is a 404 OperationOutcome; the FHIR API still needs the token', async () => {
    const missing = await t.app.inject({ method: 'GET', url: '/console/main.ts' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json().issue[0].code).toBe('not-found');
    expect((await t.app.inject({ method: 'GET', url: '/fhir/R4/Patient' })).statusCode).toBe(401);
  });
});
