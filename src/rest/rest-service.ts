import type { Resource } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import { fhirError, type FhirError } from '../fhir/errors';
import { builtInVersion, type SearchHandler } from '../search/search-service';
import type { Repository } from '../storage/repository';
import { SHARED_TYPES, SYSTEM_PROJECT, type StoredVersion } from '../storage/store';
import { parsePath, type FhirRequest, type FhirResponse, type Target } from './fhir-request';
import type { ElementModel } from '../fhir/model/model';
import { processBundle, type BundleDeps } from './bundle';
import { history } from './history';
import { bundleResponse, versionResponse } from './responses';
import * as writes from './writes';
import { isLimited, type AccessGuard } from '../auth/guard';
import { SYSTEM_SCOPE_TYPES } from '../fhir/admin-types';
import type { Matcher } from './writes';
import type { PatchBounds } from './patch-bounds';
import { operationResponse, type OperationCall, type OperationDoor } from './operations';
import type { LateBound } from '../late-bound';
import { criteriaOf, checkId, bodyResource, patchOf, ifMatch, notModified, notAllowed, clip } from './request-parts';

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
  checkResource(type: string, resource: Resource, ctx: RequestContext): void;
  /** Full validation before a write, when the server or the request asks for it. */
  validate?(resource: Resource, ctx: RequestContext): Promise<void>;
  search: SearchHandler & Matcher;
  model: ElementModel;
  /** Resources that exist without being stored (bundled R4 content, the operation registry). */
  builtIn?: ReadOnlySource;
  /** Brings what requests depend on up to date (stored search parameters) before one is answered. */
  beforeRequest?: () => Promise<void>;
  /** The answer for `$code` that no operation route took (wrong level, or unknown). */
  unknownOperation(code: string, level: 'system' | 'type' | 'instance', type?: string): FhirError;
  /** Most resources one conditional delete removes; most entries in one Bundle; what bounds a PATCH. */
  limits: { conditionalDeletes: number; bundleEntries: number; patch: Omit<PatchBounds, 'budget'> };
  /** What the request's principal may read and write. */
  guard: AccessGuard;
  /**
   * What runs operations, bound once they exist (their handlers use this service: a late binding);
   * unbound or absent, every operation is unknown.
   */
  operations?: LateBound<OperationDoor>;
}

export class RestService {
  constructor(private readonly deps: RestDeps) {}

  async handle(request: FhirRequest, ctx: RequestContext): Promise<FhirResponse> {
    await this.deps.beforeRequest?.();
    const target = parsePath(request.path);
    // Projects and users are kept in the system scope, whichever project the request acts in.
    if (
      'type' in target &&
      target.kind !== 'compartment' &&
      target.kind !== 'operation' &&
      SYSTEM_SCOPE_TYPES.has(target.type)
    )
      ctx = { ...ctx, project: SYSTEM_PROJECT };
    switch (target.kind) {
      case 'operation':
        return this.entryOperation(target, request, ctx);
      case 'system':
      case 'system-search':
      case 'system-history':
        return this.systemLevel(target, request, ctx);
      case 'type':
      case 'type-search':
      case 'type-history':
        return this.typeLevel(target, request, ctx);
      case 'instance':
      case 'instance-history':
      case 'version':
      case 'compartment':
        return this.instanceLevel(target, request, ctx);
      default:
        throw fhirError('ERR_ROUTE_UNKNOWN', { method: request.method, path: clip(`/${request.path}`) });
    }
  }

  /** Search, batch/transaction and history of the whole server. */
  private async systemLevel(
    target: Extract<Target, { kind: 'system' | 'system-search' | 'system-history' }>,
    request: FhirRequest,
    ctx: RequestContext,
  ): Promise<FhirResponse> {
    const method = request.method === 'HEAD' ? 'GET' : request.method;
    const query = request.query;
    switch (target.kind) {
      case 'system':
        if (method === 'GET') return bundleResponse(await this.deps.search.search({ level: 'system' }, query, ctx));
        if (method === 'POST') return bundleResponse(await processBundle(request.body, ctx, this.bundleDeps()));
        throw notAllowed(request, 'GET, POST');
      case 'system-search':
        if (method === 'POST') return bundleResponse(await this.deps.search.search({ level: 'system' }, query, ctx));
        throw notAllowed(request, 'POST');
      case 'system-history':
        this.deps.guard.allowAll(ctx.principal, 'history');
        if (method === 'GET') return bundleResponse(await history(this.deps.repository.store, {}, query, ctx));
        throw notAllowed(request, 'GET');
    }
  }

  /** Search, create, conditional writes and history of a type. */
  private async typeLevel(
    target: Extract<Target, { kind: 'type' | 'type-search' | 'type-history' }>,
    request: FhirRequest,
    ctx: RequestContext,
  ): Promise<FhirResponse> {
    const method = request.method === 'HEAD' ? 'GET' : request.method;
    const query = request.query;
    switch (target.kind) {
      case 'type': {
        this.knownType(target.type);
        const type = target.type;
        if (method === 'GET') return bundleResponse(await this.deps.search.search({ level: 'type', type }, query, ctx));
        this.writable(type);
        const criteria = criteriaOf(request);
        if (method === 'POST') {
          const resource = bodyResource(request, type);
          const ifNoneExist = request.headers['if-none-exist'];
          return this.write(ctx, (w) => writes.create(w, type, resource, { ifNoneExist }));
        }
        if (criteria === undefined) throw notAllowed(request, 'GET, POST');
        if (method === 'PUT')
          return this.write(ctx, (w) =>
            writes.conditionalUpdate(w, type, criteria, bodyResource(request, type), ifMatch(request)),
          );
        if (method === 'DELETE') return this.write(ctx, (w) => writes.conditionalDelete(w, type, criteria));
        if (method === 'PATCH')
          return this.write(ctx, (w) => writes.conditionalPatch(w, { type, criteria, ...patchOf(request) }));
        throw notAllowed(request, 'GET, POST, PUT, DELETE, PATCH');
      }
      case 'type-search':
        this.knownType(target.type);
        if (method === 'POST')
          return bundleResponse(await this.deps.search.search({ level: 'type', type: target.type }, query, ctx));
        throw notAllowed(request, 'POST');
      case 'type-history':
        this.knownType(target.type);
        this.unlimited(ctx, 'history', target.type);
        if (method === 'GET')
          return bundleResponse(await history(this.deps.repository.store, { type: target.type }, query, ctx));
        throw notAllowed(request, 'GET');
    }
  }

  /** Read, update, delete, patch, history and versions of a resource, and searches of its compartment. */
  private async instanceLevel(
    target: Extract<Target, { kind: 'instance' | 'instance-history' | 'version' | 'compartment' }>,
    request: FhirRequest,
    ctx: RequestContext,
  ): Promise<FhirResponse> {
    const method = request.method === 'HEAD' ? 'GET' : request.method;
    const query = request.query;
    switch (target.kind) {
      case 'instance': {
        this.knownType(target.type);
        checkId(target.id);
        const { type, id } = target;
        if (method === 'GET') return this.read(type, id, request, ctx);
        this.writable(type);
        if (method === 'PUT')
          return this.write(ctx, (w) => writes.update(w, type, id, bodyResource(request, type), ifMatch(request)));
        if (method === 'DELETE') return this.write(ctx, (w) => writes.remove(w, type, id, ifMatch(request)));
        if (method === 'PATCH') return this.write(ctx, (w) => writes.patch(w, { type, id, ...patchOf(request) }));
        throw notAllowed(request, 'GET, PUT, DELETE, PATCH');
      }
      case 'instance-history':
        this.knownType(target.type);
        checkId(target.id);
        await this.readable(target.type, target.id, ctx, 'history');
        if (method === 'GET')
          return bundleResponse(
            await history(this.deps.repository.store, { type: target.type, id: target.id }, query, ctx),
          );
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
        if (method === 'GET')
          return bundleResponse(await this.deps.search.search({ level: 'compartment', ...target }, query, ctx));
        throw notAllowed(request, 'GET');
    }
  }

  /**
   * 403 when the principal may not do this to the type; 404 when the resource is outside what it
   * may see (a member's own Project, a patient's compartment): whether it exists is not told.
   */
  private async readable(
    type: string,
    id: string,
    ctx: RequestContext,
    interaction: 'read' | 'history',
  ): Promise<void> {
    const grant = this.deps.guard.allow(ctx.principal, interaction, type);
    if (!isLimited(grant)) return;
    const current = await this.readVersion(type, id, ctx.project).catch(() => undefined);
    if (!current?.resource || !this.deps.guard.covers(grant, current.resource))
      throw fhirError('ERR_RESOURCE_NOT_FOUND', { type, id });
  }

  /** Interactions over a whole type need the type without limits (a patient's compartment cannot be cut out of a type's history). */
  private unlimited(ctx: RequestContext, interaction: 'history', type: string): void {
    const grant = this.deps.guard.allow(ctx.principal, interaction, type);
    if (isLimited(grant))
      throw fhirError('ERR_AUTH_FORBIDDEN', {
        reason: `the ${interaction} of every ${type} is beyond what the token may see`,
      });
  }

  private write(ctx: RequestContext, work: (w: writes.Writes) => Promise<FhirResponse>): Promise<FhirResponse> {
    return this.deps.repository.in(ctx.project).transaction((tx) => work({ tx, ctx, deps: this.writeDeps() }));
  }

  private writeDeps(): writes.WriteDeps {
    return {
      checkResource: this.deps.checkResource,
      validate: this.deps.validate,
      search: this.deps.search,
      model: this.deps.model,
      maxConditionalDeletes: this.deps.limits.conditionalDeletes,
      patchLimits: this.deps.limits.patch,
      guard: this.deps.guard,
    };
  }

  private bundleDeps(): BundleDeps {
    return {
      ...this.writeDeps(),
      repository: this.deps.repository,
      isResourceType: this.deps.isResourceType,
      readOnlyTypes: this.deps.readOnlyTypes,
      handle: (request, ctx) => this.handle(request, ctx),
      maxEntries: this.deps.limits.bundleEntries,
    };
  }

  /** An operation named by a path (a Bundle entry's, a bot's): the operation interaction, without headers. */
  private entryOperation(
    target: Extract<Target, { kind: 'operation' }>,
    request: FhirRequest,
    ctx: RequestContext,
  ): Promise<FhirResponse> {
    const level = target.id !== undefined ? 'instance' : target.type ? 'type' : 'system';
    if (request.method !== 'GET' && request.method !== 'POST')
      throw this.deps.unknownOperation(target.code, level, target.type);
    const { code, type, id } = target;
    return this.operation(
      { code, level, type, id, method: request.method, query: request.query, body: request.body, headers: {} },
      ctx,
    );
  }

  /**
   * The operation interaction, whatever the door (HTTP, a Bundle entry, a bot): the same status,
   * headers and shaping (201 with Location for a created resource, `_graphql`).
   */
  async operation(call: OperationCall, ctx: RequestContext): Promise<FhirResponse> {
    const door = this.deps.operations?.peek();
    if (!door) throw this.deps.unknownOperation(call.code, call.level, call.type);
    return operationResponse(door, call, ctx);
  }

  private knownType(type: string): void {
    if (!this.deps.isResourceType(type)) throw fhirError('ERR_TYPE_UNKNOWN', { type: clip(type) });
  }

  private writable(type: string): void {
    if (this.deps.readOnlyTypes.has(type)) throw fhirError('ERR_TYPE_READ_ONLY', { type });
  }

  /** The current content of a resource in the request's project (or built-in content), for operations on an instance. */
  async readResource(type: string, id: string, ctx: RequestContext): Promise<Resource> {
    this.knownType(type);
    const project = SYSTEM_SCOPE_TYPES.has(type) ? SYSTEM_PROJECT : ctx.project;
    return (await this.guardedRead(type, id, { ...ctx, project })).resource as Resource;
  }

  private async guardedRead(type: string, id: string, ctx: RequestContext): Promise<StoredVersion> {
    const grant = this.deps.guard.allow(ctx.principal, 'read', type);
    const version = await this.readVersion(type, id, ctx.project);
    if (version.resource && !this.deps.guard.covers(grant, version.resource))
      throw fhirError('ERR_RESOURCE_NOT_FOUND', { type, id });
    return version;
  }

  private async read(type: string, id: string, request: FhirRequest, ctx: RequestContext): Promise<FhirResponse> {
    const version = await this.guardedRead(type, id, ctx);
    if (notModified(request, version)) {
      const response = versionResponse(ctx, version, 304);
      return { status: 304, headers: response.headers };
    }
    return versionResponse(ctx, version, 200);
  }

  /** The current version; a resource the server itself holds when nothing is stored under that id. */
  private async readVersion(type: string, id: string, project: string): Promise<StoredVersion> {
    try {
      return await this.deps.repository.in(project).read(type, id);
    } catch (err) {
      // Definitions the system scope holds (imported packages) are every project's to read.
      if (
        SHARED_TYPES.includes(type) &&
        project !== SYSTEM_PROJECT &&
        (err as FhirError).code === 'ERR_RESOURCE_NOT_FOUND'
      ) {
        return this.readVersion(type, id, SYSTEM_PROJECT);
      }
      const builtIn = this.deps.builtIn?.read(type, id);
      if (builtIn && (err as FhirError).code === 'ERR_RESOURCE_NOT_FOUND') return builtInVersion(builtIn, project);
      throw err;
    }
  }

  private async vread(target: Extract<Target, { kind: 'version' }>, ctx: RequestContext): Promise<FhirResponse> {
    const { type, id, vid } = target;
    if (!/^[1-9][0-9]{0,9}$/.test(vid)) throw fhirError('ERR_VERSION_NOT_FOUND', { type, id, vid: clip(vid) });
    await this.readable(type, id, ctx, 'read');
    const version = await this.deps.repository
      .in(ctx.project)
      .vread(type, id, Number(vid))
      .catch((err: unknown) => {
        const shared =
          SHARED_TYPES.includes(type) &&
          ctx.project !== SYSTEM_PROJECT &&
          (err as FhirError).code === 'ERR_RESOURCE_NOT_FOUND';
        if (shared) return this.deps.repository.in(SYSTEM_PROJECT).vread(type, id, Number(vid));
        throw err;
      });
    return versionResponse(ctx, version, 200);
  }
}
