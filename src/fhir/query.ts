/**
 * Search and conditional criteria as a record keyed by the names a client sent. The record has no
 * prototype, so that a name such as `toString`, `constructor` or `__proto__` is a key like any
 * other: on a plain object it found the member every object inherits (and `push` on a function
 * threw, or `__proto__` replaced the record's prototype and the parameter vanished).
 */
export type QueryRecord = Record<string, string[]>;

/** A record with no inherited members. */
export function emptyQuery(): QueryRecord {
  return Object.create(null) as QueryRecord;
}

/** Name-value pairs, each name's values in order. */
export function queryOfPairs(pairs: Iterable<[string, string]>): QueryRecord {
  const query = emptyQuery();
  for (const [name, value] of pairs) (query[name] ??= []).push(value);
  return query;
}

/** A query string (`identifier=a|b&active=true`, with or without `?`). */
export function queryOfString(text: string): QueryRecord {
  return queryOfPairs(new URLSearchParams(text.startsWith('?') ? text.slice(1) : text));
}
