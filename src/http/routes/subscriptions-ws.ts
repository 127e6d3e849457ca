import type { IncomingMessage } from 'node:http';
import fastifyWebsocket, { type WebSocket } from '@fastify/websocket';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { fhirError } from '../../fhir/errors';
import { clientNetwork } from '../../net/addresses';
import type { WebsocketHub } from '../../subscriptions/websocket';

export interface SubscriptionSocketOptions {
  hub: WebsocketHub;
  /** A socket that has not bound to a Subscription within this time is closed (WS_BIND_TIMEOUT_MS). */
  bindTimeoutMs: number;
  /** Open sockets one client address (IPv6: one /64) may hold; the next upgrade is refused 429 (WS_MAX_PER_ADDRESS). */
  maxPerAddress: number;
  /**
   * Open sockets in all, whoever holds them; the next upgrade is refused 503 (WS_MAX_CONNECTIONS):
   * clients from many addresses must not take the descriptors REST requests need.
   */
  maxConnections: number;
}

/** How long a socket closed by the server may take to answer the close frame before it is cut. */
const CLOSE_GRACE_MS = 1000;

/**
 * `GET /ws/subscriptions-r4` (the path Medplum's client uses): the websocket channel of
 * Subscriptions. Public at the HTTP level: the socket is bound by the binding token its first
 * message carries (src/subscriptions/websocket.ts), not by the upgrade request's headers
 * (browsers cannot set Authorization on a websocket).
 *
 * Being public, it is bounded: an upgraded socket leaves the HTTP server's timeouts behind (the
 * upgrade request itself is under HEADERS_TIMEOUT_MS like any other), so a socket that has not
 * bound within `bindTimeoutMs` is closed, one address holds at most `maxPerAddress` sockets, and
 * the process at most `maxConnections`.
 * Without these, sockets opened and left idle held a descriptor each until the process ran out.
 */
export async function registerSubscriptionSocketRoute(
  app: FastifyInstance,
  options: SubscriptionSocketOptions,
): Promise<void> {
  const { hub, bindTimeoutMs } = options;
  const gate = new SocketGate(options);
  // Registered after every other route: the plugin wraps the handler of each route declared after
  // it (to refuse upgrades there), which broke the console's sign-in when the oauth routes came later.
  await app.register(fastifyWebsocket, { options: { maxPayload: 64 * 1024 } });
  // No HEAD twin: the plugin would hand a HEAD request to the socket handler (a 500).
  app.get(
    '/ws/subscriptions-r4',
    {
      websocket: true,
      exposeHeadRoute: false,
      config: { public: true },
      preHandler: (request, reply, done) => gate.admit(request, reply, done),
    },
    (socket, request) => {
      const deadline = setTimeout(() => {
        if (!hub.isBound(socket)) closeFirmly(socket, 'not bound in time (send bind-with-token first)');
      }, bindTimeoutMs);
      socket.on('message', (data: Buffer) => {
        void hub.message(socket, data.toString('utf8')).catch(() => socket.close(1011, 'internal error'));
      });
      socket.on('close', () => {
        clearTimeout(deadline);
        hub.unbind(socket);
        gate.release(request.raw);
      });
    },
  );
}

/**
 * The count of open sockets, in all and by client address (an IPv6 client by its /64). Taken before the upgrade (an HTTP 429 is answered
 * while there is still HTTP to answer with), given back when the connection closes, whether it
 * became a websocket or the handshake failed.
 */
class SocketGate {
  private readonly open = new Map<string, number>();
  private total = 0;
  private readonly releases = new WeakMap<IncomingMessage, () => void>();

  constructor(private readonly limits: Pick<SubscriptionSocketOptions, 'maxPerAddress' | 'maxConnections'>) {}

  admit(request: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void): void {
    // A plain GET (no upgrade) goes on to the plugin's 404.
    if (!request.ws) return done();
    // No address only for app.injectWS (tests): one in-process client.
    const address = request.ip ? clientNetwork(request.ip) : 'in-process';
    const count = this.open.get(address) ?? 0;
    if (count >= this.limits.maxPerAddress)
      return done(fhirError('ERR_SUBSCRIPTION_SOCKETS', { max: this.limits.maxPerAddress }));
    if (this.total >= this.limits.maxConnections)
      return done(fhirError('ERR_SUBSCRIPTION_SOCKETS_FULL', { max: this.limits.maxConnections }));
    this.open.set(address, count + 1);
    this.total += 1;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.total -= 1;
      const left = (this.open.get(address) ?? 1) - 1;
      if (left > 0) this.open.set(address, left);
      else this.open.delete(address);
    };
    this.releases.set(request.raw, release);
    // Absent only for app.injectWS (tests), whose socket's close releases through release().
    request.raw.socket?.once('close', release);
    done();
  }

  release(raw: IncomingMessage): void {
    this.releases.get(raw)?.();
  }
}

/** A close frame, and the connection cut if the client does not answer it (ws would wait 30 s). */
function closeFirmly(socket: WebSocket, reason: string): void {
  socket.close(1008, reason);
  const cut = setTimeout(() => socket.terminate(), CLOSE_GRACE_MS);
  cut.unref();
  socket.once('close', () => clearTimeout(cut));
}
