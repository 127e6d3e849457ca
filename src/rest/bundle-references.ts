import type { Resource } from 'fhir/r4';
import type * as writes from './writes';
import type { Entry } from './bundle';
import { clip } from './writes';
import { atEntry, entryError } from './bundle-answers';
import { queryOfString } from '../fhir/query';

/** A transaction's references between its own entries: which fullUrls a conditional query mentions, and every reference and URL string rewritten to the ids the transaction assigned. */

/** The fullUrls of other entries a query string mentions (URL-encoded or not). */
export function mentioned(query: string, fullUrls: Map<string, Entry>): string[] {
  const decoded = safeDecode(query);
  return [...fullUrls.keys()].filter((u) => decoded.includes(u));
}

export function substitute(query: string, ids: Map<string, string>): string {
  let decoded = safeDecode(query);
  for (const [fullUrl, id] of ids) decoded = decoded.split(fullUrl).join(id);
  return decoded;
}

export function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * A resource with every reference to another entry's fullUrl (in references anywhere, contained
 * resources and extensions included, and in narrative links) made `Type/id`, and every conditional
 * reference (`Patient?identifier=...`) resolved by search to the one resource it matches.
 */
export async function rewriteReferences(entry: Entry, ids: Map<string, string>, w: writes.Writes): Promise<Resource> {
  const conditional: string[] = [];
  const copy = copyWithStrings(entry.resource, (key, value) => {
    if (key === 'reference') {
      const local = ids.get(value);
      if (local) return local;
      if (/^urn:(uuid|oid):/.test(value))
        throw entryError(entry.index, `the reference ${clip(value)} names no entry of this Bundle`);
      if (/^[A-Z][A-Za-z]+\?/.test(value)) conditional.push(value);
    }
    if (key === 'div' && value.includes('urn:')) {
      let div = value;
      for (const [fullUrl, id] of ids) div = div.split(`"${fullUrl}"`).join(`"${id}"`);
      return div;
    }
    return value;
  }) as Resource;
  if (conditional.length === 0) return copy;
  const resolved = new Map<string, string>();
  for (const reference of new Set(conditional)) {
    const q = reference.indexOf('?');
    const type = reference.slice(0, q);
    const criteria = reference.slice(q + 1);
    const matches = await atEntry(entry.index, () =>
      w.deps.search.matchKeys(type, queryOfString(criteria), w.ctx, w.tx.store, 2),
    );
    if (matches.length !== 1)
      throw entryError(
        entry.index,
        `the conditional reference ${clip(reference)} matches ${matches.length} resources, not one`,
        412,
      );
    resolved.set(reference, `${type}/${matches[0].id}`);
  }
  return copyWithStrings(copy, (key, value) =>
    key === 'reference' ? (resolved.get(value) ?? value) : value,
  ) as Resource;
}

/** A deep copy of parsed JSON with each string property (not array items) passed through `map(key, value)`. */
export function copyWithStrings(value: unknown, map: (key: string, value: string) => string): unknown {
  if (Array.isArray(value))
    return value.map((item) => (typeof item === 'object' && item !== null ? copyWithStrings(item, map) : item));
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const key in value) {
    const v = (value as Record<string, unknown>)[key];
    out[key] = typeof v === 'string' ? map(key, v) : typeof v === 'object' && v !== null ? copyWithStrings(v, map) : v;
  }
  return out;
}
