import { hostname } from 'node:os';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify';
import type { CapabilityStatementRestSecurity } from 'fhir/r4';
import type { Logger } from 'pino';
import type { Config } from './config';
import { READ_ONLY_TYPES } from './core';
import { fhirError } from './fhir/errors';
import type { ResourceSchema } from './fhir/resource-schema';
import { registerAuth } from './http/auth';
import { registerCors } from './http/cors';
import { registerPublicRoutes, type PublicRoutes } from './http/public-routes';
import { registerConsoleRoutes } from './http/routes/console';
import { registerDocsRoutes } from './http/routes/docs';
import { registerHealthRoutes, type ReadinessCheck } from './http/routes/health';
import { clientErrorHandler, frameworkErrorHandler, registerErrorHandling, sendError } from './http/errors';
import { acceptsJson, registerFhirJson, registerFormBodies } from './http/fhir-json';
import { OneLinePerRequest, registerRequestId, requestId } from './http/request-log';
import { registerMetadataRoute, type MetadataOptions } from './http/routes/metadata';
import { AnswerCache } from './http/answer-cache';
import { registerUrlGuard } from './http/url-guard';
import { baseUrlResolver, tokenEndpoints } from './http/base-url';
import { connectionOptions, registerEarlyAnswerClose } from './http/connections';
import { registerOperationRoutes } from './http/routes/operations';
import { registerResourceRoutes } from './http/routes/resources';
import { requestContext } from './http/request-context';
import type { OperationInvoker } from './operations/invoke';
import type { OperationRegistry } from './operations/registry';
import type { RestService } from './rest/rest-service';
import type { SearchParam } from './search/registry';
import type { AuthService } from './auth/oauth';
import type { Principal } from './auth/principal';
import type { SigningKeys } from './auth/signing-keys';
import { oauthUris, registerOAuthRoutes } from './http/routes/oauth';
import { registerBulkRoutes } from './http/routes/bulk';
import { registerSubscriptionSocketRoute } from './http/routes/subscriptions-ws';
import type { WebsocketHub } from './subscriptions/websocket';
import { registerAdminRoutes } from './http/routes/admin';
import type { JobQueue } from './jobs/queue';
import type { BulkExports } from './bulk/export';

export const FHIR_BASE = '/fhir/R4';

export interface AppParts<S> {
  config: Config;
  /** The RESTful interactions (read, write, search, history) the resource routes translate to. */
  rest: RestService;
  schema: ResourceSchema;
  /** The search parameters of a type, for the CapabilityStatement, and a number that changes with them. */
  searchParams?: (type: string) => SearchParam[];
  searchParamsRevision?: () => number;
  registry: OperationRegistry<S>;
  /** The operations' invoker, composed with the REST core (bootstrap.ts): the routes find, authorize and run raw operations with it. */
  invoker: OperationInvoker<S>;
  software: MetadataOptions<S>['software'];
  decorateCapabilities?: MetadataOptions<S>['decorate'];
  metadataModes?: MetadataOptions<S>['modes'];
  /** What `/readyz` checks (storage reachable, content loaded), by name. */
  readiness?: Record<string, ReadinessCheck>;
  /** The server's logger (src/logger.ts); each request logs through a child of it. */
  log: Logger;
  /** OAuth 2 / SMART sign-in and the tokens it issues (absent: AUTH_TOKENS only). */
  oauth?: {
    auth: AuthService;
    keys: SigningKeys;
    verify: (token: string) => Promise<Principal | undefined>;
    projectExists: (id: string) => Promise<boolean>;
  };
  /** Bulk Data export (kick-off, status and file routes); absent: none. */
  bulk?: BulkExports;
  /** The websocket channel of Subscriptions (/ws/subscriptions-r4); absent: none. */
  subscriptionSocket?: WebsocketHub;
  /** The job queue, for the administrators' jobs view (`/admin/jobs`); absent: none. */
  jobs?: JobQueue;
}

/** Every route an app serves (method and URL pattern), for tests that must cover them all. */
const routeTables = new WeakMap<FastifyInstance, AppRoute[]>();

export interface AppRoute {
  method: string;
  url: string;
  /** Served without a token (discovery, sign-in). */
  public: boolean;
}

export function routesOf(app: FastifyInstance): readonly AppRoute[] {
  return routeTables.get(app) ?? [];
}

/** Longest path segment (an id, an operation code) the router takes; FHIR ids are at most 64. */
const MAX_PARAM_LENGTH = 200;

/** Builds the Fastify app with every plugin in order. It never listens; `server.ts` does. */
export async function buildApp<S>(parts: AppParts<S>): Promise<FastifyInstance> {
  const app = createFastify(parts.config, parts.log);
  const publicRoutes = registerRequestHandling(app, parts);
  const wiring: Wiring<S> = {
    parts,
    // Every absolute URL the app writes starts here (BASE_URL when configured).
    baseUrlOf: baseUrlResolver({ baseUrl: parts.config.baseUrl, basePath: FHIR_BASE }),
    resourceTypes: [...parts.schema.resourceTypes].sort(),
  };
  registerFhirRoutes(app, wiring);
  registerServerRoutes(app, publicRoutes, wiring);
  // Last: the websocket plugin wraps the handler of every route declared after it.
  const { config, subscriptionSocket } = parts;
  if (subscriptionSocket)
    await registerSubscriptionSocketRoute(app, {
      hub: subscriptionSocket,
      bindTimeoutMs: config.wsBindTimeoutMs,
      maxPerAddress: config.wsMaxPerAddress,
      maxConnections: config.wsMaxConnections,
    });
  await app.ready();
  return app;
}

/** What the route groups share: the composed parts, and what the app derives from them. */
interface Wiring<S> {
  parts: AppParts<S>;
  baseUrlOf: (request: FastifyRequest) => string;
  resourceTypes: string[];
}

/** The Fastify instance, its logger the server's, with every route recorded in its route table. */
function createFastify(config: Config, log: Logger): FastifyInstance {
  const app = Fastify({
    loggerInstance: log as FastifyBaseLogger,
    logController: new OneLinePerRequest(),
    genReqId: requestId,
    bodyLimit: config.bodyLimit,
    // `%24op` and `$op` name the same operation; route on one spelling.
    rewriteUrl: (req) => rewriteDollar(req.url ?? '/'),
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors: frameworkErrorHandler({ bodyLimit: config.bodyLimit, maxParamLength: MAX_PARAM_LENGTH }),
    clientErrorHandler,
    ...connectionOptions(config),
    return503OnClosing: false,
    forceCloseConnections: 'idle',
  });
  const routes: AppRoute[] = [];
  routeTables.set(app, routes);
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat())
      routes.push({ method, url: route.url, public: route.config?.public === true });
  });
  return app;
}

/** What every request meets before its route: errors, ids, CORS, authentication, formats and bodies. */
function registerRequestHandling<S>(app: FastifyInstance, parts: AppParts<S>): PublicRoutes {
  const { config } = parts;
  registerErrorHandling(app, { bodyLimit: config.bodyLimit });
  registerRequestId(app);
  registerEarlyAnswerClose(app);
  registerUrlGuard(app);
  // Both before authentication: a preflight carries no token, and the public pages need none.
  registerCors(app, config.corsOrigins);
  const publicRoutes = registerPublicRoutes(app);
  registerAuth(app, {
    tokens: config.authTokens,
    base: FHIR_BASE,
    verify: parts.oauth?.verify,
    projectExists: parts.oauth?.projectExists,
  });
  app.addHook('onRequest', (request, reply, done) => {
    // Pages for people (the sign-in form) are HTML whatever the browser accepts.
    if (request.routeOptions.config?.html === true) return done();
    const format = (request.query as { _format?: string } | undefined)?._format;
    const accept = request.headers.accept;
    if (acceptsJson(accept, format)) return done();
    sendError(reply, fhirError('ERR_FORMAT_NOT_ACCEPTABLE', { accept: String(format ?? accept).slice(0, 100) }));
  });
  registerFhirJson(app, { bodyLimit: config.bodyLimit });
  registerFormBodies(app);
  return publicRoutes;
}

/** The FHIR API under the base: metadata, operations, bulk export, the jobs view, and the REST catch-all. */
function registerFhirRoutes<S>(app: FastifyInstance, { parts, baseUrlOf, resourceTypes }: Wiring<S>): void {
  const { config, registry } = parts;
  registerMetadataRoute(app, {
    baseUrlOf,
    security: (base) => securityOf(base, parts.oauth !== undefined),
    base: FHIR_BASE,
    registry,
    resourceTypes,
    readOnlyTypes: READ_ONLY_TYPES,
    searchParams: parts.searchParams,
    searchParamsRevision: parts.searchParamsRevision,
    software: parts.software,
    decorate: parts.decorateCapabilities,
    modes: parts.metadataModes,
  });
  const contextOf = (request: FastifyRequest) => requestContext(request, baseUrlOf(request), config.operationTimeoutMs);
  registerOperationRoutes(app, {
    base: FHIR_BASE,
    registry,
    invoker: parts.invoker,
    rest: parts.rest,
    answers: new AnswerCache({ maxTotalBytes: config.answerCacheBytes }),
    contextOf,
    bodyLimit: config.bodyLimit,
  });
  if (parts.bulk) registerBulkRoutes(app, { base: FHIR_BASE, exports: parts.bulk, contextOf });
  if (parts.jobs) registerAdminRoutes(app, { jobs: parts.jobs, contextOf });
  registerResourceRoutes(app, { base: FHIR_BASE, rest: parts.rest, contextOf });
}

/** The server's own pages beside the API: sign-in, health, the docs and the console. */
function registerServerRoutes<S>(
  app: FastifyInstance,
  publicRoutes: PublicRoutes,
  { parts, baseUrlOf, resourceTypes }: Wiring<S>,
): void {
  const { config, registry } = parts;
  if (parts.oauth) {
    const tokenUrls = tokenEndpoints({
      baseUrl: config.baseUrl,
      basePath: FHIR_BASE,
      host: config.host,
      port: config.port,
      hostname: hostname(),
    });
    registerOAuthRoutes(app, {
      auth: parts.oauth.auth,
      keys: parts.oauth.keys,
      baseUrlOf,
      fhirBase: FHIR_BASE,
      tokenEndpoints: tokenUrls,
    });
  }
  registerHealthRoutes(publicRoutes, parts.readiness ?? {});
  registerDocsRoutes(publicRoutes, {
    source: {
      base: FHIR_BASE,
      title: parts.software.name,
      version: parts.software.version,
      resourceTypes,
      readOnlyTypes: READ_ONLY_TYPES,
      operations: registry.operations.map((op) => op.spec),
      searchParams: parts.searchParams,
      oauth: parts.oauth !== undefined,
      bulk: parts.bulk !== undefined,
      admin: parts.jobs !== undefined,
      subscriptionSocket: parts.subscriptionSocket !== undefined,
    },
    revision: parts.searchParamsRevision,
  });
  registerConsoleRoutes(publicRoutes);
}

/** The CapabilityStatement's security: SMART on FHIR with its OAuth URIs when sign-in is on. */
function securityOf(base: string, oauth: boolean): CapabilityStatementRestSecurity {
  if (!oauth)
    return { cors: false, description: 'Bearer tokens (Authorization: Bearer <token>) when AUTH_TOKENS is configured' };
  const uris = oauthUris(base, FHIR_BASE);
  return {
    cors: false,
    service: [
      {
        coding: [{ system: 'http://terminology.hl7.org/CodeSystem/restful-security-service', code: 'SMART-on-FHIR' }],
        text: 'OAuth2 using SMART-on-FHIR profile (see http://docs.smarthealthit.org)',
      },
    ],
    description:
      "Bearer tokens: access tokens from the token endpoint (SMART App Launch, Backend Services), or the operators' AUTH_TOKENS",
    extension: [
      {
        url: 'http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris',
        extension: [
          { url: 'authorize', valueUri: uris.authorize },
          { url: 'token', valueUri: uris.token },
        ],
      },
    ],
  };
}

function rewriteDollar(url: string): string {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  if (!/%24/i.test(path)) return url;
  return path.replace(/%24/gi, '$') + (q < 0 ? '' : url.slice(q));
}
