import type { FastifyInstance, FastifyRequest } from 'fastify';
import { fhirError } from '../fhir/errors';

/** JSON nested deeper than this is refused before anything walks it recursively. */
export const MAX_JSON_DEPTH = 64;

/**
 * Request bodies: `application/fhir+json` and `application/json` (any parameters, such as
 * fhirVersion or charset), parsed once, refused when too deep or carrying prototype keys.
 * Every other media type is 415 (Fastify's own check, answered by the error handler).
 */
export function registerFhirJson(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(['application/fhir+json', 'application/json', 'application/json-patch+json'], { parseAs: 'string' }, (req, body, done) => {
    const text = body as string;
    rawBodies.set(req, text);
    if (text.trim() === '') return done(fhirError('ERR_BODY_MISSING', {}), undefined);
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      return done(fhirError('ERR_BODY_JSON', { reason: (err as Error).message }), undefined);
    }
    const problem = checkShape(value);
    if (problem) return done(problem, undefined);
    done(null, value);
  });
}

/** A form body (`POST [type]/_search`): search parameters, as a query string carries them. */
export class FormBody {
  constructor(readonly params: URLSearchParams) {}
}

/** `application/x-www-form-urlencoded`, which FHIR search accepts by POST. */
export function registerFormBodies(app: FastifyInstance): void {
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    done(null, new FormBody(new URLSearchParams(body as string)));
  });
}

/** The body text of a request, as it was parsed (for keys that must match the exact request). */
const rawBodies = new WeakMap<FastifyRequest, string>();

export function rawBodyOf(request: FastifyRequest): string | undefined {
  return rawBodies.get(request);
}

/**
 * An iterative walk: depth limit and no `__proto__`/`constructor` keys that could poison a merge.
 * Two parallel stacks rather than one of [node, depth] pairs: a large body (a 100,000-concept
 * code system) would otherwise allocate a pair per object just to be checked.
 */
function checkShape(root: unknown) {
  const nodes: unknown[] = [root];
  const depths: number[] = [1];
  while (nodes.length > 0) {
    const node = nodes.pop();
    const depth = depths.pop() as number;
    if (typeof node !== 'object' || node === null) continue;
    if (depth > MAX_JSON_DEPTH) return fhirError('ERR_BODY_TOO_DEEP', { limit: MAX_JSON_DEPTH });
    if (Array.isArray(node)) {
      for (const item of node) {
        if (typeof item === 'object' && item !== null) {
          nodes.push(item);
          depths.push(depth + 1);
        }
      }
      continue;
    }
    for (const key in node) {
      if (key === '__proto__' || key === 'constructor' || key === 'prototype') {
        return fhirError('ERR_BODY_JSON', { reason: `the property name '${key}' is not allowed` });
      }
      const child = (node as Record<string, unknown>)[key];
      if (typeof child === 'object' && child !== null) {
        nodes.push(child);
        depths.push(depth + 1);
      }
    }
  }
  return undefined;
}

/** True when an Accept header (or its absence) admits a JSON answer. */
export function acceptsJson(accept: string | undefined, format: string | undefined): boolean {
  if (format !== undefined) return /json/i.test(format);
  if (!accept) return true;
  return accept.split(',').some((range) => {
    const type = range.split(';')[0].trim().toLowerCase();
    return type === '*/*' || type === 'application/*' || type.endsWith('json') || type === '';
  });
}
