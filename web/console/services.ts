import type { Resource } from 'fhir/r4';
import { fhir } from './api';
import { byId, h, onSubmit, show } from './dom';
import { smartConfiguration } from './session';

/** JWK members only a private key has: pasting one would publish the secret half. */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k'];

interface KeySet {
  keys: Record<string, unknown>[];
}

/**
 * The Admin tab's "Register a backend service" form (SMART Backend Services, docs/security.md):
 * a ClientApplication whose jwksUri holds the service's public key inline (a data: URI) or names
 * where it publishes its keys, with the scopes it may ask for. The answer tells the service what
 * its assertions must say (iss/sub and aud).
 */
export function backendServiceForm(onRegistered: () => void): void {
  const out = byId('service-result');
  onSubmit(byId<HTMLFormElement>('service-form'), out, async ({ name, keys, jwksUrl, scopes }) => {
    const jwksUri = keysUri(keys, jwksUrl);
    const client = await fhir<Resource>('ClientApplication', {
      method: 'POST',
      headers: { 'content-type': 'application/fhir+json' },
      body: JSON.stringify({
        resourceType: 'ClientApplication',
        name,
        status: 'active',
        jwksUri,
        defaultScope: scopes.split(/\s+/).filter((s) => s),
      }),
    });
    const tokenUrl = (await smartConfiguration())?.token_endpoint ?? `${location.origin}/oauth2/token`;
    show(
      out,
      h('p', { class: 'ok', id: 'service-client' }, `Registered: ClientApplication/${client.id}`),
      h(
        'p',
        { class: 'hint' },
        `Its assertions say iss and sub "${client.id}", aud "${tokenUrl}", and the key's kid in the header; it posts them to ${tokenUrl} with grant_type=client_credentials.`,
      ),
    );
    onRegistered();
  });
}

/** The jwksUri: the pasted key (a JWK or a JWKS) inline, or the URL where the service publishes its keys. */
function keysUri(pasted: string, url: string): string {
  if (pasted && url) throw new Error('Give the public key or the JWKS URL, not both.');
  if (url) {
    if (!url.startsWith('https://')) throw new Error('The JWKS URL must be https://');
    return url;
  }
  if (!pasted)
    throw new Error("Give the service's public key (a JWK or a JWKS), or the URL where it publishes its JWKS.");
  let parsed: unknown;
  try {
    parsed = JSON.parse(pasted);
  } catch {
    throw new Error('The public key is not JSON (a JWK {"kty": ...} or a JWKS {"keys": [...]}).');
  }
  const set: KeySet = Array.isArray((parsed as KeySet).keys)
    ? (parsed as KeySet)
    : { keys: [parsed as Record<string, unknown>] };
  for (const key of set.keys) {
    if (typeof key?.kty !== 'string') throw new Error('Each key needs its "kty" (RSA or EC).');
    if (PRIVATE_MEMBERS.some((member) => member in key))
      throw new Error('This is a private key: paste the public one (without "d" and the other private members).');
    if (typeof key.kid !== 'string') throw new Error('Each key needs a "kid": the service names it in its assertions.');
  }
  return `data:application/json,${encodeURIComponent(JSON.stringify(set))}`;
}
