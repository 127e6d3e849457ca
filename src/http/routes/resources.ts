import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { RequestContext } from '../../context/request-context';
import { FHIR_JSON } from '../../fhir/outcome';
import { emptyQuery } from '../../fhir/query';
import type { FhirMethod, FhirRequest, FhirResponse, RequestHeaders } from '../../rest/fhir-request';
import type { RestService } from '../../rest/rest-service';
import { FormBody } from '../fhir-json';

export interface ResourceRouteDeps {
  base: string;
  rest: RestService;
  /** The context of a request: its project, deadline, base URL. */
  contextOf: (request: FastifyRequest) => RequestContext;
}

const METHODS: FhirMethod[] = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH'];
const HONOURED_HEADERS: (keyof RequestHeaders)[] = [
  'if-match',
  'if-none-match',
  'if-modified-since',
  'if-none-exist',
  'content-type',
];

/**
 * Everything under the base that is not an operation or metadata: translated into a FhirRequest
 * for the REST core, whose answer is translated back. Operation routes (static `$code` segments)
 * and metadata win over this catch-all in the router.
 */
export function registerResourceRoutes(app: FastifyInstance, deps: ResourceRouteDeps): void {
  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    const fhirRequest = toFhirRequest(request, deps.base);
    const response = await deps.rest.handle(fhirRequest, deps.contextOf(request));
    return send(reply, response, fhirRequest.query._pretty?.[0] === 'true');
  };
  app.route({ method: METHODS, url: deps.base, handler });
  app.route({ method: METHODS, url: `${deps.base}/*`, handler });
}

function toFhirRequest(request: FastifyRequest, base: string): FhirRequest {
  const url = request.url;
  const q = url.indexOf('?');
  const path = decodePath((q < 0 ? url : url.slice(0, q)).slice(base.length).replace(/^\/+/, ''));
  const query = queryOf(request.query as Record<string, string | string[] | undefined>);
  // A search by POST carries its parameters in a form body, with those of the URL.
  if (request.body instanceof FormBody) {
    for (const [name, value] of request.body.params) (query[name] ??= []).push(value);
  }
  const headers: RequestHeaders = {};
  for (const name of HONOURED_HEADERS) {
    const value = request.headers[name];
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  const body = request.body instanceof FormBody ? undefined : request.body;
  return { method: request.method as FhirMethod, path, query, headers, body };
}

function decodePath(path: string): string {
  try {
    return path.split('/').map(decodeURIComponent).join('/');
  } catch {
    return path;
  }
}

export function queryOf(query: Record<string, string | string[] | undefined>): Record<string, string[]> {
  const out = emptyQuery();
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value === undefined) continue;
    out[name] = Array.isArray(value) ? value : [value];
  }
  return out;
}

function send(reply: FastifyReply, response: FhirResponse, pretty: boolean): FastifyReply {
  reply.code(response.status).headers(response.headers);
  if (response.body === undefined) return reply.send();
  return reply.type(FHIR_JSON).send(pretty ? JSON.stringify(response.body, null, 2) : response.body);
}
