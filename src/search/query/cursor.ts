import { fhirError } from '../../fhir/errors';

/**
 * The paging cursor: where a page ended (or began) in the search's order, as the sort key values
 * and row id of that row. Opaque to clients (base64url JSON), checked when it comes back.
 */
export interface Cursor {
  keys: unknown[];
  rid: number;
  direction: 'next' | 'previous';
}

export function encodeCursor(cursor: Cursor): string {
  return Buffer.from(
    JSON.stringify([cursor.direction === 'next' ? 'n' : 'p', cursor.rid, ...cursor.keys]),
    'utf8',
  ).toString('base64url');
}

export function decodeCursor(text: string, sortKeys: number): Cursor {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    throw fhirError('ERR_SEARCH_CURSOR', {});
  }
  if (!Array.isArray(value) || value.length !== sortKeys + 2) throw fhirError('ERR_SEARCH_CURSOR', {});
  const [direction, rid, ...keys] = value as unknown[];
  if ((direction !== 'n' && direction !== 'p') || !Number.isSafeInteger(rid)) throw fhirError('ERR_SEARCH_CURSOR', {});
  if (keys.some((k) => typeof k !== 'string' && typeof k !== 'number')) throw fhirError('ERR_SEARCH_CURSOR', {});
  return { direction: direction === 'n' ? 'next' : 'previous', rid: rid as number, keys };
}
