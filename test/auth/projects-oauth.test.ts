import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Bundle, CapabilityStatement, OperationOutcome, Patient, Resource } from 'fhir/r4';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { routesOf } from '../../src/app';
import type { ServerApp } from '../../src/bootstrap';
import { FHIR_JSON, onBothBackends, type OpenServer } from '../helpers/server-app';

/**
 * Projects and OAuth end to end, on both backends: Project/$init, a person's sign-in with PKCE,
 * tenant isolation over every route, machine clients (secret, private_key_jwt with inline and
 * published keys), SMART scopes, and the OAuth errors.
 */

const OPERATOR = 'operator-token-0123456789';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

function pkcePair() {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

function suite(name: string, open: () => Promise<OpenServer>) {
  describe(`projects and OAuth (${name})`, () => {
    let server: ServerApp;
    let cleanup: () => Promise<void>;
    let jwksServer: Server;
    let jwksBody = '{"keys":[]}';
    let jwksUrl = '';
    const marker = `Zzyzx${randomBytes(6).toString('hex')}`;
    const a = {
      project: '',
      token: '',
      refresh: '',
      patient: '',
      observation: '',
      email: `owner-a-${marker}@example.org`,
      password: 'correct horse battery',
    };
    const b = { project: '', token: '', email: `owner-b-${marker}@example.org`, password: 'another good password' };

    const inject = (
      method: string,
      url: string,
      token?: string,
      payload?: unknown,
      headers: Record<string, string> = {},
    ) =>
      server.app.inject({
        method: method as 'GET',
        url,
        headers: {
          ...(payload !== undefined ? FHIR_JSON : {}),
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...headers,
        },
        payload: payload as object,
      });
    const form = (url: string, fields: Record<string, string>, headers: Record<string, string> = {}) =>
      server.app.inject({
        method: 'POST',
        url,
        headers: { ...FORM, ...headers },
        payload: new URLSearchParams(fields).toString(),
      });

    async function init(name: string, email: string, password: string) {
      const res = await inject('POST', '/fhir/R4/Project/$init', OPERATOR, {
        resourceType: 'Parameters',
        parameter: [
          { name: 'name', valueString: name },
          { name: 'ownerEmail', valueString: email },
          { name: 'ownerPassword', valueString: password },
        ],
      });
      expect(res.statusCode, res.body).toBe(201);
      const project = res.json() as Resource;
      expect(project.resourceType).toBe('Project');
      expect(res.headers.location).toContain(`/Project/${project.id}/_history/1`);
      return project.id as string;
    }

    async function signIn(email: string, password: string) {
      const { verifier, challenge } = pkcePair();
      const login = await inject('POST', '/auth/login', undefined, {
        email,
        password,
        codeChallenge: challenge,
        codeChallengeMethod: 'S256',
      });
      expect(login.statusCode, login.body).toBe(200);
      const token = await form('/oauth2/token', {
        grant_type: 'authorization_code',
        code: login.json().code,
        code_verifier: verifier,
      });
      expect(token.statusCode, token.body).toBe(200);
      expect(token.headers['cache-control']).toBe('no-store');
      return token.json() as {
        access_token: string;
        refresh_token: string;
        expires_in: number;
        token_type: string;
        project: { reference: string };
      };
    }

    beforeAll(async () => {
      ({ server, cleanup } = await open());
      jwksServer = createServer((req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=60' });
        res.end(jwksBody);
      });
      await new Promise<void>((resolve) => jwksServer.listen(0, '127.0.0.1', resolve));
      jwksUrl = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/jwks.json`;

      a.project = await init('Project A', a.email, a.password);
      b.project = await init('Project B', b.email, b.password);
      const tokenA = await signIn(a.email, a.password);
      expect(tokenA.token_type).toBe('Bearer');
      expect(tokenA.project.reference).toBe(`Project/${a.project}`);
      a.token = tokenA.access_token;
      a.refresh = tokenA.refresh_token;
      b.token = (await signIn(b.email, b.password)).access_token;

      const patient = await inject('POST', '/fhir/R4/Patient', a.token, {
        resourceType: 'Patient',
        name: [{ family: marker }],
        identifier: [{ system: 'urn:test', value: marker }],
      });
      expect(patient.statusCode, patient.body).toBe(201);
      a.patient = patient.json().id;
      const observation = await inject('POST', '/fhir/R4/Observation', a.token, {
        resourceType: 'Observation',
        status: 'final',
        code: { text: marker },
        subject: { reference: `Patient/${a.patient}` },
      });
      expect(observation.statusCode, observation.body).toBe(201);
      a.observation = observation.json().id;
    });
    afterAll(async () => {
      await new Promise((resolve) => jwksServer?.close(resolve));
      await cleanup?.();
    });

    test('the owner sees what they wrote: read, search, include, revinclude, _has, history', async () => {
      expect((await inject('GET', `/fhir/R4/Patient/${a.patient}`, a.token)).statusCode).toBe(200);
      const search = (
        await inject('GET', `/fhir/R4/Observation?_include=Observation:subject&code:text=${marker}`, a.token)
      ).json() as Bundle;
      expect(search.entry?.map((e) => e.resource?.resourceType).sort()).toEqual(['Observation', 'Patient']);
      const has = (
        await inject('GET', `/fhir/R4/Patient?_has:Observation:subject:status=final`, a.token)
      ).json() as Bundle;
      expect(has.entry?.map((e) => e.resource?.id)).toEqual([a.patient]);
      expect((await inject('GET', `/fhir/R4/Patient/${a.patient}/_history`, a.token)).json().total).toBe(1);
      const me = await inject('GET', '/auth/me', a.token);
      expect(me.json()).toMatchObject({ project: { resourceType: 'Project', id: a.project }, admin: true });
      const project = await inject('GET', `/fhir/R4/Project/${a.project}`, a.token);
      expect(project.statusCode).toBe(200);
    });

    test('another project sees nothing of it: read, vread, search, _include, _revinclude, _has, history, operations', async () => {
      const notFound = [
        `/fhir/R4/Patient/${a.patient}`,
        `/fhir/R4/Patient/${a.patient}/_history/1`,
        `/fhir/R4/Patient/${a.patient}/_history`,
        `/fhir/R4/Observation/${a.observation}`,
        `/fhir/R4/Project/${a.project}`,
      ];
      for (const url of notFound) {
        const res = await inject('GET', url, b.token);
        expect(res.statusCode, url).toBe(404);
        expect(res.body).not.toContain(marker);
      }
      const empty = [
        '/fhir/R4/Patient',
        `/fhir/R4/Patient?family=${marker}`,
        `/fhir/R4/Observation?_include=Observation:subject`,
        `/fhir/R4/Patient?_revinclude=Observation:subject`,
        `/fhir/R4/Patient?_has:Observation:subject:status=final`,
        `/fhir/R4/Patient/${a.patient}/Observation`,
        '/fhir/R4/Patient/_history',
        '/fhir/R4/_history',
        '/fhir/R4/Project',
        '/fhir/R4/ProjectMembership',
      ];
      for (const url of empty) {
        const res = await inject('GET', url, b.token);
        expect(res.statusCode, url).toBe(200);
        // The entries (the self link repeats the query).
        const entries = JSON.stringify((res.json() as Bundle).entry ?? []);
        expect(entries, url).not.toContain(marker);
        expect(entries, url).not.toContain(a.patient);
      }
      const validate = await inject('POST', `/fhir/R4/Patient/${a.patient}/$validate`, b.token, {
        resourceType: 'Parameters',
        parameter: [],
      });
      expect(validate.statusCode).toBe(404);
      // Writing over it creates B's own resource under that id; A's is untouched.
      const put = await inject('PUT', `/fhir/R4/Patient/${a.patient}`, b.token, {
        resourceType: 'Patient',
        id: a.patient,
        active: false,
      });
      expect(put.statusCode).toBe(201);
      const mine = (await inject('GET', `/fhir/R4/Patient/${a.patient}`, a.token)).json();
      expect(mine.name[0].family).toBe(marker);
      expect((await inject('DELETE', `/fhir/R4/Patient/${a.patient}`, b.token)).statusCode).toBe(204);
      expect((await inject('GET', `/fhir/R4/Patient/${a.patient}`, a.token)).statusCode).toBe(200);
    });

    test("every route, called with another project's token, shows nothing of the project's data", async () => {
      // Not /oauth2/logout: it would end b's sign-in for the tests after (medplum-client.test.ts tests it).
      const routes = routesOf(server.app).filter(
        (r) => r.method !== 'HEAD' && r.method !== 'OPTIONS' && r.url !== '/oauth2/logout',
      );
      // Every route family (an operation on every type is one route per level, its type a parameter).
      expect(routes.length).toBeGreaterThan(80);
      for (const route of routes) {
        const url = route.url
          .replace(/:id\b/, a.patient)
          .replace(/:type\b/, 'Patient')
          .replace(/:vid\b/, '1')
          .replace(/:compartment\b/, 'Patient')
          .replace(/\*$/, '');
        const payload =
          route.method === 'GET' || route.method === 'DELETE'
            ? undefined
            : { resourceType: 'Parameters', parameter: [] };
        const res = await inject(route.method, url, b.token, payload);
        expect(res.statusCode, `${route.method} ${url}: ${res.body.slice(0, 200)}`).toBeLessThan(500);
        expect(res.body, `${route.method} ${url}`).not.toContain(marker);
      }
    });

    test('operators act in the default project, or in the one X-Project names', async () => {
      expect((await inject('GET', `/fhir/R4/Patient/${a.patient}`, OPERATOR)).statusCode).toBe(404);
      expect(
        (await inject('GET', `/fhir/R4/Patient/${a.patient}`, OPERATOR, undefined, { 'x-project': a.project }))
          .statusCode,
      ).toBe(200);
      const unknown = await inject('GET', '/fhir/R4/Patient', OPERATOR, undefined, { 'x-project': 'no-such-project' });
      expect(unknown.statusCode).toBe(400);
      expect(unknown.json().issue[0].details.text).toContain('no-such-project');
      // A member cannot name another project.
      expect((await inject('GET', '/fhir/R4/Patient', b.token, undefined, { 'x-project': a.project })).statusCode).toBe(
        400,
      );
      // Members cannot create projects.
      const init = await inject('POST', '/fhir/R4/Project/$init', a.token, {
        resourceType: 'Parameters',
        parameter: [{ name: 'name', valueString: 'x' }],
      });
      expect(init.statusCode).toBe(403);
    });

    test('$init refuses bad input and creates nothing', async () => {
      const before = (await inject('GET', '/fhir/R4/Project?_summary=count', OPERATOR)).json().total;
      for (const parameter of [
        [],
        [
          { name: 'name', valueString: 'x' },
          { name: 'ownerPassword', valueString: 'long enough password' },
        ],
        [
          { name: 'name', valueString: 'x' },
          { name: 'owner', valueReference: { reference: 'Patient/1' } },
        ],
        [
          { name: 'name', valueString: 'x' },
          { name: 'ownerEmail', valueString: a.email },
          { name: 'ownerPassword', valueString: 'long enough password' },
        ],
        [
          { name: 'name', valueString: 'x' },
          { name: 'ownerEmail', valueString: 'new@example.org' },
          { name: 'ownerPassword', valueString: 'short' },
        ],
      ]) {
        const res = await inject('POST', '/fhir/R4/Project/$init', OPERATOR, { resourceType: 'Parameters', parameter });
        expect(res.statusCode, JSON.stringify(parameter)).toBe(400);
        expect(res.json().resourceType).toBe('OperationOutcome');
      }
      const bundled = await inject('POST', '/fhir/R4', OPERATOR, {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [{ resource: { resourceType: 'Project', name: 'x' }, request: { method: 'POST', url: 'Project' } }],
      });
      expect(bundled.statusCode).toBe(400);
      expect((await inject('GET', '/fhir/R4/Project?_summary=count', OPERATOR)).json().total).toBe(before);
      // Passwords are never in a resource.
      const users = await inject('GET', `/fhir/R4/User?email=${encodeURIComponent(a.email)}`, OPERATOR);
      expect(users.json().total).toBe(1);
      expect(users.body).not.toMatch(/scrypt|password/i);
      const smuggled = await inject('POST', '/fhir/R4/User', OPERATOR, {
        resourceType: 'User',
        email: 'x@example.org',
        passwordHash: 'x',
      });
      expect(smuggled.statusCode).toBe(400);
    });

    test('sign-in errors: wrong password, plain PKCE, a reused code, a wrong verifier; refresh tokens rotate', async () => {
      const { verifier, challenge } = pkcePair();
      const wrong = await inject('POST', '/auth/login', undefined, {
        email: a.email,
        password: 'not it at all',
        codeChallenge: challenge,
        codeChallengeMethod: 'S256',
      });
      expect(wrong.statusCode).toBe(400);
      expect(wrong.json().error).toBe('invalid_grant');
      const plain = await inject('POST', '/auth/login', undefined, {
        email: a.email,
        password: a.password,
        codeChallenge: challenge,
        codeChallengeMethod: 'plain',
      });
      expect(plain.statusCode).toBe(400);
      expect(plain.json().error).toBe('invalid_request');
      const login = await inject('POST', '/auth/login', undefined, {
        email: a.email,
        password: a.password,
        codeChallenge: challenge,
        codeChallengeMethod: 'S256',
      });
      const code = login.json().code as string;
      const bad = await form('/oauth2/token', {
        grant_type: 'authorization_code',
        code,
        code_verifier: pkcePair().verifier,
      });
      expect(bad.json().error).toBe('invalid_grant');
      // The failed attempt used the code up: a code is good for one try.
      const reused = await form('/oauth2/token', { grant_type: 'authorization_code', code, code_verifier: verifier });
      expect(reused.statusCode).toBe(400);
      expect(reused.json().error).toBe('invalid_grant');

      const refreshed = await form('/oauth2/token', { grant_type: 'refresh_token', refresh_token: a.refresh });
      expect(refreshed.statusCode, refreshed.body).toBe(200);
      expect((await inject('GET', `/fhir/R4/Patient/${a.patient}`, refreshed.json().access_token)).statusCode).toBe(
        200,
      );
      const again = await form('/oauth2/token', { grant_type: 'refresh_token', refresh_token: a.refresh });
      expect(again.json().error).toBe('invalid_grant');
      // That reuse revoked the sign-in's every token (test/auth/hardening-round3.test.ts): sign in again.
      expect((await inject('GET', `/fhir/R4/Patient/${a.patient}`, a.token)).statusCode).toBe(401);
      const fresh = await signIn(a.email, a.password);
      a.token = fresh.access_token;
      a.refresh = fresh.refresh_token;
      expect((await form('/oauth2/token', { grant_type: 'password' })).json().error).toBe('unsupported_grant_type');
      expect((await inject('GET', '/fhir/R4/Patient', 'not.a.token')).statusCode).toBe(401);
    });

    test('failed sign-ins are limited per account: after 10, even the right password waits', async () => {
      const { challenge } = pkcePair();
      const email = `limited-${marker}@example.org`;
      const attempt = (password: string) =>
        inject('POST', '/auth/login', undefined, {
          email,
          password,
          codeChallenge: challenge,
          codeChallengeMethod: 'S256',
        });
      for (let i = 0; i < 10; i++) expect((await attempt(`wrong password ${i}`)).json().error).toBe('invalid_grant');
      const limited = await attempt('wrong password 11');
      expect(limited.statusCode).toBe(429);
      expect(limited.json().error).toBe('slow_down');
    });

    test("the project's default client gets a token with its secret (client_secret_basic and _post)", async () => {
      const clients = (await inject('GET', '/fhir/R4/ClientApplication', a.token)).json() as Bundle;
      const client = clients.entry?.[0]?.resource as Resource & { secret: string };
      expect(client?.secret).toBeTruthy();
      const basic = Buffer.from(`${client.id}:${client.secret}`).toString('base64');
      const viaBasic = await form(
        '/oauth2/token',
        { grant_type: 'client_credentials' },
        { authorization: `Basic ${basic}` },
      );
      expect(viaBasic.statusCode, viaBasic.body).toBe(200);
      expect(viaBasic.json().refresh_token).toBeUndefined();
      expect((await inject('GET', `/fhir/R4/Patient/${a.patient}`, viaBasic.json().access_token)).statusCode).toBe(200);
      const viaPost = await form('/oauth2/token', {
        grant_type: 'client_credentials',
        client_id: client.id as string,
        client_secret: client.secret,
      });
      expect(viaPost.statusCode).toBe(200);
      const wrong = await form('/oauth2/token', {
        grant_type: 'client_credentials',
        client_id: client.id as string,
        client_secret: 'wrong',
      });
      expect(wrong.statusCode).toBe(401);
      expect(wrong.json().error).toBe('invalid_client');
      // Project B's admin cannot see A's clients.
      expect((await inject('GET', `/fhir/R4/ClientApplication/${client.id}`, b.token)).statusCode).toBe(404);
    });

    test("the project's default client reads and searches but may not write until an administrator widens its defaultScope", async () => {
      const clients = (await inject('GET', '/fhir/R4/ClientApplication', a.token)).json() as Bundle;
      const client = clients.entry?.[0]?.resource as Resource & { secret: string; defaultScope?: string[] };
      expect(client.defaultScope).toEqual(['system/*.rs']);
      const credentials = {
        grant_type: 'client_credentials',
        client_id: client.id as string,
        client_secret: client.secret,
      };
      const issued = await form('/oauth2/token', credentials);
      expect(issued.statusCode, issued.body).toBe(200);
      expect(issued.json().scope).toBe('system/*.rs');
      const token = issued.json().access_token as string;
      expect((await inject('GET', `/fhir/R4/Patient/${a.patient}`, token)).statusCode).toBe(200);
      expect((await inject('GET', '/fhir/R4/Observation', token)).statusCode).toBe(200);
      const patient: Patient = { resourceType: 'Patient', name: [{ family: 'ByDefaultClient' }] };
      const created = await inject('POST', '/fhir/R4/Patient', token, patient);
      expect(created.statusCode, created.body).toBe(403);
      expect((created.json() as OperationOutcome).issue[0].code).toBe('forbidden');
      expect(
        (await inject('PUT', `/fhir/R4/Patient/${a.patient}`, token, { resourceType: 'Patient', id: a.patient }))
          .statusCode,
      ).toBe(403);
      expect((await inject('DELETE', `/fhir/R4/Observation/${a.observation}`, token)).statusCode).toBe(403);
      // Asking for more than the default gives nothing.
      expect((await form('/oauth2/token', { ...credentials, scope: 'system/Patient.c' })).json().error).toBe(
        'invalid_scope',
      );

      // The administrator widens it (docs/security.md): the client's next token writes.
      const widened = await inject('PUT', `/fhir/R4/ClientApplication/${client.id}`, a.token, {
        ...client,
        defaultScope: ['system/*.cruds'],
      });
      expect(widened.statusCode, widened.body).toBe(200);
      const writer = (await form('/oauth2/token', credentials)).json().access_token as string;
      expect((await inject('POST', '/fhir/R4/Patient', writer, patient)).statusCode).toBe(201);
    });

    describe('SMART Backend Services (private_key_jwt)', () => {
      let es: { id: string; key: CryptoKey; kid: string };
      let rs: { id: string; key: CryptoKey; kid: string };
      // The server's own name at its configured port (PORT, 8080 here), not the Host a request sends.
      const tokenUrl = 'http://localhost:8080/oauth2/token';

      async function client(jwksUri: string): Promise<string> {
        const res = await inject('POST', '/fhir/R4/ClientApplication', a.token, {
          resourceType: 'ClientApplication',
          name: 'backend',
          status: 'active',
          jwksUri,
        });
        expect(res.statusCode, res.body).toBe(201);
        return res.json().id;
      }
      function assertion(
        c: { id: string; key: CryptoKey; kid: string },
        alg: string,
        claims: { aud?: string; exp?: number; jti?: string; kid?: string } = {},
      ) {
        const now = Math.floor(Date.now() / 1000);
        return new SignJWT({})
          .setProtectedHeader({ alg, kid: claims.kid ?? c.kid, typ: 'JWT' })
          .setIssuer(c.id)
          .setSubject(c.id)
          .setAudience(claims.aud ?? tokenUrl)
          .setExpirationTime(claims.exp ?? now + 300)
          .setJti(claims.jti ?? randomBytes(8).toString('hex'))
          .sign(c.key);
      }
      const exchange = (signed: string, scope = 'system/Patient.rs') =>
        form('/oauth2/token', {
          grant_type: 'client_credentials',
          scope,
          client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
          client_assertion: signed,
        });

      beforeAll(async () => {
        const esKeys = await generateKeyPair('ES384');
        const esJwk: JWK = { ...(await exportJWK(esKeys.publicKey)), kid: 'es-1', alg: 'ES384' };
        es = {
          id: await client(`data:application/json,${encodeURIComponent(JSON.stringify({ keys: [esJwk] }))}`),
          key: esKeys.privateKey,
          kid: 'es-1',
        };
        const rsKeys = await generateKeyPair('RS384');
        const rsJwk: JWK = { ...(await exportJWK(rsKeys.publicKey)), kid: 'rs-1', alg: 'RS384' };
        jwksBody = JSON.stringify({ keys: [rsJwk] });
        rs = { id: await client(jwksUrl), key: rsKeys.privateKey, kid: 'rs-1' };
      });

      test('an ES384 client with inline keys and an RS384 client with a jwksUri each get a token', async () => {
        for (const [c, alg] of [
          [es, 'ES384'],
          [rs, 'RS384'],
        ] as const) {
          const res = await exchange(await assertion(c, alg));
          expect(res.statusCode, res.body).toBe(200);
          expect(res.json()).toMatchObject({ token_type: 'Bearer', scope: 'system/Patient.rs', expires_in: 3600 });
        }
      });

      test('system/Patient.rs reads and searches Patients, and is refused writing them or reading Observations', async () => {
        const token = (await exchange(await assertion(es, 'ES384'))).json().access_token as string;
        expect((await inject('GET', `/fhir/R4/Patient/${a.patient}`, token)).statusCode).toBe(200);
        expect((await inject('GET', `/fhir/R4/Patient?family=${marker}`, token)).json().total).toBe(1);
        const write = await inject('POST', '/fhir/R4/Patient', token, { resourceType: 'Patient' });
        expect(write.statusCode).toBe(403);
        expect(write.json().issue[0].code).toBe('forbidden');
        expect(
          (await inject('PUT', `/fhir/R4/Patient/${a.patient}`, token, { resourceType: 'Patient', id: a.patient }))
            .statusCode,
        ).toBe(403);
        expect((await inject('GET', `/fhir/R4/Observation/${a.observation}`, token)).statusCode).toBe(403);
        expect((await inject('GET', '/fhir/R4/Observation', token)).statusCode).toBe(403);
        // An included Observation is left out rather than shown.
        const included = (
          await inject('GET', `/fhir/R4/Patient?_id=${a.patient}&_revinclude=Observation:subject`, token)
        ).json() as Bundle;
        expect(included.entry?.map((e) => e.resource?.resourceType)).toEqual(['Patient']);
        // Nothing of this client's project's administration.
        expect((await inject('GET', '/fhir/R4/ClientApplication', token)).statusCode).toBe(403);
        // A transaction is checked entry by entry: nothing is written.
        const bundle = await inject('POST', '/fhir/R4', token, {
          resourceType: 'Bundle',
          type: 'transaction',
          entry: [{ resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } }],
        });
        expect(bundle.statusCode).toBe(403);
      });

      test('a replayed jti, an expired assertion, a wrong aud, an unknown kid, a scope beyond the client: refused, no token', async () => {
        const jti = randomBytes(8).toString('hex');
        expect((await exchange(await assertion(es, 'ES384', { jti }))).statusCode).toBe(200);
        const replay = await exchange(await assertion(es, 'ES384', { jti }));
        expect(replay.statusCode).toBe(401);
        expect(replay.json().error).toBe('invalid_client');
        expect(replay.json().error_description).toMatch(/jti/);
        const expired = await exchange(await assertion(es, 'ES384', { exp: Math.floor(Date.now() / 1000) - 3600 }));
        expect(expired.json().error).toBe('invalid_client');
        const tooLong = await exchange(await assertion(es, 'ES384', { exp: Math.floor(Date.now() / 1000) + 3600 }));
        expect(tooLong.json().error).toBe('invalid_client');
        const aud = await exchange(await assertion(rs, 'RS384', { aud: 'https://elsewhere.example.org/token' }));
        expect(aud.json().error).toBe('invalid_client');
        const kid = await exchange(await assertion(rs, 'RS384', { kid: 'unknown-kid' }));
        expect(kid.json().error).toBe('invalid_client');
        expect(kid.json().error_description).toMatch(/unknown-kid/);
        const scope = await exchange(await assertion(es, 'ES384'), 'user/Patient.read');
        expect(scope.statusCode).toBe(400);
        expect(scope.json().error).toBe('invalid_scope');
      });
    });

    test('discovery: SMART configuration, our keys, and the security the CapabilityStatement declares', async () => {
      for (const url of ['/.well-known/smart-configuration', '/fhir/R4/.well-known/smart-configuration']) {
        const res = await inject('GET', url);
        expect(res.statusCode).toBe(200);
        expect(res.json()).toMatchObject({
          token_endpoint: 'http://localhost:80/oauth2/token',
          authorization_endpoint: 'http://localhost:80/oauth2/authorize',
          token_endpoint_auth_methods_supported: expect.arrayContaining(['private_key_jwt', 'client_secret_basic']),
          token_endpoint_auth_signing_alg_values_supported: ['RS384', 'ES384'],
          code_challenge_methods_supported: ['S256'],
        });
      }
      const jwks = (await inject('GET', '/.well-known/jwks.json')).json() as { keys: JWK[] };
      expect(jwks.keys.length).toBeGreaterThan(0);
      expect(jwks.keys[0]).not.toHaveProperty('d');
      const statement = (await inject('GET', '/fhir/R4/metadata')).json() as CapabilityStatement;
      const security = statement.rest?.[0].security;
      expect(security?.service?.[0].coding?.[0].code).toBe('SMART-on-FHIR');
      expect(security?.extension?.[0].url).toBe(
        'http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris',
      );
    });

    test('the browser flow: /oauth2/authorize signs in and redirects back with a code', async () => {
      const created = await inject('POST', '/fhir/R4/ClientApplication', a.token, {
        resourceType: 'ClientApplication',
        name: 'app',
        status: 'active',
        redirectUri: 'https://app.example.org/callback',
      });
      const clientId = created.json().id as string;
      const { verifier, challenge } = pkcePair();
      const params = {
        response_type: 'code',
        client_id: clientId,
        redirect_uri: 'https://app.example.org/callback',
        scope: 'user/*.rs',
        state: 'xyz',
        code_challenge: challenge,
        code_challenge_method: 'S256',
      };
      const page = await server.app.inject({
        method: 'GET',
        url: `/oauth2/authorize?${new URLSearchParams(params)}`,
        headers: { accept: 'text/html' },
      });
      expect(page.statusCode).toBe(200);
      expect(page.headers['content-type']).toContain('text/html');
      expect(page.body).toContain('name="password"');
      const plain = await server.app.inject({
        method: 'GET',
        url: `/oauth2/authorize?${new URLSearchParams({ ...params, code_challenge_method: 'plain' })}`,
      });
      expect(plain.statusCode).toBe(302);
      expect(plain.headers.location).toContain('error=invalid_request');
      const foreign = await server.app.inject({
        method: 'GET',
        url: `/oauth2/authorize?${new URLSearchParams({ ...params, redirect_uri: 'https://evil.example.org/' })}`,
      });
      expect(foreign.statusCode).toBe(400);
      const signedIn = await form('/oauth2/authorize', { ...params, email: a.email, password: a.password });
      expect(signedIn.statusCode, signedIn.body).toBe(302);
      const back = new URL(signedIn.headers.location as string);
      expect(back.searchParams.get('state')).toBe('xyz');
      const token = await form('/oauth2/token', {
        grant_type: 'authorization_code',
        code: back.searchParams.get('code') as string,
        code_verifier: verifier,
        client_id: clientId,
        redirect_uri: params.redirect_uri,
      });
      expect(token.statusCode, token.body).toBe(200);
      expect(token.json().scope).toBe('user/*.rs');
      const user = token.json().access_token as string;
      expect((await inject('GET', `/fhir/R4/Patient/${a.patient}`, user)).statusCode).toBe(200);
      expect((await inject('POST', '/fhir/R4/Patient', user, { resourceType: 'Patient' })).statusCode).toBe(403);
    });
  });
}

onBothBackends(suite, { authTokens: [OPERATOR], outboundAllowPrivate: true });
