import fastifyWebsocket from '@fastify/websocket';
import type { FastifyInstance } from 'fastify';
import type { WebsocketHub } from '../../subscriptions/websocket';

/**
 * `GET /ws/subscriptions-r4` (the path Medplum's client uses): the websocket channel of
 * Subscriptions. Public at the HTTP level: the socket is bound by the binding token its first
 * message carries (src/subscriptions/websocket.ts), not by the upgrade request's headers
 * (browsers cannot set Authorization on a websocket).
 */
export async function registerSubscriptionSocketRoute(app: FastifyInstance, hub: WebsocketHub): Promise<void> {
  // Registered after every other route: the plugin wraps the handler of each route declared after
  // it (to refuse upgrades there), which broke the console's sign-in when the oauth routes came later.
  await app.register(fastifyWebsocket, { options: { maxPayload: 64 * 1024 } });
  // No HEAD twin: the plugin would hand a HEAD request to the socket handler (a 500).
  app.get('/ws/subscriptions-r4', { websocket: true, exposeHeadRoute: false, config: { public: true } }, (socket) => {
    socket.on('message', (data: Buffer) => {
      void hub.message(socket, data.toString('utf8')).catch(() => socket.close(1011, 'internal error'));
    });
    socket.on('close', () => hub.unbind(socket));
  });
}
