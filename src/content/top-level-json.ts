import {
  CLOSE_BRACE,
  CLOSE_BRACKET,
  COLON,
  COMMA,
  escapedAt,
  OPEN_BRACE,
  OPEN_BRACKET,
  QUOTE,
} from '../fhir/json-chars';

/**
 * Reads chosen top-level members of a JSON object without parsing the rest: the other members'
 * values are skipped by scanning for where they end (strings, nesting), which costs a fraction
 * of building them. For holding thousands of stored resources known by their canonical metadata
 * (url, version, ...) while their content is parsed only when first used.
 */
export function topLevelMembers(text: string, names: ReadonlySet<string>): Record<string, unknown> {
  const found: Record<string, unknown> = {};
  let at = skipSpace(text, 0);
  if (text.charCodeAt(at) !== OPEN_BRACE) throw new SyntaxError('not a JSON object');
  at = skipSpace(text, at + 1);
  if (text.charCodeAt(at) === CLOSE_BRACE) return found;
  for (;;) {
    if (text.charCodeAt(at) !== QUOTE) throw new SyntaxError(`expected a member name at ${at}`);
    const keyEnd = stringEnd(text, at);
    const key = JSON.parse(text.slice(at, keyEnd)) as string;
    at = skipSpace(text, keyEnd);
    if (text.charCodeAt(at) !== COLON) throw new SyntaxError(`expected ':' at ${at}`);
    const valueStart = skipSpace(text, at + 1);
    const valueEnd = valueEndAt(text, valueStart);
    if (names.has(key)) found[key] = JSON.parse(text.slice(valueStart, valueEnd));
    at = skipSpace(text, valueEnd);
    const next = text.charCodeAt(at);
    if (next === CLOSE_BRACE) return found;
    if (next !== COMMA) throw new SyntaxError(`expected ',' or '}' at ${at}`);
    at = skipSpace(text, at + 1);
  }
}

function skipSpace(text: string, at: number): number {
  for (;;) {
    const c = text.charCodeAt(at);
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return at;
    at++;
  }
}

/** The index just after the string that starts (with its quote) at `at`. */
function stringEnd(text: string, at: number): number {
  let i = at + 1;
  for (;;) {
    const quote = text.indexOf('"', i);
    if (quote < 0) throw new SyntaxError('unterminated string');
    if (!escapedAt(text, quote)) return quote + 1;
    i = quote + 1;
  }
}

/** The index just after the value that starts at `at` (strings and nesting skipped, not built). */
function valueEndAt(text: string, at: number): number {
  const first = text.charCodeAt(at);
  if (first === QUOTE) return stringEnd(text, at);
  if (first !== OPEN_BRACE && first !== OPEN_BRACKET) {
    let i = at;
    for (;;) {
      const c = text.charCodeAt(i);
      if (
        c === COMMA ||
        c === CLOSE_BRACE ||
        c === CLOSE_BRACKET ||
        c === 0x20 ||
        c === 0x0a ||
        c === 0x0d ||
        c === 0x09 ||
        Number.isNaN(c)
      )
        return i;
      i++;
    }
  }
  let depth = 0;
  let i = at;
  for (;;) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = stringEnd(text, i);
      continue;
    }
    if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++;
    else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
      if (depth === 0) return i + 1;
    } else if (Number.isNaN(c)) throw new SyntaxError('unterminated value');
    i++;
  }
}
