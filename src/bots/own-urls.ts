/**
 * Where a URL a bot names points: Medplum's client takes absolute URLs of its own server
 * (`medplum.get(medplum.fhirUrl('Patient'))`, `fetch(base + '/metadata')`) as readily as paths,
 * so a bot's calls are placed before they are answered: below this server's FHIR base, the REST
 * core answers as the bot; elsewhere on this server, only what anyone may read without a token
 * (the CapabilityStatement, SMART discovery, health); any other origin is not this server's.
 */

export type UrlPlace =
  /** Below the FHIR base: the REST core's path (`Patient/1`) and query string (no `?`). */
  | { kind: 'fhir'; path: string; query: string }
  /** This server, outside what the REST core answers: the path and query as requested (`/fhir/R4/metadata?mode=full`). */
  | { kind: 'server'; pathAndQuery: string }
  | { kind: 'elsewhere'; origin: string };

/** Paths below the FHIR base that the REST core does not answer: the HTTP layer does, for anyone. */
const SERVED_OUTSIDE_REST = new Set(['metadata', '.well-known/smart-configuration']);

/** Places an absolute URL against the FHIR base (`http://host:8080/fhir/R4`); undefined when it does not parse. */
export function placeUrl(url: string, base: string): UrlPlace | undefined {
  let parsed: URL;
  let own: URL;
  try {
    parsed = new URL(url);
    own = new URL(base);
  } catch {
    return undefined;
  }
  if (parsed.origin !== own.origin) return { kind: 'elsewhere', origin: parsed.origin };
  const root = own.pathname.replace(/\/+$/, '');
  const pathname = parsed.pathname;
  if (pathname === root || pathname.startsWith(`${root}/`)) {
    const path = pathname.slice(root.length).replace(/^\/+/, '');
    if (!SERVED_OUTSIDE_REST.has(path.replace(/\/+$/, '')))
      return { kind: 'fhir', path, query: parsed.search.slice(1) };
  }
  return { kind: 'server', pathAndQuery: `${pathname}${parsed.search}` };
}

/** A client call's path below the FHIR base that the HTTP layer serves (`metadata`); undefined: the REST core's. */
export function placeOfPath(path: string, base: string): UrlPlace | undefined {
  const q = path.indexOf('?');
  const bare = (q < 0 ? path : path.slice(0, q)).replace(/^\/+|\/+$/g, '');
  if (!SERVED_OUTSIDE_REST.has(bare)) return undefined;
  let root: string;
  try {
    root = new URL(base).pathname.replace(/\/+$/, '');
  } catch {
    return undefined;
  }
  return { kind: 'server', pathAndQuery: `${root}/${bare}${q < 0 ? '' : path.slice(q)}` };
}

/** Whether a client call's path is an absolute URL rather than a path below the FHIR base. */
export function isAbsoluteUrl(path: string): boolean {
  return /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(path);
}
