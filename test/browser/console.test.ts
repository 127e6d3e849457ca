import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { hasBrowser, launchBrowser, type Browser } from '../helpers/browser';
import { FHIR_JSON, serverApp } from '../helpers/server-app';

/** expect.poll waits for what the page shows; 1 s (its default) is too short on a busy 2-core machine. */
const PATIENT = { timeout: 45_000 };

/**
 * The console in a real browser: Debian's chromium against the production app listening on a real
 * port. Screenshots go to test-artifacts/ (not committed).
 */
const ARTIFACTS = join(process.cwd(), 'test-artifacts');
const TOKEN = 'console-token-0123456789';
const GENDER = 'http://hl7.org/fhir/ValueSet/administrative-gender';

describe.skipIf(!hasBrowser)('the web console in chromium', () => {
  let server: ServerApp;
  let browser: Browser;
  let page: Page;
  let base: string;
  const errors: string[] = [];

  beforeAll(async () => {
    server = await serverApp({ authTokens: [TOKEN] });
    const put = await server.app.inject({
      method: 'PUT',
      url: '/fhir/R4/Patient/console-p1',
      headers: { ...FHIR_JSON, authorization: `Bearer ${TOKEN}` },
      payload: { resourceType: 'Patient', id: 'console-p1', name: [{ family: 'Chalmers', given: ['Peter'] }] },
    });
    expect(put.statusCode, put.body).toBe(201);
    await server.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(server.app.server.address() as AddressInfo).port}`;
    mkdirSync(ARTIFACTS, { recursive: true });
    browser = await launchBrowser();
    page = browser.page;
    page.on('pageerror', (err) => errors.push(`page error: ${err.message}`));
    page.on('console', (message) => {
      if (message.type() !== 'error') return;
      // The console asks whether the server offers an OAuth login; a 404 there is the answer "no".
      if (message.location().url.endsWith('/.well-known/smart-configuration')) return;
      // The sign-in test sends a wrong password on purpose: the browser logs its 400.
      if (message.location().url.endsWith('/auth/login')) return;
      errors.push(`console: ${message.text()} (${message.location().url})`);
    });
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  test('the page loads with no console errors, and takes a token', async () => {
    const res = await page.goto(`${base}/`);
    expect(res?.status()).toBe(200);
    await expect.poll(() => page.textContent('#session-state'), PATIENT).toBe('No token');
    await page.fill('#token', TOKEN);
    await page.click('#session button[type=submit]');
    // The header says who the token is (asked of /auth/me), not only that one is set.
    await expect
      .poll(() => page.textContent('#session-state'), PATIENT)
      .toBe('Signed in as operator (project default)');
    await page.fill('#token', 'not-a-token-of-this-server');
    await page.click('#session button[type=submit]');
    await expect.poll(() => page.textContent('#session-state'), PATIENT).toMatch(/^Token not accepted/);
    await page.fill('#token', TOKEN);
    await page.click('#session button[type=submit]');
    await expect
      .poll(() => page.textContent('#session-state'), PATIENT)
      .toBe('Signed in as operator (project default)');
    expect(errors.filter((e) => !e.includes('401'))).toEqual([]);
    errors.length = 0;
  });

  test('signing in with email and password (PKCE) gives the page a token of the project', async () => {
    const init = await server.app.inject({
      method: 'POST',
      url: '/fhir/R4/Project/$init',
      headers: { ...FHIR_JSON, authorization: `Bearer ${TOKEN}` },
      payload: {
        resourceType: 'Parameters',
        parameter: [
          { name: 'name', valueString: 'Console' },
          { name: 'ownerEmail', valueString: 'console@example.org' },
          { name: 'ownerPassword', valueString: 'console password' },
        ],
      },
    });
    expect(init.statusCode, init.body).toBe(201);
    await page.click('#login');
    await page.fill('#signin input[name=email]', 'console@example.org');
    await page.fill('#signin input[name=password]', 'wrong password');
    await page.click('#signin button[type=submit]');
    await expect.poll(() => page.textContent('#signin-problem'), PATIENT).toContain('not right');
    await page.fill('#signin input[name=password]', 'console password');
    await page.click('#signin button[type=submit]');
    await expect
      .poll(() => page.textContent('#session-state'), PATIENT)
      .toMatch(/^Signed in as .*console@example\.org.*project Console, administrator\)$/);
    const token = (await page.evaluate("sessionStorage.getItem('fhir-console-token')")) as string;
    const me = await server.app.inject({
      method: 'GET',
      url: '/auth/me',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(me.json().admin).toBe(true);
    await page.screenshot({ path: join(ARTIFACTS, 'console-signed-in.png') });
    // Back to the operator's token for the rest (the console@ project is empty).
    await page.fill('#token', TOKEN);
    await page.click('#session button[type=submit]');
    await expect
      .poll(() => page.textContent('#session-state'), PATIENT)
      .toBe('Signed in as operator (project default)');
    expect(errors).toEqual([]);
  });

  test('a value-set search finds administrative-gender and opens its expansion', async () => {
    await page.fill('#vs-search input[name=text]', 'gender');
    await page.click('#vs-search button[type=submit]');
    const pick = page.locator(`#vs-results a.pick[data-url="${GENDER}"]`);
    await pick.waitFor();
    await pick.click();
    await page.locator('#expansion td', { hasText: 'female' }).first().waitFor();
    expect(await page.textContent('#compose')).toContain('http://hl7.org/fhir/administrative-gender');
    await page.screenshot({ path: join(ARTIFACTS, 'console-valueset-search.png'), fullPage: true });
    expect(errors).toEqual([]);
  });

  test('validate-code round trip: male is valid, an unknown code is not and the issues are shown', async () => {
    // Empty fields show examples, which are not values: submitting them asks for the value instead of sending a 400.
    // (Picking a value set above filled its URL in; empty it as a newcomer's first visit has it.)
    await page.fill('#validate input[name=url]', '');
    expect(await page.getAttribute('#validate input[name=url]', 'placeholder')).toMatch(/^e\.g\. /);
    await page.click('#validate button[type=submit]');
    expect(
      await page.$eval(
        '#validate input[name=url]',
        (el) => (el as unknown as { validity: { valueMissing: boolean } }).validity.valueMissing,
      ),
    ).toBe(true);
    expect(await page.textContent('#validate-result')).toBe('');
    await page.fill('#validate input[name=url]', GENDER);
    await page.fill('#validate input[name=system]', 'http://hl7.org/fhir/administrative-gender');
    await page.fill('#validate input[name=code]', 'male');
    await page.click('#validate button[type=submit]');
    await expect.poll(() => page.textContent('#validate-verdict'), PATIENT).toBe('Valid');
    expect(await page.textContent('#validate-result')).toContain('Male');
    await page.screenshot({ path: join(ARTIFACTS, 'console-validate-code.png'), fullPage: true });
    await page.fill('#validate input[name=code]', 'robot');
    await page.click('#validate button[type=submit]');
    await expect.poll(() => page.textContent('#validate-verdict'), PATIENT).toBe('Not valid');
    expect(await page.locator('#validate-result table.issues tr').count()).toBeGreaterThan(1);
    await page.screenshot({ path: join(ARTIFACTS, 'console-validate-code-invalid.png'), fullPage: true });
    expect(errors).toEqual([]);
  });

  test('a resource search finds the patient, shows its JSON and its history', async () => {
    await page.click('.tab[data-tab=resources]');
    await page.fill('#resource-search input[name=type]', 'Patient');
    await page.fill('#resource-search input[name=params]', 'family=Chalmers');
    await page.click('#resource-search button[type=submit]');
    const link = page.locator('#resource-results a.pick', { hasText: 'Patient/console-p1' });
    await link.waitFor();
    // The list says what each resource is, not only its id.
    expect(await page.textContent('#resource-results')).toContain('Peter Chalmers');
    await link.click();
    await expect.poll(() => page.textContent('#resource-json'), PATIENT).toContain('Chalmers');
    await page.click('#resource-history');
    await page.locator('#resource-history-list a.pick', { hasText: 'Patient/console-p1' }).waitFor();
    await page.screenshot({ path: join(ARTIFACTS, 'console-resource-search.png'), fullPage: true });
    expect(errors).toEqual([]);
  });

  test("the Admin tab shows the token, the project's clients and members, and its jobs with their state", async () => {
    const kickOff = await server.app.inject({
      method: 'GET',
      url: '/fhir/R4/$export?_type=Patient',
      headers: { authorization: `Bearer ${TOKEN}`, prefer: 'respond-async' },
    });
    expect(kickOff.statusCode, kickOff.body).toBe(202);
    const id = (kickOff.headers['content-location'] as string).split('/').pop() as string;
    for (let job = await server.jobs.get(id); job?.state !== 'done'; job = await server.jobs.get(id)) {
      expect(job?.state).not.toBe('dead');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await page.click('.tab[data-tab=admin]');
    await page.locator('#admin-jobs td', { hasText: 'bulk-export' }).first().waitFor();
    expect(await page.textContent('#admin-jobs')).toContain('done');
    await expect.poll(() => page.textContent('#admin-me'), PATIENT).toContain('operator');
    await page.screenshot({ path: join(ARTIFACTS, 'console-admin.png'), fullPage: true });
    expect(errors).toEqual([]);
  });

  test('the Admin tab registers a backend service from its public key, and that service gets a token with its private key', async () => {
    const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-384' });
    const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'console-service-1', alg: 'ES384', use: 'sig' };
    await page.click('.tab[data-tab=admin]');
    await page.fill('#service-form input[name=name]', 'console service');
    // A private key is refused before anything is sent.
    await page.fill(
      '#service-form textarea[name=keys]',
      JSON.stringify({ ...privateKey.export({ format: 'jwk' }), kid: 'k' }),
    );
    await page.fill('#service-form input[name=scopes]', 'system/Patient.rs');
    await page.click('#service-form button[type=submit]');
    await expect.poll(() => page.textContent('#service-result'), PATIENT).toContain('private key');
    await page.fill('#service-form textarea[name=keys]', JSON.stringify(jwk));
    await page.click('#service-form button[type=submit]');
    await expect.poll(() => page.textContent('#service-result'), PATIENT).toMatch(/Registered: ClientApplication\//);
    const id = ((await page.textContent('#service-client')) ?? '').split('/').pop() as string;
    expect(await page.textContent('#service-result')).toContain(`iss and sub "${id}"`);
    await page.locator('#admin-clients td', { hasText: 'key (private_key_jwt)' }).first().waitFor();
    await page.screenshot({ path: join(ARTIFACTS, 'console-backend-service.png'), fullPage: true });
    // The service signs an assertion (aud: the server's own token URL at its configured port) and reads within its scope.
    const assertion = await new SignJWT({})
      .setProtectedHeader({ alg: 'ES384', kid: 'console-service-1', typ: 'JWT' })
      .setIssuer(id)
      .setSubject(id)
      .setAudience('http://localhost:8080/oauth2/token')
      .setExpirationTime(Math.floor(Date.now() / 1000) + 120)
      .setJti(randomUUID())
      .sign(privateKey);
    const token = await server.app.inject({
      method: 'POST',
      url: '/oauth2/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({
        grant_type: 'client_credentials',
        client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
        client_assertion: assertion,
      }).toString(),
    });
    expect(token.statusCode, token.body).toBe(200);
    expect(token.json().scope).toBe('system/Patient.rs');
    const read = await server.app.inject({
      method: 'GET',
      url: '/fhir/R4/Patient/console-p1',
      headers: { authorization: `Bearer ${token.json().access_token}` },
    });
    expect(read.statusCode, read.body).toBe(200);
    expect(errors).toEqual([]);
  });

  test('/docs renders the OpenAPI document with Swagger UI, from this server only', async () => {
    const res = await page.goto(`${base}/docs`);
    expect(res?.status()).toBe(200);
    await page.locator('.opblock-tag', { hasText: 'ValueSet' }).first().waitFor();
    await page.screenshot({ path: join(ARTIFACTS, 'docs.png') });
    expect(errors).toEqual([]);
  });
});

/** A blank page on its own origin (http://127.0.0.1:<port>), standing for another application. */
async function otherOrigin(): Promise<{ origin: string; server: Server }> {
  const server = createServer((_request, response) => {
    response
      .writeHead(200, { 'content-type': 'text/html' })
      .end('<!doctype html><title>another application</title><link rel="icon" href="data:,">');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe.skipIf(!hasBrowser)('a page on another origin, in chromium', () => {
  test('an origin in CORS_ORIGINS can call $validate-code with a token and read its headers; one not in the list cannot', async () => {
    const allowed = await otherOrigin();
    const refused = await otherOrigin();
    const server = await serverApp({ authTokens: [TOKEN], corsOrigins: [allowed.origin] });
    const browser = await launchBrowser();
    try {
      await server.app.listen({ port: 0, host: '127.0.0.1' });
      const url = `http://127.0.0.1:${(server.app.server.address() as AddressInfo).port}/fhir/R4/ValueSet/$validate-code?url=${GENDER}&system=http://hl7.org/fhir/administrative-gender&code=male`;
      const call = async (origin: string) => {
        await browser.page.goto(`${origin}/`);
        return browser.page.evaluate(
          async ({ url, token }) => {
            try {
              const res = await fetch(url, {
                headers: { authorization: `Bearer ${token}`, accept: 'application/fhir+json' },
              });
              const body = (await res.json()) as { parameter: { name: string; valueBoolean?: boolean }[] };
              return {
                status: res.status,
                requestId: res.headers.get('x-request-id'),
                result: body.parameter.find((p) => p.name === 'result')?.valueBoolean,
              };
            } catch (err) {
              return { error: String(err) };
            }
          },
          { url, token: TOKEN },
        );
      };
      const yes = await call(allowed.origin);
      expect(yes).toEqual({ status: 200, result: true, requestId: expect.any(String) });
      const no = await call(refused.origin);
      expect(no).toEqual({ error: expect.stringMatching(/Failed to fetch/) });
    } finally {
      await browser.close();
      await server.close();
      allowed.server.close();
      refused.server.close();
    }
  });
});
