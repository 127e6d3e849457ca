import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { RequestContext } from '../../context/request-context';
import { FHIR_JSON } from '../../fhir/outcome';
import type { OperationCall, OperationInvoker } from '../../operations/invoke';
import type { Level } from '../../operations/operation';
import type { BoundOperation, OperationRegistry } from '../../operations/registry';
import type { RestService } from '../../rest/rest-service';
import type { AnswerCache } from '../answer-cache';
import { FormBody, rawBodyOf, registerTextBodies } from '../fhir-json';

export interface OperationRouteDeps<S> {
  base: string;
  /** Where answers of operations with an answer token are kept. */
  answers: AnswerCache;
  registry: OperationRegistry<S>;
  /** Finds, authorizes and runs raw operations; says whether an answer may be reused. */
  invoker: OperationInvoker<S>;
  /** The REST core, whose operation interaction answers every other operation request (as for a Bundle entry or a bot). */
  rest: Pick<RestService, 'operation'>;
  /** The context of a request: its project, deadline, base URL. */
  contextOf: (request: FastifyRequest) => RequestContext;
  bodyLimit: number;
}

/** Headers an operation may honour, passed through to its context. */
const PASSED_HEADERS = ['x-too-costly-threshold', 'prefer'] as const;

/**
 * Routes come from the registry, never by hand: every level a definition allows, POST always,
 * GET unless the definition affects state (checked per request, to answer 405 rather than 404).
 */
export function registerOperationRoutes<S>(app: FastifyInstance, deps: OperationRouteDeps<S>): void {
  const routes = (scope: FastifyInstance, op: BoundOperation<S>) => {
    const { spec } = op;
    if (spec.system) route(scope, { deps, op, url: `${deps.base}/$${spec.code}`, level: 'system' });
    // An operation on (nearly) every type ($validate, $graphql, $resend) gets one route per level with
    // the type as a parameter: 146 routes each were a tenth of start-up. The others keep a route per
    // type (a static route is the quickest to match: $validate-code's).
    if (spec.resources.length > PER_TYPE_ROUTES) {
      const types = new Set(spec.resources);
      if (spec.typeLevel) route(scope, { deps, op, url: `${deps.base}/:type/$${spec.code}`, level: 'type', types });
      if (spec.instance)
        route(scope, { deps, op, url: `${deps.base}/:type/:id/$${spec.code}`, level: 'instance', types });
      return;
    }
    for (const type of spec.resources) {
      if (spec.typeLevel)
        route(scope, { deps, op, url: `${deps.base}/${type}/$${spec.code}`, level: 'type', types: type });
      if (spec.instance)
        route(scope, { deps, op, url: `${deps.base}/${type}/:id/$${spec.code}`, level: 'instance', types: type });
    }
  };
  for (const op of deps.registry.operations) if (!op.raw) routes(app, op);
  // Raw operations read their own bodies, text ones included ($execute's HL7 v2), in a scope of their own.
  void app.register(async (scope) => {
    registerTextBodies(scope, { bodyLimit: deps.bodyLimit });
    for (const op of deps.registry.operations) if (op.raw) routes(scope, op);
  });
}

/** Above this many resource types, an operation's type and instance routes take the type as a parameter. */
const PER_TYPE_ROUTES = 20;

interface RouteOptions<S> {
  deps: OperationRouteDeps<S>;
  op: BoundOperation<S>;
  url: string;
  level: Level;
  /** The route's one type, or the types its `:type` parameter may name. */
  types?: string | Set<string>;
}

/** One operation route: the request translated to an operation call, answered by the REST core or the answer cache. */
function route<S>(app: FastifyInstance, { deps, op, url, level, types }: RouteOptions<S>) {
  app.route({
    method: ['GET', 'POST'],
    url,
    handler: async (request, reply) => {
      let type = typeof types === 'string' ? types : undefined;
      if (types instanceof Set) {
        type = (request.params as { type: string }).type;
        // What a type without the operation answers elsewhere (it says which types have it).
        if (!types.has(type)) throw deps.registry.unknown(op.spec.code, level, type);
      }
      const ctx = deps.contextOf(request);
      const call = callOf(request, op, level, type);
      if (op.raw) {
        // A form body reaches raw operations as the name/value object it stands for.
        const body = call.body instanceof FormBody ? Object.fromEntries(call.body.params) : call.body;
        const out = await deps.invoker.invokeRaw(
          { ...call, body, contentType: headerValue(request, 'content-type') },
          ctx,
          op,
        );
        return reply.code(out.status).type(out.contentType).send(out.body);
      }
      // A reused answer is still only for callers allowed to ask.
      deps.invoker.authorize(op, call, ctx);
      // An answer shaped by `_graphql` is not reused.
      const token =
        op.answerToken && call.query._graphql === undefined ? await deps.invoker.answerToken(op, ctx) : undefined;
      const key = token === undefined ? undefined : answerKey(request, ctx);
      if (key !== undefined) {
        const known = deps.answers.get(key, token as string);
        if (known !== undefined) return reply.type(FHIR_JSON).send(known);
      }
      const response = await deps.rest.operation(call, ctx);
      reply.code(response.status).headers(response.headers);
      if (response.json !== undefined) return reply.type('application/json').send(response.json);
      if (key === undefined || response.status !== 200) return reply.type(FHIR_JSON).send(response.body);
      const text = JSON.stringify(response.body);
      deps.answers.set(key, token as string, text);
      return reply.type(FHIR_JSON).send(text);
    },
  });
}

function callOf<S>(
  request: FastifyRequest,
  op: BoundOperation<S>,
  level: Level,
  type: string | undefined,
): OperationCall {
  return {
    code: op.spec.code,
    level,
    type,
    id: level === 'instance' ? (request.params as { id: string }).id : undefined,
    method: request.method === 'POST' ? 'POST' : 'GET',
    query: (request.query ?? {}) as Record<string, string | string[]>,
    body: request.body,
    headers: passedHeaders(request),
    acceptLanguage: headerValue(request, 'accept-language'),
  };
}

/**
 * Everything of a request that can change an operation's answer: the project it acts in, method,
 * URL (path with the instance id, and query), the headers handlers see, and the body as it was
 * sent. Undefined when the body is not known as text (nothing is reused then).
 */
function answerKey(request: FastifyRequest, ctx: RequestContext): string | undefined {
  let headers = headerValue(request, 'accept-language') ?? '';
  for (const name of PASSED_HEADERS) headers += `\u0001${headerValue(request, name) ?? ''}`;
  const head = `${ctx.project}\u0001${request.method} ${request.url}\u0001${headers}`;
  if (request.method === 'GET' || request.method === 'HEAD') return head;
  const raw = rawBodyOf(request);
  return raw === undefined ? undefined : `${head}\u0001${raw}`;
}

/** The PASSED_HEADERS of a request (on every operation request: no intermediate arrays). */
function passedHeaders(request: FastifyRequest): Record<string, string | undefined> {
  const headers: Record<string, string | undefined> = {};
  for (const name of PASSED_HEADERS) headers[name] = headerValue(request, name);
  return headers;
}

function headerValue(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}
