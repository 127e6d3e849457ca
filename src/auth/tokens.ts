import { createHash, randomBytes } from 'node:crypto';
import type { JWTPayload } from 'jose';
import { jose } from './jose';
import type { EphemeralStore } from '../storage/ephemeral';
import type { PolicyRule, Principal } from './principal';
import { parseScopes } from './scopes';
import type { SigningKeys } from './signing-keys';

/**
 * Access tokens are JWTs this server signs (ES256, key by `kid`), carrying what a request needs
 * to know of its caller: project, membership, profile, scopes, the launch patient, the admin flag
 * and the access policy's rules. Verifying one needs no storage read; verified tokens are kept
 * until they expire, so the hot path pays one map lookup. Refresh tokens are opaque, stored
 * hashed, and replaced at each use.
 */

export const ACCESS_TOKEN_SECONDS = 3600;
export const REFRESH_TOKEN_MS = 14 * 24 * 3600 * 1000;

/** What an access token says, beyond the registered claims. */
export interface TokenGrant {
  project: string;
  membership?: string;
  user?: string;
  client?: string;
  profile?: string;
  patient?: string;
  admin: boolean;
  scope?: string;
  policy?: PolicyRule[];
  /** The sign-in a person's tokens descend from (every refresh token and access token of one sign-in shares it). */
  family?: string;
}

interface Claims extends JWTPayload {
  project: string;
  membership?: string;
  user?: string;
  client_id?: string;
  profile?: string;
  patient?: string;
  admin?: boolean;
  scope?: string;
  pol?: [string, 0 | 1][];
  /** The sign-in (refresh token family) the token was issued in. */
  sid?: string;
}

const VERIFIED_KEPT = 10_000;

export class TokenService {
  private readonly verified = new Map<string, { principal: Principal; exp: number }>();

  constructor(
    private readonly keys: SigningKeys,
    private readonly store: EphemeralStore,
    /** The `iss` of every token, and the `aud` of tokens for no particular client. */
    readonly issuer: string,
    private readonly revocations?: Revocations,
  ) {}

  async accessToken(grant: TokenGrant): Promise<string> {
    const { kid, key, alg } = await this.keys.current();
    const claims: Claims = {
      project: grant.project,
      membership: grant.membership,
      user: grant.user,
      client_id: grant.client,
      profile: grant.profile,
      patient: grant.patient,
      admin: grant.admin || undefined,
      scope: grant.scope,
      pol: grant.policy?.map((r) => [r.type, r.readonly ? 1 : 0]),
      sid: grant.family,
    };
    const { SignJWT } = await jose();
    return new SignJWT(claims)
      .setProtectedHeader({ alg, kid, typ: 'at+jwt' })
      .setIssuer(this.issuer)
      .setSubject(grant.user ?? grant.client ?? grant.membership ?? grant.project)
      .setAudience(grant.client ?? this.issuer)
      .setIssuedAt()
      .setExpirationTime(`${ACCESS_TOKEN_SECONDS}s`)
      .setJti(randomBytes(12).toString('base64url'))
      .sign(key);
  }

  /** The principal of a valid access token of ours; undefined for anything else (401). */
  async verify(token: string): Promise<Principal | undefined> {
    const now = Date.now() / 1000;
    const known = this.verified.get(token);
    if (known) {
      if (known.exp > now) return known.principal;
      this.verified.delete(token);
    }
    let payload: Claims;
    try {
      const { decodeProtectedHeader, jwtVerify } = await jose();
      const { kid } = decodeProtectedHeader(token);
      if (typeof kid !== 'string') return undefined;
      const key = await this.keys.publicKey(kid);
      if (!key) return undefined;
      payload = (await jwtVerify(token, key, { issuer: this.issuer, typ: 'at+jwt' })).payload as Claims;
    } catch {
      return undefined;
    }
    if (typeof payload.project !== 'string' || typeof payload.exp !== 'number') return undefined;
    const principal = principalOf({
      project: payload.project,
      admin: payload.admin === true,
      membership: payload.membership,
      user: payload.user,
      client: payload.client_id,
      profile: payload.profile,
      patient: payload.patient,
      scope: payload.scope,
      policy: payload.pol?.map(([type, readonly]) => ({ type, readonly: readonly === 1 })),
      family: payload.sid,
    });
    if (this.verified.size >= VERIFIED_KEPT) this.verified.delete(this.verified.keys().next().value as string);
    this.verified.set(token, { principal, exp: payload.exp });
    return principal;
  }

  /** Ends a sign-in: its refresh tokens and its access tokens are refused from now on, in every process. */
  async revoke(family: string): Promise<void> {
    await this.revocations?.revoke(family);
  }

  /** A new refresh token standing for this grant (the grant is what its use gives again), in the grant's family. */
  async refreshToken(grant: TokenGrant): Promise<string> {
    const token = randomBytes(32).toString('base64url');
    await this.store.put('refresh-token', digest(token), JSON.stringify(grant), Date.now() + REFRESH_TOKEN_MS);
    return token;
  }

  /**
   * The grant of a refresh token, which is used up by this (at most one caller gets it). A token
   * used before is kept until it would have expired, so that its reuse is seen: whoever holds it
   * now, the client or a thief, the family is revoked (OAuth 2.0 Security BCP, 4.14.2), and with
   * it every refresh and access token of that sign-in.
   */
  async useRefreshToken(token: string): Promise<TokenGrant | undefined> {
    const key = digest(token);
    const stored = await this.store.peek('refresh-token', key);
    if (stored === undefined) return undefined;
    const grant = JSON.parse(stored) as TokenGrant;
    const first = await this.store.claim('refresh-spent', key, '1', Date.now() + REFRESH_TOKEN_MS);
    if (!first) {
      if (grant.family) await this.revocations?.revoke(grant.family);
      return undefined;
    }
    if (grant.family && (await this.revocations?.revoked(grant.family))) return undefined;
    return grant;
  }
}

/** Sign-ins whose tokens were revoked (src/auth/live-grants.ts keeps them). */
export interface Revocations {
  revoke(family: string): Promise<void>;
  revoked(family: string): Promise<boolean>;
}

/** Who acts under a grant: the principal a token carrying it stands for (a bot's executions use it without a token). */
export function principalOf(grant: TokenGrant): Principal {
  return {
    operator: false,
    project: grant.project,
    admin: grant.admin,
    membership: grant.membership,
    user: grant.user,
    client: grant.client,
    profile: grant.profile,
    patient: grant.patient,
    scopes: grant.scope !== undefined ? parseScopes(grant.scope) : undefined,
    policy: grant.policy,
    family: grant.family,
  };
}

/** Secrets are stored as their SHA-256: a database dump gives nothing usable. */
export function digest(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('base64url');
}
