import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Bundle, BundleEntry, Resource } from 'fhir/r4';
import { fhirError } from '../../fhir/errors';
import { FHIR_JSON } from '../../fhir/outcome';
import type { ResourceSchema } from '../../fhir/resource-schema';
import type { OperationRegistry } from '../../operations/registry';
import { ID_PATTERN, type Repository } from '../../storage/repository';
import type { StoredVersion } from '../../storage/store';
import { unknownOperation } from './operations';

export interface ResourceRouteDeps<S> {
  base: string;
  repository: Repository;
  schema: ResourceSchema;
  registry: OperationRegistry<S>;
  /** Types answered elsewhere (read-only, from the registry or bundled content). */
  reservedTypes: ReadonlySet<string>;
}

type Params = { type: string; id: string; vid: string; op: string };

const DEFAULT_COUNT = 50;
const MAX_COUNT = 1000;

/** create, read, vread, update, delete, history and canonical search for every R4 resource type. */
export function registerResourceRoutes<S>(app: FastifyInstance, deps: ResourceRouteDeps<S>): void {
  const { base, repository } = deps;
  const known = (request: FastifyRequest, level: 'system' | 'type'): string => {
    const { type, id } = request.params as Params;
    if (type.startsWith('$')) throw unknownOperation(deps.registry, type.slice(1), 'system');
    if (!deps.schema.isResourceType(type)) throw fhirError('ERR_TYPE_UNKNOWN', { type });
    if (level === 'type' && id?.startsWith('$')) throw unknownOperation(deps.registry, id.slice(1), 'type', type);
    return type;
  };
  const writable = (request: FastifyRequest, level: 'system' | 'type'): string => {
    const type = known(request, level);
    if (deps.reservedTypes.has(type)) throw fhirError('ERR_TYPE_READ_ONLY', { type });
    return type;
  };
  const idOf = (request: FastifyRequest): string => {
    const { id } = request.params as Params;
    if (!ID_PATTERN.test(id)) throw fhirError('ERR_RESOURCE_ID_INVALID', { id });
    return id;
  };

  app.get(`${base}/:type`, async (request, reply) => {
    const type = known(request, 'system');
    const query = request.query as Record<string, string | string[] | undefined>;
    const page = paging(query);
    const filter = { url: single(query, 'url'), version: single(query, 'version'), id: single(query, '_id') };
    const { total, resources } = await repository.search(type, filter, page);
    const self = searchLink(request, base, type, filter, page);
    const bundle: Bundle = {
      resourceType: 'Bundle',
      type: 'searchset',
      total,
      link: [{ relation: 'self', url: self }],
      entry: resources.map((v) => entryOf(request, base, v, { search: { mode: 'match' } })),
    };
    if (page.offset + page.count < total) {
      bundle.link?.push({ relation: 'next', url: searchLink(request, base, type, filter, { ...page, offset: page.offset + page.count }) });
    }
    return reply.type(FHIR_JSON).send(bundle);
  });

  app.post(`${base}/:type`, async (request, reply) => {
    const type = writable(request, 'system');
    const resource = bodyResource(request, type);
    deps.schema.check(type, resource);
    const { version } = await repository.create(type, resource);
    return sendVersion(request, reply, base, version, 201);
  });

  app.get(`${base}/:type/:id`, async (request, reply) => {
    const type = known(request, 'type');
    const version = await repository.read(type, idOf(request));
    if (notModified(request, version)) return reply.code(304).headers(versionHeaders(version)).send();
    return sendVersion(request, reply, base, version, 200);
  });

  app.put(`${base}/:type/:id`, async (request, reply) => {
    const type = writable(request, 'type');
    const id = idOf(request);
    const resource = bodyResource(request, type);
    if (resource.id === undefined) throw fhirError('ERR_RESOURCE_ID_MISSING', {});
    if (resource.id !== id) throw fhirError('ERR_RESOURCE_ID_MISMATCH', { url: id, body: String(resource.id) });
    deps.schema.check(type, resource);
    const { version, created } = await repository.update(type, id, resource, { ifMatch: ifMatch(request) });
    return sendVersion(request, reply, base, version, created ? 201 : 200);
  });

  app.delete(`${base}/:type/:id`, async (request, reply) => {
    const type = writable(request, 'type');
    await repository.delete(type, idOf(request), { ifMatch: ifMatch(request) });
    return reply.code(204).send();
  });

  app.get(`${base}/:type/:id/_history`, async (request, reply) => {
    const type = known(request, 'type');
    const versions = await repository.history(type, idOf(request));
    const bundle: Bundle = {
      resourceType: 'Bundle',
      type: 'history',
      total: versions.length,
      entry: versions.map((v) =>
        v.resource === null
          ? { fullUrl: `${baseUrl(request, base)}/${v.type}/${v.id}`, request: { method: 'DELETE', url: `${v.type}/${v.id}` }, response: { status: '204', lastModified: v.lastUpdated, etag: etag(v) } }
          : entryOf(request, base, v, { response: { status: v.versionId === 1 ? '201' : '200', lastModified: v.lastUpdated, etag: etag(v) } }),
      ),
    };
    return reply.type(FHIR_JSON).send(bundle);
  });

  app.get(`${base}/:type/:id/_history/:vid`, async (request, reply) => {
    const type = known(request, 'type');
    const id = idOf(request);
    const { vid } = request.params as Params;
    if (!/^[1-9][0-9]{0,9}$/.test(vid)) throw fhirError('ERR_VERSION_NOT_FOUND', { type, id, vid });
    const version = await repository.vread(type, id, Number(vid));
    return sendVersion(request, reply, base, version, 200);
  });

  // What remains under the base: methods a path does not take, and operations nobody defines.
  const refuse = (allowed: string) => async (request: FastifyRequest) => {
    const { type, id } = request.params as Params;
    if (type?.startsWith('$')) throw unknownOperation(deps.registry, type.slice(1), 'system');
    if (id?.startsWith('$')) throw unknownOperation(deps.registry, id.slice(1), 'type', type);
    known(request, id === undefined ? 'system' : 'type');
    throw fhirError('ERR_ROUTE_METHOD', { method: request.method, path: request.url.split('?')[0], allowed }, { headers: { allow: allowed } });
  };
  app.route({ method: ['PUT', 'DELETE', 'PATCH'], url: `${base}/:type`, handler: refuse('GET, POST') });
  app.route({ method: ['POST', 'PATCH'], url: `${base}/:type/:id`, handler: refuse('GET, PUT, DELETE') });
  app.route({
    method: ['GET', 'POST'],
    url: `${base}/:type/:id/:op`,
    handler: async (request) => {
      const { type, id, op } = request.params as Params;
      known(request, 'type');
      if (op.startsWith('$')) throw unknownOperation(deps.registry, op.slice(1), 'instance', type);
      throw fhirError('ERR_ROUTE_UNKNOWN', { method: request.method, path: `${base}/${type}/${id}/${op}` });
    },
  });
}

function bodyResource(request: FastifyRequest, type: string): Resource {
  const body = request.body as { resourceType?: unknown } | undefined;
  if (body === undefined) throw fhirError('ERR_BODY_MISSING', {});
  if (typeof body !== 'object' || body === null || Array.isArray(body) || typeof body.resourceType !== 'string') {
    throw fhirError('ERR_BODY_NOT_RESOURCE', { expected: type });
  }
  if (body.resourceType !== type) throw fhirError('ERR_RESOURCE_TYPE_MISMATCH', { expected: type, found: body.resourceType });
  return body as Resource;
}

/** `W/"3"` or `"3"` -> 3. */
function ifMatch(request: FastifyRequest): number | undefined {
  const raw = request.headers['if-match'];
  if (raw === undefined) return undefined;
  const match = /^\s*(W\/)?"([1-9][0-9]{0,9})"\s*$/.exec(String(raw));
  if (!match) throw fhirError('ERR_VERSION_IF_MATCH_INVALID', { value: String(raw).slice(0, 50) });
  return Number(match[2]);
}

function notModified(request: FastifyRequest, version: StoredVersion): boolean {
  const raw = request.headers['if-none-match'];
  return typeof raw === 'string' && raw.split(',').some((tag) => tag.trim().replace(/^W\//, '') === `"${version.versionId}"`);
}

export function etag(version: StoredVersion): string {
  return `W/"${version.versionId}"`;
}

function versionHeaders(version: StoredVersion): Record<string, string> {
  return { etag: etag(version), 'last-modified': new Date(version.lastUpdated).toUTCString() };
}

function sendVersion(request: FastifyRequest, reply: FastifyReply, base: string, version: StoredVersion, status: number) {
  const headers = versionHeaders(version);
  if (status === 201) {
    headers.location = `${baseUrl(request, base)}/${version.type}/${version.id}/_history/${version.versionId}`;
  }
  reply.code(status).headers(headers);
  if (/return\s*=\s*minimal/i.test(String(request.headers.prefer ?? ''))) return reply.send();
  return reply.type(FHIR_JSON).send(version.resource);
}

export function baseUrl(request: FastifyRequest, base: string): string {
  return `${request.protocol}://${request.host}${base}`;
}

function entryOf(request: FastifyRequest, base: string, version: StoredVersion, extra: Partial<BundleEntry>): BundleEntry {
  return { fullUrl: `${baseUrl(request, base)}/${version.type}/${version.id}`, resource: version.resource as Resource, ...extra };
}

function single(query: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = query[name];
  if (value === undefined) return undefined;
  if (Array.isArray(value)) throw fhirError('ERR_SEARCH_PARAM', { name, value: value.join(',') });
  return value;
}

function paging(query: Record<string, string | string[] | undefined>) {
  const count = single(query, '_count');
  const offset = single(query, '_offset');
  if (count !== undefined && !/^\d{1,6}$/.test(count)) throw fhirError('ERR_SEARCH_PARAM', { name: '_count', value: count });
  if (offset !== undefined && !/^\d{1,9}$/.test(offset)) throw fhirError('ERR_SEARCH_PARAM', { name: '_offset', value: offset });
  return { count: Math.min(count === undefined ? DEFAULT_COUNT : Number(count), MAX_COUNT), offset: offset === undefined ? 0 : Number(offset) };
}

function searchLink(
  request: FastifyRequest,
  base: string,
  type: string,
  filter: Record<string, string | undefined>,
  page: { count: number; offset: number },
): string {
  const params = new URLSearchParams();
  if (filter.url !== undefined) params.set('url', filter.url);
  if (filter.version !== undefined) params.set('version', filter.version);
  if (filter.id !== undefined) params.set('_id', filter.id);
  params.set('_count', String(page.count));
  if (page.offset > 0) params.set('_offset', String(page.offset));
  return `${baseUrl(request, base)}/${type}?${params.toString()}`;
}
