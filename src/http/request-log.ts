import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';

/** X-Request-Id as sent, when it is a sane token; otherwise a fresh UUID. */
export function requestId(request: IncomingMessage): string {
  const given = request.headers['x-request-id'];
  if (typeof given === 'string' && /^[\x21-\x7e]{1,200}$/.test(given)) return given;
  return randomUUID();
}

/**
 * One log line per request, written when the answer has gone: id (bound by Fastify), method,
 * URL, status, time. Never headers (tokens live there) and never bodies.
 */
export class OneLinePerRequest extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    // Nothing to build when the line would not be written (LOG_LEVEL above info, no error).
    if (!error && !(reply.log as FastifyBaseLogger & { isLevelEnabled(level: string): boolean }).isLevelEnabled('info'))
      return;
    const line = {
      method: request.method,
      url: loggableUrl(request.url),
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 10) / 10,
    };
    if (error) reply.log.warn({ ...line, error: error.message }, 'request');
    else reply.log.info(line, 'request');
  }
}

/**
 * Query parameters that carry credentials (clients that cannot set a header send the bearer token
 * as `access_token=`, RFC 6750) are written as `[redacted]`.
 */
const SECRET_QUERY =
  /([?&;](?:access_token|id_token|refresh_token|token|api[_-]?key|client_secret|password)=)[^&;#]*/gi;

export function loggableUrl(url: string): string {
  const redacted = url.includes('=') ? url.replace(SECRET_QUERY, '$1[redacted]') : url;
  return redacted.length > 500 ? `${redacted.slice(0, 500)}...` : redacted;
}

/** Echoes the request id, so a client can quote it when it reports a problem. */
export function registerRequestId(app: FastifyInstance): void {
  // Callback style, not async: this runs on every answer, and a promise per hook shows in profiles.
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    done(null, payload);
  });
}
