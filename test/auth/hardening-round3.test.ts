import { createHash, randomBytes } from 'node:crypto';
import type { Bundle, Resource } from 'fhir/r4';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { tokenEndpoints } from '../../src/http/base-url';
import { FHIR_JSON, onBothBackends, type OpenServer } from '../helpers/server-app';

/**
 * The third hardening round's auth defects, end to end on both backends: chains and `_has` under
 * an access policy, client ids and memberships another project cannot take, the sign-in lockout
 * under concurrency, tokens of a removed membership and of a reused refresh token, a Patient's
 * membership limited to its compartment, and the `aud` of a client assertion.
 */

const OPERATOR = 'operator-token-round-three';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const PORT = 18_931;

function pkcePair() {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

interface Person {
  email: string;
  password: string;
  user: string;
  /** The project $init made for the person (they own it). */
  home: string;
}

function suite(name: string, open: () => Promise<OpenServer>) {
  describe(`hardening round three: auth (${name})`, () => {
    let server: ServerApp;
    let cleanup: () => Promise<void>;
    const marker = `Qx${randomBytes(5).toString('hex')}`;
    let owner: Person;
    let ownerToken = '';
    let a = '';
    let practitioner = '';
    const patients = { mine: '', other: '' };
    const observations = { mine: '', other: '' };

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
    const asOperatorIn = (project: string) => ({ 'x-project': project });

    /** A person with a project of their own ($init), as the server's operators make one. */
    async function person(label: string): Promise<Person> {
      const email = `${label}-${marker}@example.org`;
      const password = `${label} long passphrase`;
      const res = await inject('POST', '/fhir/R4/Project/$init', OPERATOR, {
        resourceType: 'Parameters',
        parameter: [
          { name: 'name', valueString: `${label} project` },
          { name: 'ownerEmail', valueString: email },
          { name: 'ownerPassword', valueString: password },
        ],
      });
      expect(res.statusCode, res.body).toBe(201);
      const project = res.json() as Resource & { owner: { reference: string } };
      return { email, password, user: project.owner.reference.slice('User/'.length), home: project.id as string };
    }

    async function login(who: { email: string; password: string }, projectId?: string) {
      const { verifier, challenge } = pkcePair();
      const res = await inject('POST', '/auth/login', undefined, {
        email: who.email,
        password: who.password,
        projectId,
        codeChallenge: challenge,
        codeChallengeMethod: 'S256',
      });
      return { res, verifier };
    }

    async function signIn(who: { email: string; password: string }, projectId?: string) {
      const { res, verifier } = await login(who, projectId);
      expect(res.statusCode, res.body).toBe(200);
      const token = await form('/oauth2/token', {
        grant_type: 'authorization_code',
        code: res.json().code,
        code_verifier: verifier,
      });
      expect(token.statusCode, token.body).toBe(200);
      return token.json() as { access_token: string; refresh_token: string };
    }

    /** A membership in project A for a person, written by an operator (how people join a project). */
    async function member(who: Person, fields: Record<string, unknown>): Promise<string> {
      const res = await inject(
        'POST',
        '/fhir/R4/ProjectMembership',
        OPERATOR,
        {
          resourceType: 'ProjectMembership',
          project: { reference: `Project/${a}` },
          user: { reference: `User/${who.user}` },
          profile: { reference: `Practitioner/${practitioner}` },
          ...fields,
        },
        asOperatorIn(a),
      );
      expect(res.statusCode, res.body).toBe(201);
      return res.json().id as string;
    }

    async function policy(...types: (string | { resourceType: string; criteria: string })[]): Promise<string> {
      const resource = types.map((t) => (typeof t === 'string' ? { resourceType: t } : t));
      const res = await inject('POST', '/fhir/R4/AccessPolicy', ownerToken, {
        resourceType: 'AccessPolicy',
        name: 'policy',
        resource,
      });
      expect(res.statusCode, res.body).toBe(201);
      return res.json().id as string;
    }

    async function create(resource: Resource): Promise<string> {
      const res = await inject('POST', `/fhir/R4/${resource.resourceType}`, ownerToken, resource);
      expect(res.statusCode, res.body).toBe(201);
      return res.json().id as string;
    }

    beforeAll(async () => {
      ({ server, cleanup } = await open());
      owner = await person('owner');
      a = owner.home;
      ownerToken = (await signIn(owner)).access_token;
      practitioner = await create({ resourceType: 'Practitioner', name: [{ family: 'Staff' }] } as Resource);
      patients.mine = await create({
        resourceType: 'Patient',
        name: [{ family: `Self${marker}` }],
        identifier: [{ system: 'urn:ssn', value: `111-${marker}` }],
      } as Resource);
      patients.other = await create({
        resourceType: 'Patient',
        name: [{ family: `Secret${marker}` }],
        identifier: [{ system: 'urn:ssn', value: `999-${marker}` }],
      } as Resource);
      observations.mine = await create({
        resourceType: 'Observation',
        status: 'final',
        code: { text: marker },
        subject: { reference: `Patient/${patients.mine}` },
        focus: [{ reference: `Patient/${patients.other}` }],
      } as Resource);
      observations.other = await create({
        resourceType: 'Observation',
        status: 'final',
        code: { text: marker },
        subject: { reference: `Patient/${patients.other}` },
      } as Resource);
    });
    afterAll(async () => {
      await cleanup?.();
    });

    test('60 concurrent wrong passwords: at most 10 are checked, the rest wait (429)', async () => {
      const target = await person('lockout');
      const answers = await Promise.all(
        Array.from({ length: 60 }, (_, i) => login({ email: target.email, password: `guess number ${i}` })),
      );
      const checked = answers.filter(({ res }) => res.statusCode === 400 && res.json().error === 'invalid_grant');
      const waited = answers.filter(({ res }) => res.statusCode === 429 && res.json().error === 'slow_down');
      expect(checked.length).toBeLessThanOrEqual(10);
      expect(checked.length + waited.length).toBe(60);
      // The right password waits too, until the window ends.
      expect((await login(target)).res.statusCode).toBe(429);
    });

    test("a member's access token stops working when the membership is deleted or deactivated", async () => {
      for (const change of ['delete', 'deactivate'] as const) {
        const leaver = await person(`leaver-${change}`);
        const membership = await member(leaver, {});
        const token = (await signIn(leaver, a)).access_token;
        expect((await inject('GET', `/fhir/R4/Patient/${patients.mine}`, token)).statusCode).toBe(200);
        const removed =
          change === 'delete'
            ? await inject('DELETE', `/fhir/R4/ProjectMembership/${membership}`, ownerToken)
            : await inject('PUT', `/fhir/R4/ProjectMembership/${membership}`, ownerToken, {
                resourceType: 'ProjectMembership',
                id: membership,
                active: false,
                project: { reference: `Project/${a}` },
                user: { reference: `User/${leaver.user}` },
                profile: { reference: `Practitioner/${practitioner}` },
              });
        expect(removed.statusCode, removed.body).toBeLessThan(300);
        const after = await inject('GET', `/fhir/R4/Patient/${patients.mine}`, token);
        expect(after.statusCode, change).toBe(401);
      }
    });

    test('reusing a rotated refresh token revokes its whole sign-in: refresh and access tokens', async () => {
      const holder = await person('refresher');
      const first = await signIn(holder);
      const rotated = await form('/oauth2/token', { grant_type: 'refresh_token', refresh_token: first.refresh_token });
      expect(rotated.statusCode, rotated.body).toBe(200);
      const second = rotated.json() as { access_token: string; refresh_token: string };
      expect((await inject('GET', '/auth/me', second.access_token)).statusCode).toBe(200);
      // The first refresh token again (a thief, or the client after one): refused, and the family with it.
      const reuse = await form('/oauth2/token', { grant_type: 'refresh_token', refresh_token: first.refresh_token });
      expect(reuse.json().error).toBe('invalid_grant');
      const descendant = await form('/oauth2/token', {
        grant_type: 'refresh_token',
        refresh_token: second.refresh_token,
      });
      expect(descendant.json().error).toBe('invalid_grant');
      expect((await inject('GET', '/auth/me', second.access_token)).statusCode).toBe(401);
      expect((await inject('GET', '/auth/me', first.access_token)).statusCode).toBe(401);
      // Another sign-in of the same person is not touched.
      expect((await inject('GET', '/auth/me', (await signIn(holder)).access_token)).statusCode).toBe(200);
    });

    test("a Patient's membership without an access policy reaches only that patient's compartment", async () => {
      const patient = await person('patient');
      await member(patient, { profile: { reference: `Patient/${patients.mine}` } });
      const token = (await signIn(patient, a)).access_token;
      expect((await inject('GET', `/fhir/R4/Patient/${patients.mine}`, token)).statusCode).toBe(200);
      expect((await inject('GET', `/fhir/R4/Observation/${observations.mine}`, token)).statusCode).toBe(200);
      const other = await inject('GET', `/fhir/R4/Patient/${patients.other}`, token);
      expect(other.statusCode).toBe(404);
      expect(other.body).not.toContain(marker);
      expect((await inject('GET', `/fhir/R4/Observation/${observations.other}`, token)).statusCode).toBe(404);
      expect((await inject('GET', `/fhir/R4/Patient?_summary=count`, token)).json().total).toBe(1);
      expect((await inject('GET', `/fhir/R4/Observation?code:text=${marker}&_summary=count`, token)).json().total).toBe(
        1,
      );
      // Its own Observation points at the other patient (focus): a chain does not reach past the compartment.
      const chained = await inject(
        'GET',
        `/fhir/R4/Observation?focus:Patient.name=Secret${marker}&_summary=count`,
        token,
      );
      expect(chained.statusCode, chained.body).toBe(200);
      expect(chained.json().total).toBe(0);
      expect((await inject('GET', `/fhir/R4/Practitioner/${practitioner}`, token)).statusCode).toBe(403);
      const write = await inject('POST', '/fhir/R4/Observation', token, {
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'x' },
        subject: { reference: `Patient/${patients.other}` },
      });
      expect(write.statusCode).toBe(403);
    });

    describe("another project cannot take a client's id or a person", () => {
      let squatter: Person;
      let squatterToken = '';
      let client: { id: string; secret: string };
      const credentials = (id: string, secret: string) =>
        form('/oauth2/token', { grant_type: 'client_credentials', client_id: id, client_secret: secret });
      beforeAll(async () => {
        squatter = await person('squatter');
        squatterToken = (await signIn(squatter)).access_token;
        const clients = (await inject('GET', '/fhir/R4/ClientApplication', ownerToken)).json() as Bundle;
        client = clients.entry?.[0]?.resource as unknown as { id: string; secret: string };
        expect((await credentials(client.id, client.secret)).statusCode).toBe(200);
      });

      test("a ClientApplication with another project's client id is refused (409); the owner's client keeps working", async () => {
        const squat = await inject('PUT', `/fhir/R4/ClientApplication/${client.id}`, squatterToken, {
          resourceType: 'ClientApplication',
          id: client.id,
          status: 'active',
          secret: 'squatted secret value',
        });
        expect(squat.statusCode, squat.body).toBe(409);
        const inBundle = await inject('POST', '/fhir/R4', squatterToken, {
          resourceType: 'Bundle',
          type: 'transaction',
          entry: [
            {
              resource: { resourceType: 'ClientApplication', id: client.id, status: 'active' },
              request: { method: 'PUT', url: `ClientApplication/${client.id}` },
            },
          ],
        });
        expect(inBundle.statusCode).toBe(409);
        expect((await credentials(client.id, client.secret)).statusCode).toBe(200);
        // Its own clients are the project's to change as before.
        const own = (await inject('GET', '/fhir/R4/ClientApplication', squatterToken)).json() as Bundle;
        const mine = own.entry?.[0]?.resource as Resource;
        expect(
          (await inject('PUT', `/fhir/R4/ClientApplication/${mine.id}`, squatterToken, { ...mine, name: 'renamed' }))
            .statusCode,
        ).toBe(200);
      });

      test('a copy stored before ids were unique never stands in for the owner at sign-in', async () => {
        // Written under the repository, as data from before the rule would be.
        const copy = {
          resourceType: 'ClientApplication',
          id: client.id,
          status: 'active',
          secret: 'squatted secret value',
          meta: { lastUpdated: new Date().toISOString() },
        } as Resource;
        const stored = await server.core.repository.store.write({
          project: squatter.home,
          type: 'ClientApplication',
          id: client.id,
          resource: copy,
          lastUpdated: copy.meta?.lastUpdated as string,
          index: server.core.extractor.extract(copy),
        });
        expect(stored.status).toBe('ok');
        expect((await credentials(client.id, client.secret)).statusCode).toBe(200);
        expect((await credentials(client.id, 'squatted secret value')).statusCode).toBe(401);
      });

      test("a membership for another project's person is refused (403); their sign-in is untouched", async () => {
        const attach = await inject('POST', '/fhir/R4/ProjectMembership', squatterToken, {
          resourceType: 'ProjectMembership',
          project: { reference: `Project/${squatter.home}` },
          user: { reference: `User/${owner.user}` },
          profile: { reference: `Practitioner/${practitioner}` },
        });
        expect(attach.statusCode, attach.body).toBe(403);
        // A client of another project (the owner's project's second client).
        const elsewhere = await create({
          resourceType: 'ClientApplication',
          status: 'active',
          name: 'second',
        } as Resource);
        const foreignClient = await inject('POST', '/fhir/R4/ProjectMembership', squatterToken, {
          resourceType: 'ProjectMembership',
          project: { reference: `Project/${squatter.home}` },
          user: { reference: `ClientApplication/${elsewhere}` },
          profile: { reference: `ClientApplication/${elsewhere}` },
        });
        expect(foreignClient.statusCode, foreignClient.body).toBe(403);
        // Without projectId: the person's one project, as before.
        const { res } = await login(owner);
        expect(res.statusCode, res.body).toBe(200);
        expect(res.json().project.reference).toBe(`Project/${a}`);
        // Its own members' memberships are the project's to change as before.
        const own = (
          await inject('GET', `/fhir/R4/ProjectMembership?user=User/${squatter.user}`, squatterToken)
        ).json() as Bundle;
        const membership = own.entry?.[0]?.resource as Resource;
        expect(
          (await inject('PUT', `/fhir/R4/ProjectMembership/${membership.id}`, squatterToken, membership)).statusCode,
        ).toBe(200);
      });
    });

    test("a client assertion's aud is checked against the server's own token URL, never the request's Host", async () => {
      const keys = await generateKeyPair('ES384');
      const jwk = { ...(await exportJWK(keys.publicKey)), kid: 'k1', alg: 'ES384' };
      const id = await create({
        resourceType: 'ClientApplication',
        status: 'active',
        jwksUri: `data:application/json,${encodeURIComponent(JSON.stringify({ keys: [jwk] }))}`,
      } as Resource);
      const exchange = async (aud: string, host?: string) => {
        const signed = await new SignJWT({})
          .setProtectedHeader({ alg: 'ES384', kid: 'k1' })
          .setIssuer(id)
          .setSubject(id)
          .setAudience(aud)
          .setExpirationTime(Math.floor(Date.now() / 1000) + 120)
          .setJti(randomBytes(8).toString('hex'))
          .sign(keys.privateKey);
        const fields = {
          grant_type: 'client_credentials',
          scope: 'system/Patient.rs',
          client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
          client_assertion: signed,
        };
        return form('/oauth2/token', fields, host ? { host } : {});
      };
      // An assertion made for another server's token endpoint, replayed here with that server's name as Host.
      const forged = await exchange('http://victim.example.org/oauth2/token', 'victim.example.org');
      expect(forged.statusCode, forged.body).toBe(401);
      expect(forged.json().error).toBe('invalid_client');
      expect((await exchange('http://localhost:80/oauth2/token')).statusCode).toBe(401);
      // Made for this server, as it listens (no BASE_URL): accepted whatever the Host.
      expect((await exchange(`http://127.0.0.1:${PORT}/oauth2/token`, 'victim.example.org')).statusCode).toBe(200);
      expect((await exchange(`http://localhost:${PORT}/oauth2/token`)).statusCode).toBe(200);
    });

    test("$import-package is the operators': a project administrator's token is refused (docs/terminology.md)", async () => {
      const res = await inject('POST', '/fhir/R4/$import-package', ownerToken, {
        resourceType: 'Parameters',
        parameter: [{ name: 'package', valueBase64Binary: 'AAAA' }],
      });
      expect(res.statusCode, res.body).toBe(403);
      expect(res.json().issue[0].code).toBe('forbidden');
    });

    test('a person in several projects is asked to choose one, and signs in to each of their own', async () => {
      const both = await person('two-projects');
      await member(both, {});
      const unnamed = (await login(both)).res;
      expect(unnamed.statusCode).toBe(400);
      expect(unnamed.json().error).toBe('invalid_request');
      expect(unnamed.json().error_description).toContain(both.home);
      expect(unnamed.json().error_description).toContain(a);
      for (const project of [both.home, a]) {
        const named = (await login(both, project)).res;
        expect(named.statusCode, named.body).toBe(200);
        expect(named.json().project.reference).toBe(`Project/${project}`);
      }
    });

    describe('chained search and _has under an access policy', () => {
      let observationsOnly = '';
      let withPatients = '';
      let someCriteria = '';
      beforeAll(async () => {
        const reader = await person('obs-reader');
        await member(reader, { accessPolicy: { reference: `AccessPolicy/${await policy('Observation')}` } });
        observationsOnly = (await signIn(reader, a)).access_token;
        const both = await person('obs-patient-reader');
        await member(both, { accessPolicy: { reference: `AccessPolicy/${await policy('Observation', 'Patient')}` } });
        withPatients = (await signIn(both, a)).access_token;
        const some = await person('obs-some-patients');
        await member(some, {
          accessPolicy: {
            reference: `AccessPolicy/${await policy('Observation', { resourceType: 'Patient', criteria: 'Patient?organization=Organization/x' })}`,
          },
        });
        someCriteria = (await signIn(some, a)).access_token;
      });

      test("a policy's criteria, which this server does not enforce, allow nothing of the type: not through a chain either", async () => {
        expect((await inject('GET', `/fhir/R4/Patient/${patients.other}`, someCriteria)).statusCode).toBe(403);
        const chained = await inject(
          'GET',
          `/fhir/R4/Observation?subject:Patient.name=Secret${marker}&_summary=count`,
          someCriteria,
        );
        expect(chained.statusCode, chained.body).toBe(403);
      });

      test.each([
        ['a chain through a forbidden type', `Observation?subject:Patient.name=Secret${marker}&_summary=count`],
        [
          'a chain without a type, every target forbidden',
          `Observation?subject.identifier=urn:ssn|999-${marker}&_summary=count`,
        ],
        ['a two-level chain', `Observation?subject:Patient.general-practitioner:Practitioner.name=x&_summary=count`],
        ['_has of a forbidden type', `Observation?_has:DiagnosticReport:result:status=final`],
        ['a chain inside _has', `Observation?_has:Observation:has-member:subject:Patient.name=Secret${marker}`],
      ])('%s is refused (403), whatever the data', async (_, url) => {
        const res = await inject('GET', `/fhir/R4/${url}`, observationsOnly);
        expect(res.statusCode, res.body).toBe(403);
        expect(res.json().issue[0].code).toBe('forbidden');
        expect(res.body).not.toContain(patients.other);
      });

      test('a chain through a permitted type still answers', async () => {
        const res = await inject(
          'GET',
          `/fhir/R4/Observation?subject:Patient.name=Secret${marker}&_summary=count`,
          withPatients,
        );
        expect(res.statusCode, res.body).toBe(200);
        expect(res.json().total).toBe(1);
        // Observations alone answer as before.
        expect(
          (await inject('GET', `/fhir/R4/Observation?code:text=${marker}&_summary=count`, observationsOnly)).json()
            .total,
        ).toBe(2);
      });
    });
  });
}

onBothBackends(suite, { authTokens: [OPERATOR], port: PORT });

describe("the token URLs a client assertion's aud may name", () => {
  const basePath = '/fhir/R4';
  test.each([
    [
      'BASE_URL, whatever the listen address',
      { baseUrl: 'https://tx.example.org/fhir/R4', host: '0.0.0.0', port: 8080 },
      ['https://tx.example.org/oauth2/token'],
    ],
    [
      'a loopback address',
      { host: '127.0.0.1', port: 8080 },
      ['http://localhost:8080/oauth2/token', 'http://127.0.0.1:8080/oauth2/token', 'http://[::1]:8080/oauth2/token'],
    ],
    [
      'a named address',
      { host: 'fhir.internal', port: 80 },
      ['http://fhir.internal/oauth2/token', 'http://fhir.internal:80/oauth2/token'],
    ],
    [
      'a wildcard address',
      { host: '0.0.0.0', port: 8080, hostname: 'box1' },
      [
        'http://localhost:8080/oauth2/token',
        'http://127.0.0.1:8080/oauth2/token',
        'http://[::1]:8080/oauth2/token',
        'http://box1:8080/oauth2/token',
      ],
    ],
  ])('%s', (_, options, expected) => {
    expect(tokenEndpoints({ basePath, ...options })).toEqual(expected);
  });
});
