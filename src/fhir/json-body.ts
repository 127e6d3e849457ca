import { fhirError } from './errors';
import { containsNulEscape, DepthScanner } from './json-scan';

/**
 * The rules a JSON request body meets before anything walks it, wherever it comes from: the HTTP
 * layer (src/http/fhir-json.ts, which applies the size and depth limits while the body streams in)
 * and a bot's calls to its own server (src/bots), which arrive as whole text and must not be a way
 * around them.
 */

/** JSON nested deeper than this is refused before anything walks it recursively. */
export const MAX_JSON_DEPTH = 64;

/** ERR_BODY_TOO_LARGE when the text is more than `bodyLimit` bytes (UTF-8). */
export function checkBodySize(text: string, bodyLimit: number): void {
  // A UTF-16 unit is at least one byte: more units than the limit is over it without counting.
  if (text.length > bodyLimit || Buffer.byteLength(text, 'utf8') > bodyLimit)
    throw fhirError('ERR_BODY_TOO_LARGE', { limit: bodyLimit });
}

/** A whole JSON body as text: the size and depth limits, then parseJsonText. */
export function parseJsonBody(text: string, options: { bodyLimit: number }): unknown {
  checkBodySize(text, options.bodyLimit);
  if (!new DepthScanner(MAX_JSON_DEPTH).feed(Buffer.from(text, 'utf8')))
    throw fhirError('ERR_BODY_TOO_DEEP', { limit: MAX_JSON_DEPTH });
  return parseJsonText(text);
}

/**
 * Text already within the size and depth limits: refused when empty, when it carries a NUL or
 * prototype keys, or does not parse; parsed once.
 */
export function parseJsonText(text: string): unknown {
  if (text.trim() === '') throw fhirError('ERR_BODY_MISSING', {});
  if (containsNulEscape(text)) {
    throw fhirError('ERR_REQUEST_INVALID', {
      reason: 'the body contains a NUL character (\\u0000), which FHIR strings cannot hold',
    });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (parseError) {
    throw fhirError('ERR_BODY_JSON', { reason: (parseError as Error).message });
  }
  checkKeys(value);
  return value;
}

/**
 * No `__proto__`/`constructor`/`prototype` keys that could poison a merge. Iterative; the depth is
 * bounded already (DepthScanner).
 */
function checkKeys(root: unknown): void {
  const nodes: unknown[] = [root];
  while (nodes.length > 0) {
    const node = nodes.pop();
    if (typeof node !== 'object' || node === null) continue;
    if (Array.isArray(node)) {
      for (const item of node) if (typeof item === 'object' && item !== null) nodes.push(item);
      continue;
    }
    for (const key in node) {
      if (key === '__proto__' || key === 'constructor' || key === 'prototype') {
        throw fhirError('ERR_BODY_JSON', { reason: `the property name '${key}' is not allowed` });
      }
      const child = (node as Record<string, unknown>)[key];
      if (typeof child === 'object' && child !== null) nodes.push(child);
    }
  }
}
