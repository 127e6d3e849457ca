import { createHash, randomBytes } from 'node:crypto';
import type { Bundle, OperationOutcome, Resource } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { FHIR_JSON, onBothBackends, type OpenServer } from '../helpers/server-app';

/**
 * The sign-in and sign-out calls MedplumClient makes, sent as it sends them, on both backends:
 * `processCode()` (the code, the token, then `GET /auth/me`, whose `profile` it resolves to and
 * keeps for `getProfile()`, with `project` and `membership` for `getProject()` and
 * `getProjectMembership()`), and `signOut()` (`POST /oauth2/logout`, after which neither the
 * access token nor the refresh token of that sign-in works).
 */

const OPERATOR = 'operator-token-medplum-client';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

function pkcePair() {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

interface Token {
  access_token: string;
  refresh_token?: string;
  profile?: { reference: string };
}

function suite(name: string, open: () => Promise<OpenServer>) {
  describe(`MedplumClient sign-in and sign-out (${name})`, () => {
    let server: ServerApp;
    let cleanup: () => Promise<void>;
    const email = `medplum-${randomBytes(5).toString('hex')}@example.org`;
    const password = 'medplum client passphrase';
    let project = '';
    let user = '';

    const inject = (method: string, url: string, token?: string, payload?: unknown) =>
      server.app.inject({
        method: method as 'GET',
        url,
        headers: {
          ...(payload !== undefined ? FHIR_JSON : {}),
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        payload: payload as object,
      });
    const form = (fields: Record<string, string>) =>
      server.app.inject({
        method: 'POST',
        url: '/oauth2/token',
        headers: FORM,
        payload: new URLSearchParams(fields).toString(),
      });

    /** startLogin() then processCode()'s token request, as MedplumClient sends them. */
    async function signIn(): Promise<Token> {
      const { verifier, challenge } = pkcePair();
      const login = await inject('POST', '/auth/login', undefined, {
        email,
        password,
        codeChallenge: challenge,
        codeChallengeMethod: 'S256',
      });
      expect(login.statusCode, login.body).toBe(200);
      const token = await form({ grant_type: 'authorization_code', code: login.json().code, code_verifier: verifier });
      expect(token.statusCode, token.body).toBe(200);
      return token.json() as Token;
    }

    /** signOut(): MedplumClient posts an empty JSON body. */
    const signOut = (token: string) => inject('POST', '/oauth2/logout', token, {});

    beforeAll(async () => {
      ({ server, cleanup } = await open());
      const res = await inject('POST', '/fhir/R4/Project/$init', OPERATOR, {
        resourceType: 'Parameters',
        parameter: [
          { name: 'name', valueString: 'Medplum client project' },
          { name: 'ownerEmail', valueString: email },
          { name: 'ownerPassword', valueString: password },
        ],
      });
      expect(res.statusCode, res.body).toBe(201);
      const created = res.json() as Resource & { owner: { reference: string } };
      project = created.id as string;
      user = created.owner.reference.slice('User/'.length);
    });
    afterAll(async () => {
      await cleanup?.();
    });

    test('GET /auth/me answers the profile resource itself, and the project, membership and user as resources', async () => {
      const token = await signIn();
      const res = await inject('GET', '/auth/me', token.access_token);
      expect(res.statusCode, res.body).toBe(200);
      const me = res.json() as Record<string, Record<string, unknown>>;
      // What processCode() resolves to and getProfile() answers.
      expect(me.profile).toMatchObject({ resourceType: 'Practitioner', telecom: [{ system: 'email', value: email }] });
      expect(`Practitioner/${me.profile.id}`).toBe(token.profile?.reference);
      expect(me.project).toMatchObject({ resourceType: 'Project', id: project, name: 'Medplum client project' });
      expect(me.membership).toMatchObject({
        resourceType: 'ProjectMembership',
        user: { reference: `User/${user}` },
        profile: token.profile,
        admin: true,
      });
      expect(typeof me.membership.id).toBe('string');
      expect(me.user).toMatchObject({ resourceType: 'User', id: user, email });
      expect(me.config).toEqual({ resourceType: 'UserConfiguration' });
    });

    test('POST /oauth2/logout ends the sign-in: its access token and refresh token are refused; another sign-in goes on', async () => {
      const other = await signIn();
      const token = await signIn();
      expect((await inject('GET', '/fhir/R4/Patient?_summary=count', token.access_token)).statusCode).toBe(200);
      const out = await signOut(token.access_token);
      expect(out.statusCode, out.body).toBe(200);
      expect((out.json() as OperationOutcome).resourceType).toBe('OperationOutcome');
      expect((await inject('GET', '/auth/me', token.access_token)).statusCode).toBe(401);
      expect((await inject('GET', '/fhir/R4/Patient?_summary=count', token.access_token)).statusCode).toBe(401);
      const refreshed = await form({ grant_type: 'refresh_token', refresh_token: token.refresh_token as string });
      expect(refreshed.statusCode).toBe(400);
      expect(refreshed.json().error).toBe('invalid_grant');
      expect((await inject('GET', '/auth/me', other.access_token)).statusCode).toBe(200);
    });

    test("a client's client_credentials token: /auth/me answers its ClientApplication without the secret; /oauth2/logout ends it", async () => {
      const owner = await signIn();
      const clients = (await inject('GET', '/fhir/R4/ClientApplication', owner.access_token)).json() as Bundle;
      const client = clients.entry?.[0]?.resource as Resource & { secret: string };
      const issued = await form({
        grant_type: 'client_credentials',
        client_id: client.id as string,
        client_secret: client.secret,
      });
      expect(issued.statusCode, issued.body).toBe(200);
      const token = (issued.json() as Token).access_token;
      const me = await inject('GET', '/auth/me', token);
      expect(me.statusCode).toBe(200);
      // The client's profile is its ClientApplication, never with its secret.
      expect(me.json().profile).toMatchObject({ resourceType: 'ClientApplication', id: client.id });
      expect(me.json().profile.secret).toBeUndefined();
      expect((await signOut(token)).statusCode).toBe(200);
      expect((await inject('GET', '/auth/me', token)).statusCode).toBe(401);
    });

    test('without a token, /oauth2/logout is refused (401)', async () => {
      expect(
        (await server.app.inject({ method: 'POST', url: '/oauth2/logout', headers: FHIR_JSON, payload: {} }))
          .statusCode,
      ).toBe(401);
    });
  });
}

onBothBackends(suite, { authTokens: [OPERATOR] });
