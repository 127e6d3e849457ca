import { createHash, randomBytes } from 'node:crypto';
import type { Resource } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { freshSchema, hasPostgres, POSTGRES_SKIP_REASON, type TestSchema } from '../helpers/postgres';
import { FHIR_JSON, serverApp } from '../helpers/server-app';

/**
 * Two servers over one PostgreSQL database, as two processes would be (each its own caches and
 * its own listening connection): the sign-in lockout, a deleted membership and a revoked sign-in
 * hold in both, whichever one the change went through.
 */

const OPERATOR = 'operator-token-two-servers';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

if (!hasPostgres) test.skip(POSTGRES_SKIP_REASON, () => undefined);

describe.skipIf(!hasPostgres)('auth across two servers over one PostgreSQL', () => {
  let schema: TestSchema;
  let one: ServerApp;
  let two: ServerApp;
  const marker = randomBytes(5).toString('hex');

  const inject = (
    server: ServerApp,
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

  async function person(label: string) {
    const email = `${label}-${marker}@example.org`;
    const password = `${label} long passphrase`;
    const res = await inject(one, 'POST', '/fhir/R4/Project/$init', OPERATOR, {
      resourceType: 'Parameters',
      parameter: [
        { name: 'name', valueString: label },
        { name: 'ownerEmail', valueString: email },
        { name: 'ownerPassword', valueString: password },
      ],
    });
    expect(res.statusCode, res.body).toBe(201);
    const project = res.json() as Resource & { owner: { reference: string } };
    return { email, password, user: project.owner.reference.slice('User/'.length), project: project.id as string };
  }

  function login(server: ServerApp, who: { email: string; password: string }, projectId?: string) {
    const verifier = randomBytes(32).toString('base64url');
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    return {
      verifier,
      res: inject(server, 'POST', '/auth/login', undefined, {
        email: who.email,
        password: who.password,
        projectId,
        codeChallenge: challenge,
        codeChallengeMethod: 'S256',
      }),
    };
  }

  async function signIn(server: ServerApp, who: { email: string; password: string }, projectId?: string) {
    const { verifier, res } = login(server, who, projectId);
    const code = (await res).json().code as string;
    const token = await server.app.inject({
      method: 'POST',
      url: '/oauth2/token',
      headers: FORM,
      payload: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier }).toString(),
    });
    expect(token.statusCode, token.body).toBe(200);
    return token.json() as { access_token: string; refresh_token: string };
  }

  beforeAll(async () => {
    schema = await freshSchema();
    one = await serverApp({ databaseUrl: schema.url, authTokens: [OPERATOR] });
    two = await serverApp({ databaseUrl: schema.url, authTokens: [OPERATOR] });
  });
  afterAll(async () => {
    await one?.close();
    await two?.close();
    await schema?.drop();
  });

  test('60 concurrent wrong passwords over both servers: at most 10 are checked', async () => {
    const target = await person('lockout');
    const answers = await Promise.all(
      Array.from(
        { length: 60 },
        (_, i) => login(i % 2 ? one : two, { email: target.email, password: `guess ${i}` }).res,
      ),
    );
    const checked = answers.filter((res) => res.json().error === 'invalid_grant');
    expect(checked.length).toBeLessThanOrEqual(10);
    expect(answers.filter((res) => res.statusCode === 429)).toHaveLength(60 - checked.length);
  });

  test('a membership deleted through one server: its token is refused by the other', async () => {
    const owner = await person('owner');
    const ownerToken = (await signIn(one, owner)).access_token;
    const member = await person('member');
    const practitioner = await inject(one, 'POST', '/fhir/R4/Practitioner', ownerToken, {
      resourceType: 'Practitioner',
    });
    const membership = await inject(
      one,
      'POST',
      '/fhir/R4/ProjectMembership',
      OPERATOR,
      {
        resourceType: 'ProjectMembership',
        project: { reference: `Project/${owner.project}` },
        user: { reference: `User/${member.user}` },
        profile: { reference: `Practitioner/${practitioner.json().id}` },
      },
      { 'x-project': owner.project },
    );
    expect(membership.statusCode, membership.body).toBe(201);
    const token = (await signIn(two, member, owner.project)).access_token;
    // Known to the second server (its answer kept) before the change.
    expect((await inject(two, 'GET', '/fhir/R4/Practitioner', token)).statusCode).toBe(200);
    expect(
      (await inject(one, 'DELETE', `/fhir/R4/ProjectMembership/${membership.json().id}`, ownerToken)).statusCode,
    ).toBeLessThan(300);
    await vi.waitFor(
      async () => expect((await inject(two, 'GET', '/fhir/R4/Practitioner', token)).statusCode).toBe(401),
      { timeout: 10_000, interval: 20 },
    );
  });

  test("a refresh token reused through one server: the sign-in's access token is refused by the other", async () => {
    const holder = await person('holder');
    const first = await signIn(one, holder);
    expect((await inject(two, 'GET', '/auth/me', first.access_token)).statusCode).toBe(200);
    const refresh = (server: ServerApp) =>
      server.app.inject({
        method: 'POST',
        url: '/oauth2/token',
        headers: FORM,
        payload: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: first.refresh_token }).toString(),
      });
    expect((await refresh(one)).statusCode).toBe(200);
    expect((await refresh(one)).json().error).toBe('invalid_grant');
    await vi.waitFor(
      async () => expect((await inject(two, 'GET', '/auth/me', first.access_token)).statusCode).toBe(401),
      { timeout: 10_000, interval: 20 },
    );
  });
});
