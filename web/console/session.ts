/**
 * The session's credentials: a bearer token pasted by the user, kept in sessionStorage (gone when
 * the tab closes). An OAuth (SMART, PKCE) login is the other way in: its button shows only when
 * the server publishes /.well-known/smart-configuration, and `startOAuthLogin` is where that flow
 * belongs (it ends by calling `useToken`).
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

/** HOOK for the OAuth login (authorization code with PKCE): not built here. */
export function startOAuthLogin(config: SmartConfiguration): void {
  throw new Error(`OAuth login is not available in this console yet (authorization endpoint: ${config.authorization_endpoint})`);
}
