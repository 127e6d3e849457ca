import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** Answers a public GET: sends through `reply`, or returns the payload to send. */
export type PublicHandler = (request: FastifyRequest, reply: FastifyReply) => unknown;

export interface PublicRoutes {
  /** A GET at exactly this path. */
  get(url: string, handler: PublicHandler): void;
  /** A GET of everything under this path (`/docs/swagger-ui.css` under `/docs`). */
  under(url: string, handler: PublicHandler): void;
}

const publicTables = new WeakMap<FastifyInstance, Set<string>>();

/** The URL patterns of an app's public routes (GET and HEAD, no token), for tests that walk every route. */
export function publicUrlsOf(app: FastifyInstance): ReadonlySet<string> {
  return publicTables.get(app) ?? new Set();
}

/**
 * Pages and probes anyone may fetch, without a token and whatever the Accept header says (a
 * browser asks for text/html, a probe for nothing): health, the OpenAPI document, its viewer
 * and the console. Answered by a hook registered before authentication and content negotiation,
 * and registered as ordinary routes too, so that the route table names them.
 */
export function registerPublicRoutes(app: FastifyInstance): PublicRoutes {
  const exact = new Map<string, PublicHandler>();
  const urls = new Set<string>();
  publicTables.set(app, urls);
  // Keyed by the root with its slash (`/docs/`), so that a request compares without building strings.
  const prefixes = new Map<string, PublicHandler>();
  const find = (url: string): PublicHandler | undefined => {
    const query = url.indexOf('?');
    const path = query < 0 ? url : url.slice(0, query);
    const trimmed = path.length > 1 && path.endsWith('/') ? path.replace(/\/+$/, '') : path;
    const found = exact.get(trimmed);
    if (found) return found;
    for (const [root, handler] of prefixes) if (trimmed.startsWith(root)) return handler;
    return undefined;
  };

  // Runs on every GET: no string is built for the usual request, which is not a public one.
  app.addHook('onRequest', (request, reply, done) => {
    if (request.method !== 'GET' && request.method !== 'HEAD') return done();
    const handler = find(request.url);
    if (!handler) return done();
    Promise.resolve()
      .then(() => handler(request, reply))
      .then(
        (payload) => {
          if (!reply.sent) reply.send(payload);
        },
        (err: unknown) => reply.send(err),
      );
  });

  return {
    get(url, handler) {
      exact.set(url, handler);
      urls.add(url);
      app.get(url, async (request, reply) => handler(request, reply));
    },
    under(url, handler) {
      prefixes.set(`${url}/`, handler);
      urls.add(`${url}/*`);
      app.get(`${url}/*`, async (request, reply) => handler(request, reply));
    },
  };
}
