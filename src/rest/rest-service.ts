import type { Bundle, Resource } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import { fhirError, type FhirError } from '../fhir/errors';
import { builtInVersion, type SearchHandler } from '../search/search-service';
import { ID_PATTERN, type Repository } from '../storage/repository';
import type { StoredVersion } from '../storage/store';
import { parsePath, type FhirRequest, type FhirResponse, type Target } from './fhir-request';
import { bundleResponse, historyEntry, versionResponse } from './responses';

/**
 * The FHIR RESTful API without HTTP: a FhirRequest in, a FhirResponse out. The HTTP routes only
 * translate; a transaction entry, GraphQL or a bot's client come in here the same way.
 */

export interface ReadOnlySource {
  /** Resources served from the server itself (OperationDefinitions from the registry, bundled content). */
  read(type: string, id: string): Resource | undefined;
}

export interface RestDeps {
  repository: Repository;
  /** The resource types the server serves. */
  isResourceType(type: string): boolean;
  /** Types nobody may write (served from the server itself). */
  readOnlyTypes: ReadonlySet<string>;
  /** Structural check of a resource before it is stored; throws a FhirError. */
  checkResource(type: string, resource: Resource): void;
  search: SearchHandler;
  /** Resources that exist without being stored (bundled R4 content, the operation registry). */
  builtIn?: ReadOnlySource;
  /** Brings what requests depend on up to date (stored search parameters) before one is answered. */
  beforeRequest?: () => Promise<void>;
  /** The answer for `$code` that no operation route took (wrong level, or unknown). */
  unknownOperation(code: string, level: 'system' | 'type' | 'instance', type?: string): FhirError;
}

export class RestService {
  constructor(private readonly deps: RestDeps) {}

  async handle(request: FhirRequest, ctx: RequestContext): Promise<FhirResponse> {
    await this.deps.beforeRequest?.();
    const target = parsePath(request.path);
    const method = request.method === 'HEAD' ? 'GET' : request.method;
    switch (target.kind) {
      case 'operation':
        throw this.deps.unknownOperation(target.code, target.id !== undefined ? 'instance' : target.type ? 'type' : 'system', target.type);
      case 'system':
        if (method === 'GET') return bundleResponse(await this.deps.search.search({ level: 'system' }, request.query, ctx));
        throw notAllowed(request, 'GET');
      case 'system-search':
        if (method === 'POST') return bundleResponse(await this.deps.search.search({ level: 'system' }, request.query, ctx));
        throw notAllowed(request, 'POST');
      case 'type':
        this.knownType(target.type);
        if (method === 'GET') return bundleResponse(await this.deps.search.search({ level: 'type', type: target.type }, request.query, ctx));
        if (method === 'POST') return this.create(target.type, request, ctx);
        throw notAllowed(request, 'GET, POST');
      case 'type-search':
        this.knownType(target.type);
        if (method === 'POST') return bundleResponse(await this.deps.search.search({ level: 'type', type: target.type }, request.query, ctx));
        throw notAllowed(request, 'POST');
      case 'instance':
        this.knownType(target.type);
        checkId(target.id);
        if (method === 'GET') return this.read(target.type, target.id, request, ctx);
        if (method === 'PUT') return this.update(target.type, target.id, request, ctx);
        if (method === 'DELETE') return this.delete(target.type, target.id, request);
        throw notAllowed(request, 'GET, PUT, DELETE');
      case 'instance-history':
        this.knownType(target.type);
        checkId(target.id);
        if (method === 'GET') return this.history(target.type, target.id, ctx);
        throw notAllowed(request, 'GET');
      case 'version':
        this.knownType(target.type);
        checkId(target.id);
        if (method === 'GET') return this.vread(target, ctx);
        throw notAllowed(request, 'GET');
      case 'compartment':
        this.knownType(target.compartment);
        checkId(target.id);
        if (target.type !== '*') this.knownType(target.type);
        if (method === 'GET') return bundleResponse(await this.deps.search.search({ level: 'compartment', ...target }, request.query, ctx));
        throw notAllowed(request, 'GET');
      default:
        throw fhirError('ERR_ROUTE_UNKNOWN', { method: request.method, path: clip(`/${request.path}`) });
    }
  }

  private knownType(type: string): void {
    if (!this.deps.isResourceType(type)) throw fhirError('ERR_TYPE_UNKNOWN', { type: clip(type) });
  }

  private writable(type: string): void {
    if (this.deps.readOnlyTypes.has(type)) throw fhirError('ERR_TYPE_READ_ONLY', { type });
  }

  private async read(type: string, id: string, request: FhirRequest, ctx: RequestContext): Promise<FhirResponse> {
    const version = await this.readVersion(type, id);
    if (notModified(request, version)) {
      const response = versionResponse(ctx, version, 304);
      return { status: 304, headers: response.headers };
    }
    return versionResponse(ctx, version, 200);
  }

  /** The current version; a resource the server itself holds when nothing is stored under that id. */
  private async readVersion(type: string, id: string): Promise<StoredVersion> {
    try {
      return await this.deps.repository.read(type, id);
    } catch (err) {
      const builtIn = this.deps.builtIn?.read(type, id);
      if (builtIn && (err as FhirError).code === 'ERR_RESOURCE_NOT_FOUND') return builtInVersion(builtIn);
      throw err;
    }
  }

  private async vread(target: Extract<Target, { kind: 'version' }>, ctx: RequestContext): Promise<FhirResponse> {
    const { type, id, vid } = target;
    if (!/^[1-9][0-9]{0,9}$/.test(vid)) throw fhirError('ERR_VERSION_NOT_FOUND', { type, id, vid: clip(vid) });
    const version = await this.deps.repository.vread(type, id, Number(vid));
    return versionResponse(ctx, version, 200);
  }

  private async create(type: string, request: FhirRequest, ctx: RequestContext): Promise<FhirResponse> {
    this.writable(type);
    const resource = bodyResource(request, type);
    this.deps.checkResource(type, resource);
    const { version } = await this.deps.repository.create(type, resource);
    return versionResponse(ctx, version, 201, { write: true });
  }

  private async update(type: string, id: string, request: FhirRequest, ctx: RequestContext): Promise<FhirResponse> {
    this.writable(type);
    const resource = bodyResource(request, type);
    if (resource.id === undefined) throw fhirError('ERR_RESOURCE_ID_MISSING', {});
    if (resource.id !== id) throw fhirError('ERR_RESOURCE_ID_MISMATCH', { url: id, body: clip(String(resource.id)) });
    this.deps.checkResource(type, resource);
    const { version, created } = await this.deps.repository.update(type, id, resource, { ifMatch: ifMatch(request) });
    return versionResponse(ctx, version, created ? 201 : 200, { write: true });
  }

  private async delete(type: string, id: string, request: FhirRequest): Promise<FhirResponse> {
    this.writable(type);
    await this.deps.repository.delete(type, id, { ifMatch: ifMatch(request) });
    return { status: 204, headers: {} };
  }

  private async history(type: string, id: string, ctx: RequestContext): Promise<FhirResponse> {
    const versions = await this.deps.repository.history(type, id);
    const bundle: Bundle = {
      resourceType: 'Bundle',
      type: 'history',
      total: versions.length,
      entry: versions.map((v, i) => historyEntry(ctx, v, i === versions.length - 1)),
    };
    return bundleResponse(bundle);
  }
}

function checkId(id: string): void {
  if (!ID_PATTERN.test(id)) throw fhirError('ERR_RESOURCE_ID_INVALID', { id: clip(id) });
}

export function bodyResource(request: FhirRequest, type: string): Resource {
  const body = request.body as { resourceType?: unknown } | undefined;
  if (body === undefined) throw fhirError('ERR_BODY_MISSING', {});
  if (typeof body !== 'object' || body === null || Array.isArray(body) || typeof body.resourceType !== 'string') {
    throw fhirError('ERR_BODY_NOT_RESOURCE', { expected: type });
  }
  if (body.resourceType !== type) throw fhirError('ERR_RESOURCE_TYPE_MISMATCH', { expected: type, found: clip(body.resourceType) });
  return body as Resource;
}

/** `W/"3"` or `"3"` -> 3. */
export function ifMatch(request: FhirRequest): number | undefined {
  const raw = request.headers['if-match'];
  if (raw === undefined) return undefined;
  const match = /^\s*(W\/)?"([1-9][0-9]{0,9})"\s*$/.exec(raw);
  if (!match) throw fhirError('ERR_VERSION_IF_MATCH_INVALID', { value: raw.slice(0, 50) });
  return Number(match[2]);
}

/** If-None-Match naming the current version, or If-Modified-Since not before the last change. */
function notModified(request: FhirRequest, version: StoredVersion): boolean {
  const noneMatch = request.headers['if-none-match'];
  if (noneMatch !== undefined) {
    return noneMatch.split(',').some((tag) => tag.trim() === '*' || tag.trim().replace(/^W\//, '') === `"${version.versionId}"`);
  }
  const since = request.headers['if-modified-since'];
  if (since !== undefined) {
    const at = Date.parse(since);
    // HTTP dates have whole seconds; a change within the same second is not "after".
    return Number.isFinite(at) && Math.floor(Date.parse(version.lastUpdated) / 1000) * 1000 <= at;
  }
  return false;
}

function notAllowed(request: FhirRequest, allowed: string): FhirError {
  return fhirError('ERR_ROUTE_METHOD', { method: request.method, path: clip(`/${request.path}`), allowed }, { headers: { allow: allowed } });
}

function clip(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}
