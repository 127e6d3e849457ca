import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import { fhirError, isFhirError, type FhirError } from '../fhir/errors';
import { FHIR_JSON } from '../fhir/outcome';
import { storageFailure } from '../storage/store';
import { lingeringClose } from './connections';

/**
 * The one place a failure becomes an answer: an OperationOutcome with the catalogue's status,
 * `application/fhir+json`, never a stack trace. Unknown errors are logged here and answered 500.
 */
export function registerErrorHandling(app: FastifyInstance, options: { bodyLimit: number }): void {
  app.setErrorHandler((err, request, reply) => {
    const fhir = toFhirError(err, options.bodyLimit);
    if (fhir.status >= 500) {
      request.log.error({ err }, 'request failed');
    }
    return sendError(reply, fhir);
  });
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0];
    return sendError(reply, fhirError('ERR_ROUTE_UNKNOWN', { method: request.method, path: clip(path) }));
  });
}

/**
 * Errors Fastify's router raises before any hook or handler (a URL it cannot decode, a path
 * segment over maxParamLength): Fastify answers them with its own JSON unless given this.
 */
export function frameworkErrorHandler(options: { bodyLimit: number; maxParamLength: number }) {
  return (err: FastifyError, _request: unknown, reply: FastifyReply): void => {
    const fhir =
      err.code === 'FST_ERR_MAX_PARAM_LENGTH'
        ? fhirError('ERR_URL_TOO_LONG', { limit: options.maxParamLength })
        : toFhirError(err, options.bodyLimit);
    sendError(reply, fhir);
  };
}

export function sendError(reply: FastifyReply, err: FhirError): FastifyReply {
  return reply.code(err.status).headers(err.headers).type(FHIR_JSON).send(err.outcome);
}

function toFhirError(err: unknown, bodyLimit: number): FhirError {
  if (isFhirError(err)) return err;
  const storage = storageFailure(err);
  if (storage) return storage;
  const fastify = err as FastifyError;
  switch (fastify.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return fhirError('ERR_BODY_TOO_LARGE', { limit: bodyLimit });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return fhirError('ERR_BODY_CONTENT_TYPE', { contentType: '(missing or unsupported)' });
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return fhirError('ERR_BODY_MISSING', {});
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return fhirError('ERR_BODY_JSON', { reason: 'it does not parse' });
    case 'FST_ERR_BAD_URL':
    case 'FST_ERR_ASYNC_CONSTRAINT':
      return fhirError('ERR_URL_MALFORMED', {});
    default:
      break;
  }
  if (typeof fastify.statusCode === 'number' && fastify.statusCode >= 400 && fastify.statusCode < 500) {
    return fhirError(
      'ERR_REQUEST_INVALID',
      { reason: fastify.code ?? 'rejected by the HTTP layer' },
      { status: fastify.statusCode },
    );
  }
  return fhirError('ERR_SERVER_INTERNAL', {});
}

/** What Node's HTTP layer refuses before Fastify sees a request, as status and OperationOutcome. */
const CLIENT_ERRORS: Record<string, { status: number; reason: string; issue: string; text: string }> = {
  ERR_HTTP_REQUEST_TIMEOUT: {
    status: 408,
    reason: 'Request Timeout',
    issue: 'timeout',
    text: 'The request was not received in time',
  },
  HPE_HEADER_OVERFLOW: {
    status: 431,
    reason: 'Request Header Fields Too Large',
    issue: 'too-costly',
    text: 'The request headers or URL are too large',
  },
};
const BAD_REQUEST = { status: 400, reason: 'Bad Request', issue: 'structure', text: 'The request is not valid HTTP' };

/**
 * Requests Node's HTTP parser refuses (bad framing, headers too large) or gives up on (too slow:
 * HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS) never reach Fastify; they still get an OperationOutcome
 * instead of Fastify's default body, unless an answer is already under way on the connection, and
 * the connection is closed either way.
 */
export function clientErrorHandler(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const answering =
    (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
  if (!socket.writable || answering) {
    socket.destroy();
    return;
  }
  const { status, reason, issue, text } = CLIENT_ERRORS[err.code ?? ''] ?? BAD_REQUEST;
  const body = JSON.stringify({
    resourceType: 'OperationOutcome',
    issue: [{ severity: 'error', code: issue, details: { text } }],
  });
  socket.write(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: ${FHIR_JSON}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
  // The client may still be sending: closed at once, the socket would reset and the answer be lost.
  lingeringClose(socket, { withoutParser: true });
}

function clip(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}
