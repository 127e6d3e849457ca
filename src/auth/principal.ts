import type { ScopeSet } from './scopes';

/**
 * Who a request acts for, once its bearer token is read. Operators (AUTH_TOKENS, or anyone on a
 * server run without authentication) may act in any project and in the system scope; everyone
 * else acts in the one project their token names, within its scopes and access policy.
 */
export interface Principal {
  operator: boolean;
  /** The project the request acts in. */
  project: string;
  /** A project administrator: manages its memberships, client applications and access policies. */
  admin: boolean;
  /** The SMART scopes granted; undefined: not limited by scopes (operators, people without any). */
  scopes?: ScopeSet;
  /** The User a person's token is for. */
  user?: string;
  /** The ClientApplication a token was issued to (a machine's own, or the app a person used). */
  client?: string;
  /** The ProjectMembership the token stands on. */
  membership?: string;
  /** The person's (or client's) resource in the project: `Practitioner/1`, `Patient/2`. */
  profile?: string;
  /** The patient `patient/` scopes are restricted to. */
  patient?: string;
  /** The membership's access policy, when it has one: the types it allows, and which only to read. */
  policy?: PolicyRule[];
  /** The sign-in (refresh token family) a person's token belongs to: revoked together. */
  family?: string;
}

export interface PolicyRule {
  /** A resource type, or `*`. */
  type: string;
  readonly: boolean;
}

export function operatorIn(project: string): Principal {
  return { operator: true, project, admin: true };
}
