import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Resource, Subscription } from 'fhir/r4';
import type { ServerApp } from '../../src/bootstrap';
import { SUBSCRIPTION_EXTENSIONS as EXT } from '../../src/subscriptions/definition';
import { CountingListener, loopbackForms } from '../helpers/listener';
import { FHIR_JSON, serverApp } from '../helpers/server-app';

/**
 * Every way the server calls out (a Subscription's rest-hook, a ClientApplication's jwksUri, a
 * bot's fetch), on a server without OUTBOUND_ALLOW_PRIVATE, aimed at a loopback listener in every
 * form its address can be written in: each is refused, and the listener gets no connection. A
 * redirect from the one allowed target (OUTBOUND_ALLOW_TARGETS) to a loopback form is not followed.
 */

const OPERATOR = 'operator-token-outbound-paths';
const AUTH = { authorization: `Bearer ${OPERATOR}` };
const TOKEN_URL = 'http://localhost:80/oauth2/token';

describe('outbound paths without OUTBOUND_ALLOW_PRIVATE', () => {
  let server: ServerApp;
  let listener: CountingListener;
  /** The allowed first hop: answers every request with a redirect to the listener's mapped form. */
  let hop: Server;
  let hopPort = 0;
  const hopRequests: string[] = [];
  let hopWaiter: ((request: IncomingMessage) => void) | undefined;
  let key: CryptoKey;
  let redirectTo = '';

  const inject = (
    method: 'GET' | 'POST' | 'PUT',
    url: string,
    payload?: object,
    headers: Record<string, string> = {},
  ) => server.app.inject({ method, url, headers: { ...AUTH, ...(payload ? FHIR_JSON : {}), ...headers }, payload });

  async function clientWith(jwksUri: string): Promise<string> {
    const res = await inject('POST', '/fhir/R4/ClientApplication', {
      resourceType: 'ClientApplication',
      name: 'outbound',
      status: 'active',
      jwksUri,
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as string;
  }

  /** A client stored straight into the repository, past the write checks, as an older version let it be stored. */
  async function clientStoredEarlier(jwksUri: string): Promise<string> {
    const written = await server.core.repository.in('default').create('ClientApplication', {
      resourceType: 'ClientApplication',
      name: 'stored earlier',
      status: 'active',
      jwksUri,
    } as Resource);
    return written.version.resource?.id as string;
  }

  /** A client_credentials exchange with a signed assertion: the server reads the client's jwksUri to check it. */
  async function exchange(clientId: string) {
    const now = Math.floor(Date.now() / 1000);
    const assertion = await new SignJWT({})
      .setProtectedHeader({ alg: 'ES384', kid: 'k1' })
      .setIssuer(clientId)
      .setSubject(clientId)
      .setAudience(TOKEN_URL)
      .setExpirationTime(now + 60)
      .setJti(randomBytes(8).toString('hex'))
      .sign(key);
    const payload = new URLSearchParams({
      grant_type: 'client_credentials',
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: assertion,
    }).toString();
    return server.app.inject({
      method: 'POST',
      url: '/oauth2/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload,
    });
  }

  async function runBot(id: string, urls: string[]): Promise<string[]> {
    const code = `export async function handler(medplum, event) {
      const out = [];
      for (const url of event.input.urls) {
        try {
          const answer = await fetch(url);
          const location = answer.headers.get('location');
          if (!location) { out.push('answered ' + answer.status); continue; }
          try { await fetch(location); out.push('followed'); } catch (err) { out.push('redirect refused: ' + err.message); }
        } catch (err) { out.push(err.message); }
      }
      return out;
    }`;
    expect((await inject('PUT', `/fhir/R4/Bot/${id}`, { resourceType: 'Bot', id, name: id })).statusCode).toBeLessThan(
      300,
    );
    const deploy = await inject('POST', `/fhir/R4/Bot/${id}/$deploy`, {
      resourceType: 'Parameters',
      parameter: [
        { name: 'code', valueString: code },
        { name: 'filename', valueString: `${id}.js` },
      ],
    });
    expect(deploy.statusCode, deploy.body).toBe(200);
    const res = await server.app.inject({
      method: 'POST',
      url: `/fhir/R4/Bot/${id}/$execute`,
      headers: { ...AUTH, 'content-type': 'application/json' },
      payload: { urls },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as string[];
  }

  beforeAll(async () => {
    listener = await new CountingListener().start();
    redirectTo = `http://[::ffff:127.0.0.1]:${listener.port}/`;
    hop = createServer((req, res) => {
      hopRequests.push(`${req.method} ${req.url}`);
      hopWaiter?.(req);
      res.writeHead(302, { location: redirectTo }).end();
    });
    await new Promise<void>((resolve) => hop.listen(0, '127.0.0.1', resolve));
    hopPort = (hop.address() as AddressInfo).port;
    key = (await generateKeyPair('ES384')).privateKey;
    server = await serverApp({
      authTokens: [OPERATOR],
      outboundAllowPrivate: false,
      botFetchAllow: ['*'],
      outboundAllowTargets: [`127.0.0.1:${hopPort}`],
    });
  });
  afterAll(async () => {
    await server?.close();
    hop?.closeAllConnections();
    await new Promise((resolve) => hop?.close(resolve));
    await listener?.stop();
  });

  test('a Subscription endpoint in any loopback form is refused at create (400), nothing connects', async () => {
    for (const endpoint of loopbackForms(listener.port)) {
      const res = await inject('POST', '/fhir/R4/Subscription', {
        resourceType: 'Subscription',
        status: 'requested',
        reason: 'x',
        criteria: 'Patient',
        channel: { type: 'rest-hook', endpoint, payload: 'application/fhir+json' },
      });
      expect(res.statusCode, `${endpoint}: ${res.body}`).toBe(400);
      expect(res.body).toMatch(/private address|not an address the server calls/);
    }
    expect(listener.connections).toBe(0);
  });

  test("a ClientApplication's jwksUri in any loopback form is refused when written (400), and when read (invalid_client); nothing connects", async () => {
    for (const jwksUri of loopbackForms(listener.port)) {
      const written = await inject('POST', '/fhir/R4/ClientApplication', {
        resourceType: 'ClientApplication',
        name: 'outbound',
        status: 'active',
        jwksUri,
      });
      expect(written.statusCode, `${jwksUri}: ${written.body}`).toBe(400);
      expect(written.body).toMatch(/jwksUri.*(private address|not an address the server calls)/);
      const res = await exchange(await clientStoredEarlier(jwksUri));
      expect(res.statusCode, jwksUri).toBe(401);
      expect(res.json().error_description, jwksUri).toMatch(
        /jwksUri could not be read: .*(private address|not an address the server calls)/,
      );
    }
    expect(listener.connections).toBe(0);
  });

  test("a bot's fetch of any loopback form is refused, nothing connects", async () => {
    const urls = loopbackForms(listener.port);
    const answers = await runBot('outbound-forms', urls);
    expect(answers).toHaveLength(urls.length);
    for (const [i, answer] of answers.entries())
      expect(answer, urls[i]).toMatch(/private address|not an address the server calls/);
    expect(listener.connections).toBe(0);
  });

  test('a redirect from the allowed target to a loopback form is followed by no path', async () => {
    const target = `http://127.0.0.1:${hopPort}/moved`;
    const bot = await runBot('outbound-redirect', [target]);
    expect(bot).toEqual([expect.stringMatching(/^redirect refused: .*private address/)]);
    const jwks = await exchange(await clientWith(target));
    expect(jwks.json().error_description).toMatch(/jwksUri answered 302/);
    const sub = await inject('POST', '/fhir/R4/Subscription', {
      resourceType: 'Subscription',
      status: 'requested',
      reason: 'x',
      criteria: 'Patient',
      channel: { type: 'rest-hook', endpoint: target },
    });
    expect(sub.statusCode, sub.body).toBe(201);
    const delivered = new Promise<void>((resolve) => {
      hopWaiter = (req) => {
        if (req.method === 'POST') resolve();
      };
    });
    expect((await inject('POST', '/fhir/R4/Patient', { resourceType: 'Patient' })).statusCode).toBe(201);
    await delivered;
    // The bot's fetch and the jwksUri read, then the delivery: one request each, none after the redirect.
    expect(hopRequests.slice(0, 3)).toEqual(['GET /moved', 'GET /moved', 'POST /moved']);
    expect(listener.connections).toBe(0);
  });

  test('a Subscription stored before the guard knew the mapped form is refused at delivery, not only at create', async () => {
    const endpoint = `http://[::ffff:127.0.0.1]:${listener.port}/`;
    // Straight into the repository, past the write checks, as an older version let it be stored.
    const earlier: Subscription = {
      resourceType: 'Subscription',
      status: 'active',
      reason: 'stored earlier',
      criteria: 'Patient',
      channel: { type: 'rest-hook', endpoint },
      extension: [{ url: EXT.maxAttempts, valueInteger: 1 }],
    };
    const stored = await server.core.repository.in('default').create('Subscription', earlier);
    const id = stored.version.resource?.id as string;
    expect((await inject('POST', '/fhir/R4/Patient', { resourceType: 'Patient' })).statusCode).toBe(201);
    let after: Subscription | undefined;
    for (const started = Date.now(); after?.status !== 'error';) {
      if (Date.now() - started > 30_000) throw new Error(`the delivery did not end in error: ${JSON.stringify(after)}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
      after = (await inject('GET', `/fhir/R4/Subscription/${id}`)).json() as Subscription;
    }
    expect(after.error).toMatch(/private address/);
    expect(listener.connections).toBe(0);
  });
});
