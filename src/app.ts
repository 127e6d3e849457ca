import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify';
import pino from 'pino';
import type { Config } from './config';
import { READ_ONLY_TYPES } from './core';
import { fhirError } from './fhir/errors';
import type { ResourceSchema } from './fhir/resource-schema';
import { registerAuth } from './http/auth';
import { registerCors } from './http/cors';
import { registerPublicRoutes } from './http/public-routes';
import { registerConsoleRoutes } from './http/routes/console';
import { registerDocsRoutes } from './http/routes/docs';
import { registerHealthRoutes, type ReadinessCheck } from './http/routes/health';
import { clientErrorHandler, frameworkErrorHandler, registerErrorHandling, sendError } from './http/errors';
import { acceptsJson, registerFhirJson, registerFormBodies } from './http/fhir-json';
import { OneLinePerRequest, registerRequestId, requestId } from './http/request-log';
import { registerMetadataRoute, type MetadataOptions } from './http/routes/metadata';
import { AnswerCache } from './http/answer-cache';
import { registerUrlGuard } from './http/url-guard';
import { baseUrlResolver } from './http/base-url';
import { connectionOptions, registerEarlyAnswerClose } from './http/connections';
import { registerOperationRoutes } from './http/routes/operations';
import { registerResourceRoutes, requestContext } from './http/routes/resources';
import { OperationInvoker } from './operations/invoke';
import type { OperationRegistry } from './operations/registry';
import type { RestService } from './rest/rest-service';
import type { SearchParam } from './search/registry';

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
  services: S;
  software: MetadataOptions<S>['software'];
  decorateCapabilities?: MetadataOptions<S>['decorate'];
  metadataModes?: MetadataOptions<S>['modes'];
  /** What `/readyz` checks (storage reachable, content loaded), by name. */
  readiness?: Record<string, ReadinessCheck>;
  /** Where log lines go; stdout when not given. */
  logStream?: NodeJS.WritableStream;
}

/** Every route an app serves (method and URL pattern), for tests that must cover them all. */
const routeTables = new WeakMap<FastifyInstance, { method: string; url: string }[]>();

export function routesOf(app: FastifyInstance): readonly { method: string; url: string }[] {
  return routeTables.get(app) ?? [];
}

/** Longest path segment (an id, an operation code) the router takes; FHIR ids are at most 64. */
const MAX_PARAM_LENGTH = 200;

/** Builds the Fastify app with every plugin in order. It never listens; `server.ts` does. */
export async function buildApp<S>(parts: AppParts<S>): Promise<FastifyInstance> {
  const { config, registry } = parts;
  const logger = pino(
    { level: config.logLevel, redact: ['req.headers.authorization', 'headers.authorization'] },
    parts.logStream ?? process.stdout,
  );
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
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

  const routes: { method: string; url: string }[] = [];
  routeTables.set(app, routes);
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) routes.push({ method, url: route.url });
  });
  registerErrorHandling(app, { bodyLimit: config.bodyLimit });
  registerRequestId(app);
  registerEarlyAnswerClose(app);
  registerUrlGuard(app);
  // Both before authentication: a preflight carries no token, and the public pages need none.
  registerCors(app, config.corsOrigins);
  const publicRoutes = registerPublicRoutes(app);
  registerAuth(app, { tokens: config.authTokens, base: FHIR_BASE });
  app.addHook('onRequest', (request, reply, done) => {
    const format = (request.query as { _format?: string } | undefined)?._format;
    const accept = request.headers.accept;
    if (acceptsJson(accept, format)) return done();
    sendError(reply, fhirError('ERR_FORMAT_NOT_ACCEPTABLE', { accept: String(format ?? accept).slice(0, 100) }));
  });
  registerFhirJson(app, { bodyLimit: config.bodyLimit });
  registerFormBodies(app);

  const resourceTypes = [...parts.schema.resourceTypes].sort();
  registerMetadataRoute(app, {
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
  // Every absolute URL the app writes starts here (BASE_URL when configured).
  const baseUrlOf = baseUrlResolver({ baseUrl: config.baseUrl, basePath: FHIR_BASE });
  const invoker = new OperationInvoker<S>({
    registry,
    services: parts.services,
    checkResource: (resource, at) => {
      if (!parts.schema.isResourceType(resource.resourceType)) {
        throw fhirError('ERR_PARAM_VALUE', { name: at, type: 'R4 resource', value: String(resource.resourceType).slice(0, 100) }, { expression: [at] });
      }
      // A Parameters given as a parameter is some operation's input: read and checked against that
      // operation's definition when it is used (with the same tolerance as a request body).
      if (resource.resourceType !== 'Parameters') parts.schema.check(resource.resourceType, resource, { partial: true });
    },
    // Instance-level operations may name built-in content (ValueSet/administrative-gender).
    readInstance: (type, id, ctx) => parts.rest.readResource(type, id, ctx),
  });
  // Bundle entries that name an operation run it through the same invoker.
  parts.rest.useOperations((call, ctx) => invoker.invoke({ ...call, level: call.id !== undefined ? 'instance' : call.type ? 'type' : 'system', headers: {} }, ctx));
  const contextOf = (request: FastifyRequest) => requestContext(request, baseUrlOf(request), config.operationTimeoutMs);
  registerOperationRoutes(app, {
    base: FHIR_BASE,
    registry,
    invoker,
    answers: new AnswerCache({ maxTotalBytes: config.answerCacheBytes }),
    contextOf,
  });
  registerResourceRoutes(app, { base: FHIR_BASE, rest: parts.rest, contextOf });
  registerHealthRoutes(publicRoutes, parts.readiness ?? {});
  registerDocsRoutes(publicRoutes, {
    source: { base: FHIR_BASE, title: parts.software.name, version: parts.software.version, resourceTypes, readOnlyTypes: READ_ONLY_TYPES, operations: registry.operations.map((op) => op.spec), searchParams: parts.searchParams },
    revision: parts.searchParamsRevision,
  });
  registerConsoleRoutes(publicRoutes);
  await app.ready();
  return app;
}

function rewriteDollar(url: string): string {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  if (!/%24/i.test(path)) return url;
  return path.replace(/%24/gi, '$') + (q < 0 ? '' : url.slice(q));
}
