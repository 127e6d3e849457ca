import type { Criterion, ScalarType, SortKey } from './criteria';

/** The values SQL is built from: sort columns, normalized text, LIKE patterns, a URI's prefixes, and whether a criterion pins the type. */

/** The index column a sort reads per parameter type (the SQL's ORDER BY, and the in-memory sort of built-in content). */
export const SORT_COLUMN = {
  string: 'norm',
  token: 'code',
  date: 'low',
  number: 'low',
  quantity: 'low',
  reference: 'target_id',
  uri: 'value',
} as const satisfies Record<ScalarType, string>;

export function isTextSort(key: SortKey): boolean {
  return (
    key.paramType === 'id' ||
    key.paramType === 'string' ||
    key.paramType === 'token' ||
    key.paramType === 'reference' ||
    key.paramType === 'uri'
  );
}

export function normalize(text: string): string {
  return text.normalize('NFD').replace(/\p{M}/gu, '').toLowerCase();
}

export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** `http://a/b/c` -> `http://a/b/c`, `http://a/b`, `http://a` (the uris it is below). */
export function abovePrefixes(uri: string): string[] {
  const out = [uri];
  let rest = uri;
  for (;;) {
    const slash = rest.lastIndexOf('/');
    if (slash <= rest.indexOf('//') + 1 || slash < 0) break;
    rest = rest.slice(0, slash);
    out.push(rest);
  }
  return out;
}

/** Whether a criterion only lets through rows of the types searched (its index rows are of those types). */
export function restrictsType(c: Criterion): boolean {
  switch (c.kind) {
    case 'value':
      return c.modifier !== 'not';
    case 'missing':
      return !c.missing;
    case 'terminology':
      return c.modifier !== 'not-in';
    case 'composite':
    case 'chain':
    case 'compartment':
      return true;
    case 'any':
      return c.of.every(restrictsType);
    case 'all':
      return c.of.some(restrictsType);
    default:
      return false;
  }
}
