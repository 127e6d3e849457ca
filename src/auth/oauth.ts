import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { EphemeralStore } from '../storage/ephemeral';
import { normalizeEmail, type Accounts } from './accounts';
import { ASSERTION_TYPE, type ClientAssertions } from './client-assertion';
import { OAuthError } from './oauth-error';
import { hashPassword, verifyPassword } from './passwords';
import { sessionDetails, type SessionDetails } from './me';
import type { Principal } from './principal';
import { formatScopes, narrow, parseScopes, ScopeError, type ScopeSet } from './scopes';
import { ACCESS_TOKEN_SECONDS, digest, type TokenGrant, type TokenService } from './tokens';
import type { ClientApplicationResource } from '../fhir/admin-types';

/**
 * OAuth 2 for this server, without HTTP: people sign in with email and password and a PKCE
 * challenge (S256 only) and get a single-use code; the token endpoint exchanges it, a refresh
 * token, or a machine client's credentials (a secret, or a JWT signed with its registered key:
 * SMART Backend Services) for an access token. Every refusal is an OAuthError with its RFC 6749
 * code.
 */

export const CODE_SECONDS = 120;
const LOGIN_WINDOW_MS = 15 * 60 * 1000;
/** Failed sign-ins per account in the window before further attempts are refused. */
export const MAX_FAILED_LOGINS = 10;
/** Sign-in attempts per client address in the window. */
export const MAX_LOGINS_PER_ADDRESS = 300;
const SYSTEM_SCOPES = 'system/*.*';

export interface LoginRequest {
  email?: unknown;
  password?: unknown;
  projectId?: unknown;
  codeChallenge?: unknown;
  codeChallengeMethod?: unknown;
  /** The client the code is for (the authorize flow), and where it goes back to. */
  clientId?: string;
  redirectUri?: string;
  scope?: string;
  /** The caller's address, for rate limiting. */
  address: string;
}

interface CodeState {
  grant: TokenGrant;
  challenge: string;
  clientId?: string;
  redirectUri?: string;
}

export interface TokenAnswer {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
  refresh_token?: string;
  project: { reference: string };
  profile?: { reference: string };
  patient?: string;
}

export interface AuthDeps {
  accounts: Accounts;
  ephemeral: EphemeralStore;
  tokens: TokenService;
  assertions: ClientAssertions;
}

export class AuthService {
  constructor(private readonly deps: AuthDeps) {}

  /** Checks email and password and answers a code for the token endpoint (and the project it is for). */
  async login(request: LoginRequest): Promise<{ code: string; project: string }> {
    const email = text(request.email, 'email');
    const password = text(request.password, 'password');
    const challenge = pkce(request.codeChallenge, request.codeChallengeMethod);
    const { accounts, ephemeral } = this.deps;
    if ((await ephemeral.count('login-address', request.address, LOGIN_WINDOW_MS)) > MAX_LOGINS_PER_ADDRESS) {
      throw new OAuthError('slow_down', 'too many sign-in attempts from this address; try again later');
    }
    const account = normalizeEmail(email);
    // Counted before the password is checked, in one statement: concurrent guesses each take a
    // number, and only the first MAX_FAILED_LOGINS are ever checked (a check, then a count, let
    // any number through while the first were still being checked).
    if ((await ephemeral.count('login-failed', account, LOGIN_WINDOW_MS)) > MAX_FAILED_LOGINS) {
      throw new OAuthError('slow_down', 'too many failed sign-ins for this account; try again later');
    }
    const user = await accounts.userByEmail(email);
    const hash = user ? await accounts.passwordHash(user) : undefined;
    // The same work and the same answer whether or not the account exists.
    const valid = await verifyPassword(password, hash ?? DUMMY_HASH);
    if (!user || !hash || !valid) throw new OAuthError('invalid_grant', 'the email or password is not right');
    // The right password: the attempts counted so far were the person's own, or guesses that failed.
    await ephemeral.remove('login-failed', account);
    const grant = await this.personGrant(user, request.projectId, request.clientId);
    if (request.scope !== undefined) grant.scope = scopeText(request.scope, ['patient', 'user']);
    const code = randomBytes(32).toString('base64url');
    const state: CodeState = { grant, challenge, clientId: request.clientId, redirectUri: request.redirectUri };
    await ephemeral.put('auth-code', digest(code), JSON.stringify(state), Date.now() + CODE_SECONDS * 1000);
    return { code, project: grant.project };
  }

  /** The token endpoint: `form` is its parameters; `basic` the client's HTTP Basic credentials. */
  async token(
    form: Record<string, string | undefined>,
    basic: { id: string; secret: string } | undefined,
    tokenUrls: string[],
  ): Promise<TokenAnswer> {
    switch (form.grant_type) {
      case 'authorization_code':
        return this.codeGrant(form, basic);
      case 'refresh_token':
        return this.refreshGrant(form);
      case 'client_credentials':
        return this.clientGrant(form, basic, tokenUrls);
      case undefined:
        throw new OAuthError('invalid_request', 'grant_type is required');
      default:
        throw new OAuthError(
          'unsupported_grant_type',
          `grant_type '${String(form.grant_type).slice(0, 50)}' is not supported (authorization_code, refresh_token, client_credentials)`,
        );
    }
  }

  /** Sets a user's password (after the user is stored). */
  async setPassword(user: string, password: string): Promise<void> {
    await this.deps.accounts.setPasswordHash(user, await hashPassword(password));
  }

  /** Who a principal is, for `/auth/me` (src/auth/me.ts: Medplum's shape). */
  describe(principal: Principal): Promise<SessionDetails> {
    return sessionDetails(principal, (project, type, id) => this.deps.accounts.resource(project, type, id));
  }

  /**
   * Signs out (`/oauth2/logout`, as Medplum's): the sign-in the token belongs to is revoked, so
   * its access tokens and refresh tokens are refused from now on. An operator's configured token
   * (AUTH_TOKENS) belongs to no sign-in and stays valid: it is configuration, not a session.
   */
  async logout(principal: Principal): Promise<void> {
    if (principal.family !== undefined) await this.deps.tokens.revoke(principal.family);
  }

  /** The client an authorize request names, with its redirect URI checked (undefined: unknown client or URI). */
  async authorizeClient(clientId: string, redirectUri: string): Promise<ClientApplicationResource | undefined> {
    const found = await this.deps.accounts.client(clientId);
    if (!found || found.client.status === 'off') return undefined;
    const allowed = [found.client.redirectUri, ...(found.client.redirectUris ?? [])].filter(
      (u): u is string => typeof u === 'string',
    );
    return allowed.includes(redirectUri) ? found.client : undefined;
  }

  private async personGrant(user: string, projectId: unknown, clientId: string | undefined): Promise<TokenGrant> {
    const { accounts } = this.deps;
    let memberships = await accounts.memberships({ type: 'User', id: user });
    let wanted = typeof projectId === 'string' && projectId !== '' ? projectId : undefined;
    if (clientId !== undefined) {
      const client = await accounts.client(clientId);
      if (!client) throw new OAuthError('invalid_client', 'the client is not known');
      if (wanted !== undefined && wanted !== client.project)
        throw new OAuthError('invalid_request', 'the client belongs to another project than the one asked for');
      wanted = client.project;
    }
    if (wanted !== undefined) memberships = memberships.filter((m) => m.project === wanted);
    if (memberships.length === 0)
      throw new OAuthError(
        'access_denied',
        wanted ? 'the user is not a member of that project' : 'the user is not a member of any project',
      );
    if (memberships.length > 1) {
      const projects = [...new Set(memberships.map((m) => m.project))];
      if (projects.length > 1)
        throw new OAuthError(
          'invalid_request',
          `the user belongs to several projects; name one (projectId): ${projects.join(', ')}`,
        );
    }
    const grant = await accounts.grantOf(memberships[0]);
    if (!grant) throw new OAuthError('access_denied', 'the membership is not active');
    if (clientId !== undefined) grant.client = clientId;
    return grant;
  }

  private async codeGrant(
    form: Record<string, string | undefined>,
    basic: { id: string; secret: string } | undefined,
  ): Promise<TokenAnswer> {
    const code = form.code;
    const verifier = form.code_verifier;
    if (!code) throw new OAuthError('invalid_request', 'code is required');
    if (!verifier) throw new OAuthError('invalid_request', 'code_verifier is required (PKCE)');
    const stored = await this.deps.ephemeral.take('auth-code', digest(code));
    if (stored === undefined)
      throw new OAuthError('invalid_grant', 'the code is not valid: unknown, expired or used already');
    const state = JSON.parse(stored) as CodeState;
    if (createHash('sha256').update(verifier, 'ascii').digest('base64url') !== state.challenge) {
      throw new OAuthError('invalid_grant', 'the code_verifier does not match the code_challenge');
    }
    if (state.clientId !== undefined) {
      const clientId = form.client_id ?? basic?.id;
      if (clientId !== state.clientId) throw new OAuthError('invalid_grant', 'the code was issued to another client');
      if (form.redirect_uri !== state.redirectUri)
        throw new OAuthError('invalid_grant', 'redirect_uri differs from the one the code was issued for');
    }
    // A new sign-in: the family its refresh tokens descend from, revoked together on reuse.
    return this.issue({ ...state.grant, family: randomBytes(16).toString('base64url') }, true);
  }

  private async refreshGrant(form: Record<string, string | undefined>): Promise<TokenAnswer> {
    if (!form.refresh_token) throw new OAuthError('invalid_request', 'refresh_token is required');
    const previous = await this.deps.tokens.useRefreshToken(form.refresh_token);
    if (!previous?.membership)
      throw new OAuthError('invalid_grant', 'the refresh token is not valid: unknown, expired or used already');
    // The membership as it is now: removed, deactivated or changed since the first token.
    const current = await this.deps.accounts.grantOf({ project: previous.project, id: previous.membership });
    if (!current) throw new OAuthError('invalid_grant', 'the membership behind the refresh token is gone');
    return this.issue(
      { ...current, client: previous.client ?? current.client, scope: previous.scope, family: previous.family },
      true,
    );
  }

  private async clientGrant(
    form: Record<string, string | undefined>,
    basic: { id: string; secret: string } | undefined,
    tokenUrls: string[],
  ): Promise<TokenAnswer> {
    const { accounts, assertions } = this.deps;
    let clientId: string;
    const assertion = form.client_assertion;
    if (assertion !== undefined || form.client_assertion_type !== undefined) {
      if (form.client_assertion_type !== ASSERTION_TYPE)
        throw new OAuthError('invalid_request', `client_assertion_type must be ${ASSERTION_TYPE}`);
      if (!assertion) throw new OAuthError('invalid_request', 'client_assertion is required');
      clientId = await assertions.claimedClient(assertion);
      if (form.client_id !== undefined && form.client_id !== clientId)
        throw new OAuthError('invalid_client', 'client_id differs from the assertion');
    } else {
      const id = basic?.id ?? form.client_id;
      if (!id)
        throw new OAuthError(
          'invalid_client',
          'client authentication is required (client_secret_basic, client_secret_post or private_key_jwt)',
          401,
        );
      clientId = id;
    }
    const found = await accounts.client(clientId);
    if (!found || found.client.status === 'off') throw new OAuthError('invalid_client', 'the client is not known');
    if (assertion !== undefined) {
      await assertions.verify(assertion, clientId, found.client.jwksUri, tokenUrls);
    } else {
      const secret = basic?.secret ?? form.client_secret;
      if (!secret || !found.client.secret || !sameSecret(secret, found.client.secret))
        throw new OAuthError('invalid_client', 'the client secret is not right');
    }
    const memberships = (await accounts.memberships({ type: 'ClientApplication', id: clientId })).filter(
      (m) => m.project === found.project,
    );
    const grant: TokenGrant =
      memberships.length > 0
        ? ((await accounts.grantOf(memberships[0])) ?? { project: found.project, admin: false })
        : { project: found.project, admin: false };
    grant.client = clientId;
    grant.user = undefined;
    const allowed = found.client.defaultScope?.join(' ') || SYSTEM_SCOPES;
    grant.scope = form.scope ? narrowTo(form.scope, allowed) : allowed;
    // Each token is a sign-in of its own, so that /oauth2/logout can end it.
    grant.family = randomBytes(16).toString('base64url');
    // Backend services get no refresh token: they sign a new assertion.
    return this.issue(grant, false);
  }

  private async issue(grant: TokenGrant, refresh: boolean): Promise<TokenAnswer> {
    const { tokens } = this.deps;
    const answer: TokenAnswer = {
      access_token: await tokens.accessToken(grant),
      token_type: 'Bearer',
      expires_in: ACCESS_TOKEN_SECONDS,
      scope: grant.scope ?? 'openid user/*.*',
      project: { reference: `Project/${grant.project}` },
    };
    if (grant.profile) answer.profile = { reference: grant.profile };
    if (grant.patient) answer.patient = grant.patient;
    if (refresh) answer.refresh_token = await tokens.refreshToken(grant);
    return answer;
  }
}

/** A hash to check against when there is no account, so a missing one takes as long as a wrong password. */
const DUMMY_HASH = 'scrypt$32768$8$1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';

function text(value: unknown, name: string): string {
  if (typeof value !== 'string' || value === '') throw new OAuthError('invalid_request', `${name} is required`);
  if (value.length > 1000) throw new OAuthError('invalid_request', `${name} is too long`);
  return value;
}

/** The S256 challenge (43 to 128 base64url characters); `plain` and no challenge are refused. */
function pkce(challenge: unknown, method: unknown): string {
  if (challenge === undefined || challenge === '')
    throw new OAuthError('invalid_request', 'codeChallenge is required (PKCE with S256)');
  if (method !== 'S256')
    throw new OAuthError(
      'invalid_request',
      `code challenge method '${String(method ?? '').slice(0, 20)}' is not supported: only S256`,
    );
  if (typeof challenge !== 'string' || !/^[A-Za-z0-9\-._~]{43,128}$/.test(challenge))
    throw new OAuthError('invalid_request', 'the code challenge must be 43 to 128 base64url characters');
  return challenge;
}

/** Scopes as asked for, checked: only the contexts allowed here. */
function scopeText(scope: string, contexts: string[]): string {
  const set = parseScopesOr(scope);
  const wrong = set.resources.find((r) => !contexts.includes(r.context));
  if (wrong)
    throw new OAuthError(
      'invalid_scope',
      `'${wrong.text}' is not for this kind of sign-in (${contexts.map((c) => `${c}/`).join(' or ')} scopes)`,
    );
  return formatScopes(set);
}

/** A client's requested scopes, each of which its allowed scopes must cover. */
function narrowTo(requested: string, allowed: string): string {
  const asked = parseScopesOr(requested);
  const wrong = asked.resources.find((r) => r.context !== 'system');
  if (wrong) throw new OAuthError('invalid_scope', `'${wrong.text}': a client acting on its own gets system/ scopes`);
  const granted = narrow(asked, parseScopesOr(allowed));
  const beyond = asked.resources.find((r) => !granted.resources.includes(r));
  if (beyond)
    throw new OAuthError('invalid_scope', `'${beyond.text}' is beyond what the client may be granted (${allowed})`);
  if (asked.resources.length === 0)
    throw new OAuthError('invalid_scope', 'no resource scope asked for (system/[type].[permissions])');
  return formatScopes(asked);
}

function parseScopesOr(text: string): ScopeSet {
  try {
    return parseScopes(text);
  } catch (err) {
    if (err instanceof ScopeError) throw new OAuthError('invalid_scope', err.message);
    throw err;
  }
}

function sameSecret(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}
