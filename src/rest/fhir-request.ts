import type { Resource } from 'fhir/r4';

/**
 * A FHIR RESTful request and its answer, with no HTTP in them: what the HTTP routes translate to
 * and from, and what a batch or transaction entry becomes.
 */

export type FhirMethod = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';

export interface FhirRequest {
  method: FhirMethod;
  /** The path below the base, without a leading slash or query: `Patient/123/_history/2`. */
  path: string;
  /** Query parameters, each with all of its values in order. */
  query: Record<string, string[]>;
  /** The request headers the RESTful API honours (lower-case names). */
  headers: RequestHeaders;
  /** The parsed body, when there is one. */
  body?: unknown;
}

export interface RequestHeaders {
  'if-match'?: string;
  'if-none-match'?: string;
  'if-modified-since'?: string;
  'if-none-exist'?: string;
  'content-type'?: string;
}

export interface FhirResponse {
  status: number;
  /** Response headers (lower-case names): etag, last-modified, location, content-location. */
  headers: Record<string, string>;
  /** The resource answered; none for 204 and 304. */
  body?: Resource;
  /** An answer that is JSON but no resource (an operation's output shaped by `_graphql`): sent as application/json. */
  json?: unknown;
}

/** What a path below the base names. */
export type Target =
  | { kind: 'system' }
  | { kind: 'system-history' }
  | { kind: 'system-search' }
  | { kind: 'type'; type: string }
  | { kind: 'type-search'; type: string }
  | { kind: 'type-history'; type: string }
  | { kind: 'instance'; type: string; id: string }
  | { kind: 'instance-history'; type: string; id: string }
  | { kind: 'version'; type: string; id: string; vid: string }
  | { kind: 'compartment'; compartment: string; id: string; type: string }
  | { kind: 'operation'; code: string; type?: string; id?: string }
  | { kind: 'unknown' };

/** Splits a path into what it names; it does not check that types or ids exist. */
export function parsePath(path: string): Target {
  const segments = path.split('/').filter((s, i, all) => s !== '' || i < all.length - 1);
  if (segments.length === 1 && segments[0] === '') segments.pop();
  const [a, b, c, d] = segments;
  const op = segments.findIndex((s) => s.startsWith('$'));
  if (op >= 0) {
    if (op !== segments.length - 1 || op > 2) return { kind: 'unknown' };
    const code = segments[op].slice(1);
    if (op === 0) return { kind: 'operation', code };
    if (op === 1) return { kind: 'operation', code, type: a };
    return { kind: 'operation', code, type: a, id: b };
  }
  switch (segments.length) {
    case 0:
      return { kind: 'system' };
    case 1:
      if (a === '_history') return { kind: 'system-history' };
      if (a === '_search') return { kind: 'system-search' };
      return { kind: 'type', type: a };
    case 2:
      if (b === '_history') return { kind: 'type-history', type: a };
      if (b === '_search') return { kind: 'type-search', type: a };
      return { kind: 'instance', type: a, id: b };
    case 3:
      if (c === '_history') return { kind: 'instance-history', type: a, id: b };
      if (c === '*' || /^[A-Z][A-Za-z]+$/.test(c)) return { kind: 'compartment', compartment: a, id: b, type: c };
      return { kind: 'unknown' };
    case 4:
      if (c === '_history') return { kind: 'version', type: a, id: b, vid: d };
      return { kind: 'unknown' };
    default:
      return { kind: 'unknown' };
  }
}
