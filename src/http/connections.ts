import type { IncomingHttpHeaders, IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config';

/**
 * What keeps a slow or stalling client from holding a connection (a file descriptor) for as long
 * as it likes: a time for the headers, a time for the whole request, and no reading on after an
 * early answer. A client that is too slow gets 408 (see clientErrorHandler).
 */
export function connectionOptions(config: Pick<Config, 'headersTimeoutMs' | 'requestTimeoutMs'>) {
  return {
    requestTimeout: config.requestTimeoutMs,
    http: {
      headersTimeout: config.headersTimeoutMs,
      // Node looks for expired requests this often (30 s by default, which would let a slow
      // client keep its connection for half a minute past its time).
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(config.headersTimeoutMs / 4))),
    },
  };
}

/**
 * An answer sent before the request body has arrived (401 without a token, 413, 400 for a body
 * nested too deep ...) closes the connection once written. Otherwise Node reads and discards the
 * rest of the body to keep the connection alive, and a client that declares 1 GB and trickles it
 * keeps its descriptor for as long as it likes.
 */
export function registerEarlyAnswerClose(app: FastifyInstance): void {
  // Callback style: this runs on every answer.
  app.addHook('onSend', (request, reply, payload, done) => {
    if (!request.raw.complete && declaresBody(request.headers)) {
      reply.header('connection', 'close');
      lingerBeforeClosing(request.raw.socket);
    }
    done(null, payload);
  });
}

/** How long a connection closed after an early answer goes on reading what the client still sends. */
export const LINGER_MS = 500;

/**
 * Closing a socket with unread bytes in it makes the kernel send a reset, and a client still
 * sending its body may then lose the answer it was sent (fetch reports EPIPE, not the 401). So, as
 * web servers do ("lingering close"), Node's close after the answer (`destroySoon`, which it calls
 * for `Connection: close`) becomes a lingering close.
 */
function lingerBeforeClosing(socket: Socket): void {
  (socket as Socket & { destroySoon(): void }).destroySoon = () => lingeringClose(socket);
}

/**
 * Sends the end (after whatever was written), reads and drops what the client still sends, and
 * destroys the socket when the client closes its side or after LINGER_MS, whichever is first.
 * `withoutParser`: after an answer Node's HTTP parser did not make (408, 400 for bad framing), what
 * arrives is dropped unread rather than parsed into a request nobody can answer any more.
 */
export function lingeringClose(socket: Socket, options: { withoutParser?: boolean } = {}): void {
  if (options.withoutParser) {
    socket.removeAllListeners('data');
    socket.on('data', () => undefined);
  }
  if (socket.writable) socket.end();
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  socket.resume();
}

function declaresBody(headers: IncomingHttpHeaders): boolean {
  if (headers['transfer-encoding'] !== undefined) return true;
  const length = headers['content-length'];
  return length !== undefined && length !== '0';
}

/**
 * Connections that have not sent a request yet (clients open some ahead of need). Node counts them
 * neither idle nor busy, and its close stops the timer that would expire them: a drain would wait
 * for them until their clients let go. `closeQuiet()` ends them; the drain calls it until it is
 * over (a request that has begun is left to finish).
 */
export function trackQuietConnections(server: Server): { closeQuiet(): void } {
  const quiet = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    quiet.add(socket);
    socket.once('close', () => quiet.delete(socket));
  });
  server.on('request', (request: IncomingMessage) => quiet.delete(request.socket));
  return {
    closeQuiet: () => {
      for (const socket of quiet) socket.destroy();
      quiet.clear();
    },
  };
}
