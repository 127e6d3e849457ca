import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** Headers a browser page may read from an answer (versioning, created resources, progress, tracing). */
const EXPOSED = ['ETag', 'Location', 'Content-Location', 'Last-Modified', 'X-Progress', 'X-Request-Id'].join(', ');
/** Headers a browser page may send beyond the CORS-safelisted ones. */
const ALLOWED_HEADERS = [
  'Authorization',
  'Content-Type',
  'Accept',
  'Accept-Language',
  'If-Match',
  'If-None-Match',
  'If-None-Exist',
  'If-Modified-Since',
  'Prefer',
  'X-Project',
  'X-Request-Id',
].join(', ');
const ALLOWED_METHODS = 'GET, HEAD, POST, PUT, PATCH, DELETE';
/** How long a browser may keep a preflight's answer (seconds). */
const MAX_AGE = '600';

/**
 * CORS for the origins of CORS_ORIGINS (none: nothing is registered, no cross-origin call works).
 * Registered before authentication: a preflight carries no token, so it is answered here, before
 * anything asks for one. An origin not in the list gets no CORS headers, so the browser refuses
 * the call; its preflight goes on to the ordinary answer (401 or 404).
 */
export function registerCors(app: FastifyInstance, origins: readonly string[]): void {
  if (origins.length === 0) return;
  const any = origins.includes('*');
  const allowed = new Set(origins);
  const allowedOrigin = (request: FastifyRequest): string | undefined => {
    const origin = request.headers.origin;
    if (typeof origin !== 'string') return undefined;
    return any || allowed.has(origin) ? origin : undefined;
  };

  app.addHook('onRequest', (request, reply, done) => {
    const origin = allowedOrigin(request);
    if (
      origin === undefined ||
      request.method !== 'OPTIONS' ||
      request.headers['access-control-request-method'] === undefined
    )
      return done();
    varyOnOrigin(reply);
    reply
      .code(204)
      .header('access-control-allow-origin', origin)
      .header('access-control-allow-methods', ALLOWED_METHODS)
      .header('access-control-allow-headers', ALLOWED_HEADERS)
      .header('access-control-max-age', MAX_AGE)
      .send();
  });

  // On every answer, errors included (a page must be able to read a 401 or an OperationOutcome).
  app.addHook('onSend', (request, reply, payload, done) => {
    const origin = allowedOrigin(request);
    if (origin !== undefined && !reply.hasHeader('access-control-allow-origin')) {
      varyOnOrigin(reply);
      reply.header('access-control-allow-origin', origin).header('access-control-expose-headers', EXPOSED);
    }
    done(null, payload);
  });
}

function varyOnOrigin(reply: FastifyReply): void {
  const vary = reply.getHeader('vary');
  if (vary === undefined) reply.header('vary', 'Origin');
  else if (!/\borigin\b/i.test(String(vary))) reply.header('vary', `${String(vary)}, Origin`);
}
