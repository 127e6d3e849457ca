import type { FastifyInstance, FastifyRequest } from 'fastify';
import { fhirError } from '../fhir/errors';
import { MAX_JSON_DEPTH, parseJsonText } from '../fhir/json-body';
import { DepthScanner } from '../fhir/json-scan';

/**
 * Request bodies: `application/fhir+json` and `application/json` (any parameters, such as
 * fhirVersion or charset), read under the body limit, refused as soon as they nest too deep, then
 * refused when they carry a NUL or prototype keys, and parsed once (src/fhir/json-body.ts, whose
 * rules a bot's calls to this server meet too).
 * Every other media type is 415 (Fastify's own check, answered by the error handler).
 */
export function registerFhirJson(app: FastifyInstance, options: { bodyLimit: number }): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    ['application/fhir+json', 'application/json', 'application/json-patch+json'],
    (request, payload, done) => {
      readBody(request, payload, options.bodyLimit, (err, text) => {
        if (err || text === undefined) return done(err ?? fhirError('ERR_BODY_MISSING', {}), undefined);
        rawBodies.set(request, text);
        let value: unknown;
        try {
          value = parseJsonText(text);
        } catch (refused) {
          return done(refused as Error, undefined);
        }
        done(null, value);
      });
    },
  );
}

/**
 * The body as text: what Fastify's own reader does (the limit on the declared and the received
 * length, a length that must match Content-Length), and the depth checked chunk by chunk, so a body
 * nested too deep is answered before the rest of it has arrived (the early answer closes the
 * connection, see connections.ts).
 */
function readBody(
  request: FastifyRequest,
  payload: NodeJS.ReadableStream,
  limit: number,
  finish: (err: Error | null, text?: string) => void,
): void {
  const declared = Number(request.headers['content-length']);
  if (declared > limit) return finish(fhirError('ERR_BODY_TOO_LARGE', { limit }));
  const scanner = new DepthScanner(MAX_JSON_DEPTH);
  const chunks: Buffer[] = [];
  let received = 0;
  const stop = () => {
    payload.removeListener('data', onData);
    payload.removeListener('end', onEnd);
    payload.removeListener('error', onError);
  };
  const onData = (data: Buffer | string) => {
    const chunk = typeof data === 'string' ? Buffer.from(data) : data;
    received += chunk.length;
    if (received > limit) {
      stop();
      return finish(fhirError('ERR_BODY_TOO_LARGE', { limit }));
    }
    if (!scanner.feed(chunk)) {
      stop();
      return finish(fhirError('ERR_BODY_TOO_DEEP', { limit: MAX_JSON_DEPTH }));
    }
    chunks.push(chunk);
  };
  const onEnd = () => {
    stop();
    if (!Number.isNaN(declared) && received !== declared) {
      return finish(fhirError('ERR_REQUEST_INVALID', { reason: 'the body is not as long as its Content-Length says' }));
    }
    finish(null, (chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, received)).toString('utf8'));
  };
  const onError = (err: Error) => {
    stop();
    finish(Object.assign(err, { statusCode: 400 }));
  };
  payload.on('data', onData);
  payload.on('end', onEnd);
  payload.on('error', onError);
  payload.resume();
}

/** A form body (`POST [type]/_search`): search parameters, as a query string carries them. */
export class FormBody {
  constructor(readonly params: URLSearchParams) {}
}

/** `application/x-www-form-urlencoded`, which FHIR search accepts by POST; `application/graphql`, a GraphQL query as text. */
export function registerFormBodies(app: FastifyInstance): void {
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    done(null, new FormBody(new URLSearchParams(body as string)));
  });
  app.addContentTypeParser('application/graphql', { parseAs: 'string' }, (_req, body, done) => {
    done(null, body);
  });
}

/** Media types raw operations take as text ($execute's input): plain text and HL7 v2. */
export const TEXT_BODY_TYPES = ['text/plain', 'x-application/hl7-v2+er7'];

/**
 * Text bodies, for the raw operations' routes only (registered in their own Fastify scope): every
 * other route still answers 415 to them.
 */
export function registerTextBodies(scope: FastifyInstance, options: { bodyLimit: number }): void {
  scope.addContentTypeParser(
    TEXT_BODY_TYPES,
    { parseAs: 'string', bodyLimit: options.bodyLimit },
    (_req, body, done) => {
      done(null, body);
    },
  );
}

/** The body text of a request, as it was parsed (for keys that must match the exact request). */
const rawBodies = new WeakMap<FastifyRequest, string>();

export function rawBodyOf(request: FastifyRequest): string | undefined {
  return rawBodies.get(request);
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
