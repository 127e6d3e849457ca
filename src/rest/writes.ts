import type { Resource } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import { Budget } from '../context/budget';
import { fhirError, isFhirError } from '../fhir/errors';
import { queryOfString } from '../fhir/query';
import type { ElementModel } from '../fhir/model/model';
import type { RepositoryTx } from '../storage/repository';
import type { StoredVersion, StoreReader } from '../storage/store';
import type { FhirResponse } from './fhir-request';
import { applyPatch } from './patch';
import type { PatchBounds } from './patch-bounds';
import { versionHeaders, versionResponse } from './responses';
import { isLimited, type AccessGuard } from '../auth/guard';

/**
 * The write interactions, each inside a repository transaction it is given: on its own for a
 * single request, or one of many for a transaction Bundle. Conditional forms find their target by
 * search in the same transaction, holding a lock on the criteria, so that two clients racing the
 * same conditional create end with one resource.
 */

export interface Matcher {
  matchKeys(
    type: string,
    query: Record<string, string[]>,
    ctx: RequestContext,
    reader: StoreReader,
    limit?: number,
  ): Promise<{ id: string; rid: number }[]>;
}

export interface WriteDeps {
  checkResource(type: string, resource: Resource, ctx: RequestContext): void;
  /** Full validation before a create, update or patch is written, when the server or request asks for it (422). */
  validate?(resource: Resource, ctx: RequestContext): Promise<void>;
  search: Matcher;
  model: ElementModel;
  /** Most resources one conditional delete may remove. */
  maxConditionalDeletes: number;
  /** How large a patch may make a resource, and how many operations it may carry. */
  patchLimits: Omit<PatchBounds, 'budget'>;
  /** Who may write what (the request's principal): none, no limits. */
  guard?: Pick<AccessGuard, 'allow' | 'covers'>;
}

export interface Writes {
  tx: RepositoryTx;
  ctx: RequestContext;
  deps: WriteDeps;
}

/** Holds the lock on these criteria until the transaction ends: conditional writes on them queue. */
export async function lockCriteria(w: Writes, type: string, criteria: string): Promise<void> {
  await w.tx.store.lock(`conditional:${w.tx.project}/${type}?${criteria}`);
}

/** The resources the criteria match, serialised against any other transaction matching the same criteria. */
async function matching(w: Writes, type: string, criteria: string, limit = 2): Promise<string[]> {
  await lockCriteria(w, type, criteria);
  return (await w.deps.search.matchKeys(type, queryOfString(criteria), w.ctx, w.tx.store, limit)).map((m) => m.id);
}

function one(matches: string[], type: string, criteria: string): string | undefined {
  if (matches.length > 1) throw fhirError('ERR_CONDITIONAL_MULTIPLE', { type, criteria: clip(criteria) });
  return matches[0];
}

/** POST [type], with If-None-Exist: none matches -> create; one -> 200 with it, nothing written; several -> 412. */
/** The checks every written resource passes: structure always, full validation when asked for. */
async function check(w: Writes, type: string, resource: Resource): Promise<void> {
  w.deps.checkResource(type, resource, w.ctx);
  await w.deps.validate?.(resource, w.ctx);
}

/**
 * Whether the request's principal may write: the interaction on the type (403), and, when its grant
 * is limited (a patient's compartment), the resource as it is now (404 when outside: whether it
 * exists is not told) and as it would be (403). `id` names a resource that may exist already
 * (an update: a create when it does not).
 */
export async function permit(
  w: Writes,
  interaction: 'create' | 'update' | 'delete',
  type: string,
  after: Resource | undefined,
  id?: string,
): Promise<void> {
  const { guard } = w.deps;
  if (!guard || !w.ctx.principal || w.ctx.principal.operator) return;
  let current: StoredVersion | undefined;
  if (id !== undefined) {
    current = await w.tx.store.read(w.tx.project, type, id);
    if (!current?.resource) {
      current = undefined;
      if (interaction === 'update') interaction = 'create';
    }
  }
  const grant = guard.allow(w.ctx.principal, interaction, type);
  if (!isLimited(grant)) return;
  if (current && !guard.covers(grant, current.resource as Resource))
    throw fhirError('ERR_RESOURCE_NOT_FOUND', { type, id: id as string });
  if (after && !guard.covers(grant, after))
    throw fhirError('ERR_AUTH_FORBIDDEN', {
      reason: `the ${type} would be outside what the token may write (the patient's compartment)`,
    });
}

export async function create(
  w: Writes,
  type: string,
  resource: Resource,
  options: { ifNoneExist?: string; id?: string } = {},
): Promise<FhirResponse> {
  await permit(w, 'create', type, resource);
  await check(w, type, resource);
  if (options.ifNoneExist !== undefined) {
    const existing = one(await matching(w, type, options.ifNoneExist), type, options.ifNoneExist);
    if (existing !== undefined) return versionResponse(w.ctx, await w.tx.read(type, existing), 200, { write: true });
  }
  const { version } = await w.tx.create(type, resource, options.id);
  return versionResponse(w.ctx, version, 201, { write: true });
}

/** PUT [type]/[id]. */
export async function update(
  w: Writes,
  type: string,
  id: string,
  resource: Resource,
  ifMatch?: number,
): Promise<FhirResponse> {
  if (resource.id === undefined) throw fhirError('ERR_RESOURCE_ID_MISSING', {});
  if (resource.id !== id) throw fhirError('ERR_RESOURCE_ID_MISMATCH', { url: id, body: clip(String(resource.id)) });
  await permit(w, 'update', type, resource, id);
  await check(w, type, resource);
  const { version, created } = await w.tx.update(type, id, resource, { ifMatch });
  return versionResponse(w.ctx, version, created ? 201 : 200, { write: true });
}

/**
 * PUT [type]?criteria: none matches -> create (with the body's id, or a new one); one -> update it
 * (the body's id, if any, must be its id); several -> 412.
 */
export async function conditionalUpdate(
  w: Writes,
  type: string,
  criteria: string,
  resource: Resource,
  ifMatch?: number,
): Promise<FhirResponse> {
  const id = one(await matching(w, type, criteria), type, criteria);
  if (id === undefined) {
    await permit(w, 'create', type, resource);
    await check(w, type, resource);
    const { version } = await w.tx.create(type, resource, resource.id);
    return versionResponse(w.ctx, version, 201, { write: true });
  }
  if (resource.id !== undefined && resource.id !== id)
    throw fhirError('ERR_CONDITIONAL_ID', { id: clip(String(resource.id)) });
  return update(w, type, id, { ...resource, id } as Resource, ifMatch);
}

/** DELETE [type]/[id]; under Prefer: handling=strict a resource others point at is kept (409). */
export async function remove(w: Writes, type: string, id: string, ifMatch?: number): Promise<FhirResponse> {
  await permit(w, 'delete', type, undefined, id);
  if (w.ctx.prefer.handling === 'strict') await refuseIfReferenced(w, type, id);
  const deleted = await w.tx.delete(type, id, { ifMatch });
  return deletedResponse(deleted);
}

/** DELETE [type]?criteria: every match (up to the limit; more is 412), 204 when none matched. */
export async function conditionalDelete(w: Writes, type: string, criteria: string): Promise<FhirResponse> {
  const limit = w.deps.maxConditionalDeletes;
  const ids = await matching(w, type, criteria, limit + 1);
  if (ids.length > limit) throw fhirError('ERR_CONDITIONAL_TOO_MANY', { type, criteria: clip(criteria), limit });
  let last: StoredVersion | undefined;
  for (const id of ids) {
    await permit(w, 'delete', type, undefined, id);
    if (w.ctx.prefer.handling === 'strict') await refuseIfReferenced(w, type, id);
    last = (await w.tx.delete(type, id)) ?? last;
  }
  return deletedResponse(ids.length === 1 ? last : undefined);
}

function deletedResponse(deleted: StoredVersion | undefined): FhirResponse {
  const headers: Record<string, string> = {};
  if (deleted) Object.assign(headers, versionHeaders(deleted));
  return { status: 204, headers };
}

async function refuseIfReferenced(w: Writes, type: string, id: string): Promise<void> {
  const by = await w.tx.store.query<{ type: string; id: string }>(
    `SELECT r.type, r.id FROM search_reference x JOIN resources r ON r.rid = x.rid
      WHERE x.project = ? AND x.target_type = ? AND x.target_id = ? AND r.deleted = FALSE AND NOT (r.type = ? AND r.id = ?) LIMIT 1`,
    [w.tx.project, type, id, type, id],
  );
  if (by.length > 0) throw fhirError('ERR_DELETE_REFERENCED', { type, id, by: `${by[0].type}/${by[0].id}` });
}

/** How often a PATCH without If-Match is applied again after another write changed the resource first. */
const PATCH_ATTEMPTS = 3;

/**
 * PATCH [type]/[id]: JSON Patch or FHIRPath Patch on the current version; the result is checked as
 * any write. Without If-Match the client asked for its change on whatever is current, as a PUT
 * overwrites whatever is current: when another write commits between the read and the write
 * (PostgreSQL runs writers of one resource side by side until the write locks its row) the patch is
 * applied again to the new version. The write that lost holds the row's lock by then, so the
 * second attempt does not lose again. With If-Match a mismatch stays a 412.
 */
/** What a PATCH names: the resource, the patch as sent and its content type, and the version it expects. */
export interface PatchRequest {
  type: string;
  id: string;
  body: unknown;
  contentType: string | undefined;
  ifMatch?: number;
}

export async function patch(w: Writes, request: PatchRequest): Promise<FhirResponse> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await patchOnce(w, request);
    } catch (err) {
      const lostRace = request.ifMatch === undefined && isFhirError(err) && err.code === 'ERR_VERSION_CONFLICT';
      if (!lostRace || attempt >= PATCH_ATTEMPTS) throw err;
    }
  }
}

async function patchOnce(w: Writes, request: PatchRequest): Promise<FhirResponse> {
  const { type, id, ifMatch } = request;
  const current = await w.tx.read(type, id);
  if (ifMatch !== undefined && current.versionId !== ifMatch) {
    throw fhirError('ERR_VERSION_CONFLICT', {
      type,
      id,
      expected: String(ifMatch),
      current: `at version ${current.versionId}`,
    });
  }
  const bounds = { ...w.deps.patchLimits, budget: Budget.of(w.ctx, 'the patch') };
  const patched = await applyPatch(current.resource as Resource, request.body, request.contentType, {
    model: w.deps.model,
    bounds,
  });
  await permit(w, 'update', type, patched, id);
  await check(w, type, patched);
  // The version patched must still be current when the result is written.
  const { version } = await w.tx.update(type, id, patched, { ifMatch: current.versionId, method: 'PATCH' });
  return versionResponse(w.ctx, version, 200, { write: true });
}

/** PATCH [type]?criteria: exactly one match is patched. */
export async function conditionalPatch(
  w: Writes,
  request: Omit<PatchRequest, 'id'> & { criteria: string },
): Promise<FhirResponse> {
  const { type, criteria } = request;
  const id = one(await matching(w, type, criteria), type, criteria);
  if (id === undefined) throw fhirError('ERR_RESOURCE_NOT_FOUND', { type, id: `?${clip(criteria)}` });
  return patch(w, { type, id, body: request.body, contentType: request.contentType, ifMatch: request.ifMatch });
}

/** The answer to a create. */
export function created(ctx: RequestContext, version: StoredVersion): FhirResponse {
  return versionResponse(ctx, version, 201, { write: true });
}

export function clip(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}
