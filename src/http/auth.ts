import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { fhirError } from '../fhir/errors';
import { sendError } from './errors';
import { isCapabilityStatementMode } from './routes/metadata';
import type { Principal } from '../auth/principal';

declare module 'fastify' {
  interface FastifyRequest {
    /** Who is calling, set by the auth hook; absent means the operator of the default project. */
    principal?: Principal;
  }
}

/**
 * Bearer tokens from AUTH_TOKENS. Every request needs one except reading the
 * CapabilityStatement, which FHIR clients fetch before they know how to authenticate.
 * Tokens are compared as SHA-256 digests in constant time, and every configured token is
 * compared, so timing tells nothing about which or how much matched.
 */
export function registerAuth(app: FastifyInstance, options: { tokens: string[]; base: string }): void {
  if (options.tokens.length === 0) return;
  const digests = options.tokens.map(digest);
  const metadataPath = `${options.base}/metadata`;
  const challenge = { 'www-authenticate': 'Bearer realm="fhir"' };

  // Callback style: sending the error without calling done() ends the request here.
  app.addHook('onRequest', (request, reply, done) => {
    if (isPublic(request, metadataPath)) return done();
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match) {
      sendError(reply, fhirError('ERR_AUTH_MISSING', {}, { headers: challenge }));
      return;
    }
    const presented = digest(match[1]);
    let valid = false;
    for (const known of digests) valid = timingSafeEqual(presented, known) || valid;
    if (!valid) {
      sendError(reply, fhirError('ERR_AUTH_INVALID', {}, { headers: { 'www-authenticate': 'Bearer realm="fhir", error="invalid_token"' } }));
      return;
    }
    done();
  });
}

/**
 * Only the CapabilityStatement itself: other `metadata?mode=` answers (mode=terminology lists every
 * stored code system) describe content, and content needs a token.
 */
function isPublic(request: FastifyRequest, metadataPath: string): boolean {
  if (request.method !== 'GET' && request.method !== 'HEAD') return false;
  const path = request.url.split('?')[0].replace(/\/+$/, '');
  if (path !== metadataPath) return false;
  return isCapabilityStatementMode((request.query as { mode?: unknown } | undefined)?.mode);
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}
