import type { Resource } from 'fhir/r4';
import type { JSONWebKeySet } from 'jose';
import type { ClientApplicationResource } from '../fhir/admin-types';
import { fhirError } from '../fhir/errors';
import { jose } from './jose';
import type { EphemeralStore } from '../storage/ephemeral';
import type { Outbound } from '../net/outbound';
import { OAuthError } from './oauth-error';

/**
 * SMART Backend Services client authentication (RFC 7523, SMART App Launch 2.x): a JWT the client
 * signs with a key it registered, either inline (a JWKS as the ClientApplication's jwksUri, in a
 * `data:application/json,...` URI) or published at its jwksUri (fetched, and kept no longer than
 * its Cache-Control says). `iss` and `sub` are the client id, `aud` the token URL, `exp` at most
 * five minutes ahead (a minute of clock tolerance either way), `jti` used once; the key is chosen
 * by `kid`.
 */

export const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
export const ASSERTION_ALGORITHMS = ['RS384', 'ES384'];
const MAX_LIFETIME_S = 300;
const TOLERANCE_S = 60;

export interface AssertionDeps {
  store: EphemeralStore;
  outbound: Outbound;
  now?: () => number;
}

interface CachedSet {
  set: JSONWebKeySet;
  until: number;
}

export class ClientAssertions {
  private readonly remote = new Map<string, CachedSet>();

  constructor(private readonly deps: AssertionDeps) {}

  /** The client id the assertion claims (before anything is verified: to find the client). */
  async claimedClient(assertion: string): Promise<string> {
    const { decodeJwt } = await jose();
    try {
      const claims = decodeJwt(assertion);
      if (typeof claims.iss !== 'string' || claims.iss !== claims.sub)
        throw new OAuthError('invalid_client', 'the client assertion must have iss and sub both the client id');
      return claims.iss;
    } catch (err) {
      if (err instanceof OAuthError) throw err;
      throw new OAuthError('invalid_client', 'the client assertion is not a JWT');
    }
  }

  /** Verifies the assertion of `clientId`, whose keys are at `jwksUri`, made for one of our token URLs; throws invalid_client. */
  async verify(assertion: string, clientId: string, jwksUri: string | undefined, tokenUrls: string[]): Promise<void> {
    if (!jwksUri) throw new OAuthError('invalid_client', 'the client has no keys registered (jwksUri)');
    const { createLocalJWKSet, decodeProtectedHeader, jwtVerify } = await jose();
    let header;
    try {
      header = decodeProtectedHeader(assertion);
    } catch {
      throw new OAuthError('invalid_client', 'the client assertion is not a JWT');
    }
    if (!ASSERTION_ALGORITHMS.includes(String(header.alg)))
      throw new OAuthError(
        'invalid_client',
        `the client assertion is signed ${String(header.alg)}; this server accepts ${ASSERTION_ALGORITHMS.join(' and ')}`,
      );
    if (typeof header.kid !== 'string')
      throw new OAuthError('invalid_client', 'the client assertion names no key (kid)');
    let keys = await this.keySet(jwksUri, false);
    if (!keys.keys.some((k) => k.kid === header.kid) && !jwksUri.startsWith('data:'))
      keys = await this.keySet(jwksUri, true);
    if (!keys.keys.some((k) => k.kid === header.kid))
      throw new OAuthError('invalid_client', `no key '${header.kid}' is registered for the client`);
    let payload;
    try {
      ({ payload } = await jwtVerify(assertion, createLocalJWKSet(keys), {
        algorithms: ASSERTION_ALGORITHMS,
        audience: tokenUrls,
        issuer: clientId,
        subject: clientId,
        clockTolerance: TOLERANCE_S,
        currentDate: this.deps.now ? new Date(this.deps.now()) : undefined,
      }));
    } catch (err) {
      throw new OAuthError('invalid_client', `the client assertion is not valid: ${(err as Error).message}`);
    }
    const now = Math.floor((this.deps.now?.() ?? Date.now()) / 1000);
    if (typeof payload.exp !== 'number') throw new OAuthError('invalid_client', 'the client assertion has no exp');
    if (payload.exp > now + MAX_LIFETIME_S + TOLERANCE_S)
      throw new OAuthError('invalid_client', `the client assertion expires more than ${MAX_LIFETIME_S} seconds ahead`);
    if (typeof payload.jti !== 'string' || payload.jti === '')
      throw new OAuthError('invalid_client', 'the client assertion has no jti');
    // Kept past its expiry (and the tolerance), so no replay can come in while it would pass.
    const first = await this.deps.store.claim(
      'client-jti',
      `${clientId}\u0001${payload.jti}`,
      '1',
      (payload.exp + TOLERANCE_S + 60) * 1000,
    );
    if (!first) throw new OAuthError('invalid_client', 'the client assertion was used before (its jti is not new)');
  }

  private async keySet(uri: string, again: boolean): Promise<JSONWebKeySet> {
    if (uri.startsWith('data:')) return parseKeySet(decodeDataUri(uri));
    const now = Date.now();
    const cached = this.remote.get(uri);
    if (cached && !again && cached.until > now) return cached.set;
    let fetched;
    try {
      fetched = await this.deps.outbound.getText(uri);
    } catch (err) {
      throw new OAuthError('invalid_client', `the client's jwksUri could not be read: ${(err as Error).message}`);
    }
    if (fetched.status !== 200)
      throw new OAuthError('invalid_client', `the client's jwksUri answered ${fetched.status}`);
    const set = parseKeySet(fetched.body);
    const seconds = cacheSeconds(fetched.headers['cache-control']);
    if (seconds > 0) this.remote.set(uri, { set, until: now + seconds * 1000 });
    else this.remote.delete(uri);
    return set;
  }
}

/**
 * The write check of a ClientApplication's jwksUri: inline keys (`data:`), or an http(s) URL the
 * outbound policy would call, so that a client aimed at the server's neighbours is refused when
 * stored (400, with the reason) rather than only when its keys are read (which refuses it too).
 */
export async function checkClientKeysUri(resource: Resource, outbound: Outbound): Promise<void> {
  if (resource.resourceType !== 'ClientApplication') return;
  const uri = (resource as ClientApplicationResource).jwksUri;
  if (uri === undefined || uri.startsWith('data:')) return;
  await outbound.check(uri).catch((err: Error) => {
    throw fhirError('ERR_RESOURCE_INVALID', {
      type: 'ClientApplication',
      path: 'ClientApplication.jwksUri',
      reason: err.message,
    });
  });
}

/** How long Cache-Control lets a response be kept (0: not at all; also when it says nothing). */
export function cacheSeconds(header: string | string[] | undefined): number {
  const text = (Array.isArray(header) ? header.join(',') : (header ?? '')).toLowerCase();
  if (/(^|,)\s*(no-store|no-cache|private)\b/.test(text)) return 0;
  const match = /(?:^|,)\s*max-age\s*=\s*"?(\d+)/.exec(text);
  return match ? Math.min(Number(match[1]), 24 * 3600) : 0;
}

function decodeDataUri(uri: string): string {
  const comma = uri.indexOf(',');
  if (comma < 0) throw new OAuthError('invalid_client', "the client's inline keys are not a data: URI");
  const meta = uri.slice(5, comma);
  const data = uri.slice(comma + 1);
  return meta.endsWith(';base64') ? Buffer.from(data, 'base64').toString('utf8') : decodeURIComponent(data);
}

function parseKeySet(text: string): JSONWebKeySet {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new OAuthError('invalid_client', "the client's keys are not JSON");
  }
  const keys = (parsed as { keys?: unknown }).keys;
  if (!Array.isArray(keys))
    throw new OAuthError('invalid_client', 'the client\'s keys are not a JWKS ({"keys": [...]})');
  return { keys: keys as JSONWebKeySet['keys'] };
}
