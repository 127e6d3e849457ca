import type { FastifyInstance } from 'fastify';
import { fhirError } from '../fhir/errors';
import { sendError } from './errors';

/**
 * A NUL can only enter through the URL as `%00` (Node's parser refuses the raw byte): in a path
 * segment, a search value or an operation parameter. No FHIR id, uri or string may hold one, and
 * PostgreSQL cannot store or compare one, so it is refused here, before anything reads it.
 */
export function registerUrlGuard(app: FastifyInstance): void {
  app.addHook('onRequest', (request, reply, done) => {
    if (!request.url.includes('%00')) return done();
    sendError(reply, fhirError('ERR_REQUEST_INVALID', { reason: 'the URL contains a NUL character (%00)' }));
  });
}
