/**
 * The session's credentials: a bearer token pasted by the user, or one from signing in, kept in
 * sessionStorage (gone when the tab closes). Signing in (email and password) is the server's
 * OAuth flow with PKCE: `/auth/login` with an S256 challenge answers a code, the token endpoint
 * exchanges it with the verifier; offered only when the server publishes
 * /.well-known/smart-configuration.
 */
const KEY = 'fhir-console-token';

export function currentToken(): string | undefined {
  return sessionStorage.getItem(KEY) ?? undefined;
}

export function useToken(token: string | undefined): void {
  if (token) sessionStorage.setItem(KEY, token);
  else sessionStorage.removeItem(KEY);
}

export interface SmartConfiguration {
  authorization_endpoint?: string;
  token_endpoint?: string;
}

/** The server's SMART configuration, or undefined when it publishes none (no OAuth login then). */
export async function smartConfiguration(): Promise<SmartConfiguration | undefined> {
  try {
    const res = await fetch('/.well-known/smart-configuration', { headers: { accept: 'application/json' } });
    if (!res.ok) return undefined;
    const config = (await res.json()) as SmartConfiguration;
    return config.authorization_endpoint && config.token_endpoint ? config : undefined;
  } catch {
    return undefined;
  }
}

/** Signs in with email and password (PKCE, S256); keeps the access token. Throws with the server's reason. */
export async function signIn(config: SmartConfiguration, email: string, password: string): Promise<void> {
  const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)));
  const challenge = base64url(
    new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))),
  );
  const login = await fetch('/auth/login', {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ email, password, codeChallenge: challenge, codeChallengeMethod: 'S256' }),
  });
  const answer = (await login.json()) as { code?: string; error_description?: string };
  if (!login.ok || !answer.code) throw new Error(answer.error_description ?? `sign-in failed (${login.status})`);
  const token = await fetch(config.token_endpoint as string, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code: answer.code,
      code_verifier: verifier,
    }).toString(),
  });
  const tokens = (await token.json()) as { access_token?: string; error_description?: string };
  if (!token.ok || !tokens.access_token)
    throw new Error(tokens.error_description ?? `the token request failed (${token.status})`);
  useToken(tokens.access_token);
}

function base64url(bytes: Uint8Array): string {
  let text = '';
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** `/auth/me` (Medplum's shape: the project, membership, user and profile as resources; src/auth/me.ts). */
export interface Me {
  project?: { id?: string; name?: string };
  user?: { id?: string; email?: string };
  client?: { reference?: string };
  profile?: {
    resourceType?: string;
    id?: string;
    name?: { text?: string; given?: string[]; family?: string }[] | string;
  };
  admin?: boolean;
  operator?: boolean;
  scope?: string;
}

/** Who the session's token is, in words: "operator", or the person (name, email) or client, with the project. */
export function describeSession(me: Me): string {
  const project = `project ${me.project?.name ?? me.project?.id ?? '?'}`;
  if (me.operator) return `operator (${project})`;
  const profile = me.profile?.name;
  const name =
    typeof profile === 'string'
      ? profile
      : (profile?.[0]?.text ?? [...(profile?.[0]?.given ?? []), profile?.[0]?.family].filter((p) => p).join(' '));
  const who = [name, me.user?.email && (name ? `(${me.user.email})` : me.user.email), !me.user && me.client?.reference]
    .filter((p) => p)
    .join(' ');
  return `${who || 'a token'} (${project}${me.admin ? ', administrator' : ''})`;
}
