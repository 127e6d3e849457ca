import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { OAuthError } from '../../auth/oauth-error';
import type { AuthService } from '../../auth/oauth';
import type { SigningKeys } from '../../auth/signing-keys';
import { ASSERTION_ALGORITHMS } from '../../auth/client-assertion';
import { FormBody } from '../fhir-json';
import { FHIR_JSON, informational } from '../../fhir/outcome';
import { operatorIn } from '../../auth/principal';
import { DEFAULT_PROJECT } from '../../storage/store';

/**
 * The OAuth 2 and SMART endpoints: sign-in (`/auth/login`, and the browser flow at
 * `/oauth2/authorize`), the token endpoint, who-am-I, sign-out, the SMART discovery document and our
 * signing keys. Only translation here; src/auth decides.
 */

export interface OAuthRouteDeps {
  auth: AuthService;
  keys: SigningKeys;
  /** The FHIR base as clients address it (BASE_URL, or from the request). */
  baseUrlOf: (request: FastifyRequest) => string;
  fhirBase: string;
  /** The URLs a client assertion's `aud` may name (tokenEndpoints in src/http/base-url.ts). */
  tokenEndpoints: string[];
}

export const SMART_SCOPES = [
  'openid',
  'offline_access',
  'system/*.*',
  'system/*.rs',
  'user/*.*',
  'user/*.rs',
  'patient/*.*',
  'patient/*.rs',
];

export function registerOAuthRoutes(app: FastifyInstance, deps: OAuthRouteDeps): void {
  registerSignIn(app, deps);
  registerAuthorizePages(app, deps);
  registerSession(app, deps);
  registerDiscovery(app, deps);
}

/** Served without a token; pages for people are HTML whatever the browser accepts. */
const open = { public: true };
const page = { public: true, html: true };

/** Medplum's sign-in (`/auth/login`) and the token endpoint. */
function registerSignIn(app: FastifyInstance, deps: OAuthRouteDeps): void {
  app.post('/auth/login', { config: open }, async (request, reply) => {
    const body = fieldsOf(request.body);
    return oauth(reply, async () => {
      const { code, project } = await deps.auth.login({
        email: body.email,
        password: body.password,
        projectId: body.projectId,
        codeChallenge: body.codeChallenge,
        codeChallengeMethod: body.codeChallengeMethod,
        address: request.ip,
      });
      return { code, project: { reference: `Project/${project}` } };
    });
  });

  app.post('/oauth2/token', { config: open }, async (request, reply) => {
    const form = fieldsOf(request.body);
    return oauth(reply, async () => deps.auth.token(form, basicCredentials(request), deps.tokenEndpoints));
  });
}

/** The authorization endpoint: its sign-in page, and the redirect with a code. */
function registerAuthorizePages(app: FastifyInstance, deps: OAuthRouteDeps): void {
  app.get('/oauth2/authorize', { config: page }, async (request, reply) => {
    const q = fieldsOf(request.query);
    const checked = await checkAuthorize(deps.auth, q);
    if ('error' in checked) return sendPage(reply, 400, errorPage(checked.error));
    if (checked.redirectError) return reply.redirect(checked.redirectError, 302);
    return sendPage(reply, 200, loginPage(q, undefined));
  });

  app.post('/oauth2/authorize', { config: page }, async (request, reply) => {
    const form = fieldsOf(request.body);
    const checked = await checkAuthorize(deps.auth, form);
    if ('error' in checked) return sendPage(reply, 400, errorPage(checked.error));
    if (checked.redirectError) return reply.redirect(checked.redirectError, 302);
    try {
      const { code } = await deps.auth.login({
        email: form.email,
        password: form.password,
        codeChallenge: form.code_challenge,
        codeChallengeMethod: form.code_challenge_method,
        clientId: form.client_id,
        redirectUri: form.redirect_uri,
        scope: form.scope,
        address: request.ip,
      });
      return reply.redirect(withParams(form.redirect_uri as string, { code, state: form.state }), 302);
    } catch (err) {
      if (!(err instanceof OAuthError)) throw err;
      if (err.error === 'invalid_grant' || err.error === 'slow_down')
        return sendPage(reply, err.status, loginPage(form, err.description));
      return reply.redirect(
        withParams(form.redirect_uri as string, {
          error: err.error,
          error_description: err.description,
          state: form.state,
        }),
        302,
      );
    }
  });
}

/** Who the token's holder is, and signing out. */
function registerSession(app: FastifyInstance, deps: OAuthRouteDeps): void {
  // The auth hook has set who asks (an operator of the default project on a server without tokens).
  app.get('/auth/me', async (request) => deps.auth.describe(request.principal ?? operatorIn(DEFAULT_PROJECT)));

  // Medplum answers an OperationOutcome of "All OK"; MedplumClient.signOut() only needs a 2xx.
  app.post('/oauth2/logout', async (request, reply) => {
    await deps.auth.logout(request.principal ?? operatorIn(DEFAULT_PROJECT));
    reply.header('cache-control', 'no-store').type(FHIR_JSON);
    return informational('All OK');
  });
}

/** The signing keys and SMART's configuration (at the server's root and under the FHIR base). */
function registerDiscovery(app: FastifyInstance, deps: OAuthRouteDeps): void {
  const origin = (request: FastifyRequest) => deps.baseUrlOf(request).slice(0, -deps.fhirBase.length);
  app.get('/.well-known/jwks.json', { config: open }, async (_request, reply) => {
    reply.header('cache-control', 'public, max-age=300');
    return deps.keys.jwks();
  });

  const smart = async (request: FastifyRequest, reply: FastifyReply) => {
    const at = origin(request);
    reply.header('cache-control', 'public, max-age=300');
    return {
      jwks_uri: `${at}/.well-known/jwks.json`,
      authorization_endpoint: `${at}/oauth2/authorize`,
      token_endpoint: `${at}/oauth2/token`,
      grant_types_supported: ['authorization_code', 'client_credentials', 'refresh_token'],
      token_endpoint_auth_methods_supported: ['private_key_jwt', 'client_secret_basic', 'client_secret_post'],
      token_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGORITHMS,
      scopes_supported: SMART_SCOPES,
      response_types_supported: ['code'],
      code_challenge_methods_supported: ['S256'],
      capabilities: [
        'launch-standalone',
        'client-public',
        'client-confidential-symmetric',
        'client-confidential-asymmetric',
        'permission-v1',
        'permission-v2',
        'permission-patient',
        'permission-user',
        'permission-offline',
      ],
    };
  };
  app.get('/.well-known/smart-configuration', { config: open }, smart);
  app.get(`${deps.fhirBase}/.well-known/smart-configuration`, { config: open }, smart);
}

/** The OAuth URIs a CapabilityStatement's security extension names. */
export function oauthUris(baseUrl: string, fhirBase: string): { authorize: string; token: string } {
  const at = baseUrl.slice(0, -fhirBase.length);
  return { authorize: `${at}/oauth2/authorize`, token: `${at}/oauth2/token` };
}

/** Runs a JSON OAuth endpoint: its answer, or an RFC 6749 error body; never cached. */
async function oauth(reply: FastifyReply, work: () => Promise<object>): Promise<object> {
  reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
  try {
    return await work();
  } catch (err) {
    if (err instanceof OAuthError) {
      if (err.error === 'invalid_client') reply.header('www-authenticate', 'Basic realm="oauth"');
      return reply.code(err.status).type('application/json').send(err.body());
    }
    // Anything else (storage down) is answered as every other route answers it.
    throw err;
  }
}

type Fields = Record<string, string | undefined>;

/** Form or JSON fields (first value of each; other kinds of values are left out). */
function fieldsOf(body: unknown): Fields {
  const out: Fields = {};
  if (body instanceof FormBody) {
    for (const [name, value] of body.params) if (!(name in out)) out[name] = value;
    return out;
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return out;
  for (const [name, value] of Object.entries(body)) {
    if (typeof value === 'string') out[name] = value;
    else if (Array.isArray(value) && typeof value[0] === 'string') out[name] = value[0];
  }
  return out;
}

function basicCredentials(request: FastifyRequest): { id: string; secret: string } | undefined {
  const header = request.headers.authorization;
  const match = typeof header === 'string' ? /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header) : null;
  if (!match) return undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return undefined;
  // RFC 6749 2.3.1: both parts are form-encoded.
  const decode = (s: string) => decodeURIComponent(s.replace(/\+/g, ' '));
  try {
    return { id: decode(decoded.slice(0, colon)), secret: decode(decoded.slice(colon + 1)) };
  } catch {
    return undefined;
  }
}

/**
 * An authorize request's client and redirect URI (an error page when either is wrong: never a
 * redirect to a URI not registered), then its other parameters (an error sent back to the client).
 */
async function checkAuthorize(auth: AuthService, q: Fields): Promise<{ error: string } | { redirectError?: string }> {
  if (!q.client_id) return { error: 'client_id is required' };
  if (!q.redirect_uri) return { error: 'redirect_uri is required' };
  const client = await auth.authorizeClient(q.client_id, q.redirect_uri);
  if (!client) return { error: 'the client is not known, or redirect_uri is not one registered for it' };
  const back = (error: string, description: string) => ({
    redirectError: withParams(q.redirect_uri as string, { error, error_description: description, state: q.state }),
  });
  if (q.response_type !== 'code') return back('unsupported_response_type', 'response_type must be code');
  if (!q.code_challenge) return back('invalid_request', 'code_challenge is required (PKCE with S256)');
  if (q.code_challenge_method !== 'S256')
    return back(
      'invalid_request',
      `code_challenge_method '${(q.code_challenge_method ?? '').slice(0, 20)}' is not supported: only S256`,
    );
  return {};
}

function withParams(uri: string, params: Record<string, string | undefined>): string {
  const url = new URL(uri);
  for (const [name, value] of Object.entries(params)) if (value !== undefined) url.searchParams.set(name, value);
  return url.toString();
}

function sendPage(reply: FastifyReply, status: number, html: string): FastifyReply {
  return reply
    .code(status)
    .header('cache-control', 'no-store')
    .header(
      'content-security-policy',
      "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
    )
    .header('x-frame-options', 'DENY')
    .type('text/html; charset=utf-8')
    .send(html);
}

const PASSED = [
  'response_type',
  'client_id',
  'redirect_uri',
  'scope',
  'state',
  'code_challenge',
  'code_challenge_method',
  'aud',
  'launch',
];

function loginPage(q: Fields, message: string | undefined): string {
  const hidden = PASSED.filter((name) => q[name] !== undefined)
    .map((name) => `<input type="hidden" name="${name}" value="${escape(q[name] as string)}">`)
    .join('\n      ');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>Sign in</title>
<style>body{font-family:system-ui,sans-serif;max-width:22rem;margin:4rem auto;padding:0 1rem}label{display:block;margin:.8rem 0 .2rem}input[type=email],input[type=password]{width:100%;padding:.4rem;box-sizing:border-box}button{margin-top:1rem;padding:.5rem 1.2rem}.error{color:#a00}</style>
</head><body>
  <h1>Sign in</h1>
  ${message ? `<p class="error" role="alert">${escape(message)}</p>` : ''}
  <form method="post" action="/oauth2/authorize">
      ${hidden}
    <label for="email">Email</label><input id="email" name="email" type="email" autocomplete="username" required value="${escape(q.email ?? '')}">
    <label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
    <button type="submit">Sign in</button>
  </form>
</body></html>`;
}

function errorPage(message: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sign-in request refused</title></head><body><h1>Sign-in request refused</h1><p>${escape(message)}</p></body></html>`;
}

function escape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
