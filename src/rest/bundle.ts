import { SYSTEM_SCOPE_TYPES } from '../fhir/admin-types';
import { newResourceId } from '../fhir/resource-id';
import type { Bundle, BundleEntry, Resource } from 'fhir/r4';
import { yieldIfHeld } from '../context/budget';
import type { RequestContext } from '../context/request-context';
import { fhirError } from '../fhir/errors';
import type { Repository } from '../storage/repository';
import { ID_PATTERN } from '../storage/repository';
import { parsePath, type FhirMethod, type FhirRequest, type FhirResponse } from './fhir-request';
import * as writes from './writes';
import { clip, type WriteDeps } from './writes';
import {
  atEntry,
  checkAt,
  entryError,
  failureEntry,
  failureEntryOf,
  failureResponse,
  responseEntry,
} from './bundle-answers';
import { emptyQuery, queryOfString } from '../fhir/query';
import { mentioned, substitute, rewriteReferences } from './bundle-references';

/**
 * `POST [base]` with a Bundle (R4 http.html#transaction): a batch runs each entry on its own; a
 * transaction runs them all in one database transaction, in R4's order (DELETE, POST, PUT/PATCH,
 * then GET/HEAD), with `urn:uuid:`/`urn:oid:` fullUrls and conditional references resolved to the
 * resources they name, and either every write happens or none does. Reads and operation entries
 * run after the writes commit (they see them); a failed write fails the Bundle with an
 * OperationOutcome naming its entry.
 *
 * A Bundle may carry tens of thousands of entries, each a little work on the one event loop: every
 * loop over them gives the loop back each few milliseconds (`yieldIfHeld`), so other requests are
 * answered meanwhile. A Bundle has no time budget of its own: a batch cut off at a deadline would
 * be left half written.
 */

export interface BundleDeps extends WriteDeps {
  repository: Repository;
  isResourceType(type: string): boolean;
  readOnlyTypes: ReadonlySet<string>;
  /** Answers one read or operation entry (after the writes). */
  handle(request: FhirRequest, ctx: RequestContext): Promise<FhirResponse>;
  /** Most entries one Bundle may carry. */
  maxEntries: number;
}

const ORDER: Record<string, number> = { DELETE: 0, POST: 1, PUT: 2, PATCH: 2, GET: 3, HEAD: 3 };
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH']);

export interface Entry {
  index: number;
  method: FhirMethod;
  url: string;
  fullUrl?: string;
  resource?: Resource;
  ifNoneExist?: string;
  ifMatch?: number;
  ifNoneMatch?: string;
  ifModifiedSince?: string;
  /** The write's type, and id when the URL names one; an operation's place. */
  type?: string;
  id?: string;
  criteria?: string;
  operation: boolean;
}

export async function processBundle(body: unknown, ctx: RequestContext, deps: BundleDeps): Promise<Bundle> {
  const bundle = body as Bundle;
  if (typeof body !== 'object' || body === null || bundle.resourceType !== 'Bundle')
    throw fhirError('ERR_BUNDLE_INVALID', { reason: 'POST to the base takes a Bundle of type transaction or batch' });
  if (bundle.type !== 'transaction' && bundle.type !== 'batch') {
    throw fhirError('ERR_BUNDLE_INVALID', {
      reason: `Bundle.type must be transaction or batch, not '${clip(String(bundle.type))}'`,
    });
  }
  const raw = bundle.entry ?? [];
  if (!Array.isArray(raw)) throw fhirError('ERR_BUNDLE_INVALID', { reason: 'Bundle.entry must be a list' });
  if (raw.length > deps.maxEntries)
    throw fhirError('ERR_BUNDLE_TOO_LARGE', { count: raw.length, limit: deps.maxEntries });
  return bundle.type === 'batch' ? batch(raw, ctx, deps) : transaction(raw, ctx, deps);
}

/** An entry as a request, checked; a problem names the entry. */
function readEntry(raw: BundleEntry, index: number, deps: BundleDeps): Entry {
  const fail = (reason: string) =>
    fhirError('ERR_BUNDLE_ENTRY', { index, reason }, { expression: [`Bundle.entry[${index}]`] });
  if (typeof raw !== 'object' || raw === null) throw fail('is not an entry');
  const request = raw.request;
  if (!request || typeof request !== 'object') throw fail('has no request');
  if (typeof request.method !== 'string' || !METHODS.has(request.method))
    throw fail(`request.method '${clip(String(request.method))}' is not one of GET, HEAD, POST, PUT, DELETE, PATCH`);
  if (typeof request.url !== 'string' || request.url === '') throw fail('has no request.url');
  const method = request.method as FhirMethod;
  const url = request.url.replace(/^\/+/, '');
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  const target = parsePath(path);
  const entry: Entry = {
    index,
    method,
    url,
    fullUrl: raw.fullUrl,
    resource: raw.resource,
    operation: target.kind === 'operation',
  };
  if (request.ifNoneExist !== undefined) entry.ifNoneExist = request.ifNoneExist;
  if (request.ifNoneMatch !== undefined) entry.ifNoneMatch = request.ifNoneMatch;
  if (request.ifModifiedSince !== undefined) entry.ifModifiedSince = request.ifModifiedSince;
  if (request.ifMatch !== undefined) {
    const match = /^\s*(W\/)?"([1-9][0-9]{0,9})"\s*$/.exec(request.ifMatch);
    if (!match) throw fail(`request.ifMatch '${clip(request.ifMatch)}' is not an ETag such as W/"3"`);
    entry.ifMatch = Number(match[2]);
  }
  if (method === 'GET' || method === 'HEAD' || entry.operation) return entry;
  if (target.kind === 'type') {
    entry.type = target.type;
    if (q >= 0) entry.criteria = url.slice(q + 1);
    else if (method !== 'POST') throw fail(`${method} needs a resource id or search criteria in request.url`);
  } else if (target.kind === 'instance') {
    if (method === 'POST') throw fail('POST takes a type, not an id, in request.url');
    entry.type = target.type;
    entry.id = target.id;
    if (!ID_PATTERN.test(target.id)) throw fail(`'${clip(target.id)}' is not a valid resource id`);
  } else {
    throw fail(`request.url '${clip(url)}' does not name a type or a resource`);
  }
  if (!deps.isResourceType(entry.type)) throw fail(`'${clip(entry.type)}' is not a resource type`);
  if (deps.readOnlyTypes.has(entry.type)) throw fail(`${entry.type} resources are read-only on this server`);
  // They live in the system scope, not in the project a Bundle writes to.
  if (SYSTEM_SCOPE_TYPES.has(entry.type))
    throw fail(`${entry.type} resources are not written in a Bundle (Project/$init creates projects and their owners)`);
  if (method === 'POST' || method === 'PUT') {
    if (!entry.resource || typeof entry.resource !== 'object') throw fail(`${method} needs a resource`);
    if (entry.resource.resourceType !== entry.type)
      throw fail(
        `the resource is a ${clip(String(entry.resource.resourceType))}, but request.url is for ${entry.type}`,
      );
  }
  if (method === 'PATCH' && entry.resource === undefined)
    throw fail('PATCH needs a Parameters (FHIRPath Patch) or Binary resource');
  return entry;
}

// ---------------------------------------------------------------------------------------------
// Batch

async function batch(raw: BundleEntry[], ctx: RequestContext, deps: BundleDeps): Promise<Bundle> {
  const entries: BundleEntry[] = [];
  for (let i = 0; i < raw.length; i++) {
    await yieldIfHeld();
    try {
      const entry = readEntry(raw[i], i, deps);
      const response = isWrite(entry)
        ? await deps.repository.in(ctx.project).transaction((tx) => write(entry, { tx, ctx, deps }))
        : await read(entry, ctx, deps);
      entries.push(responseEntry(response, ctx, isWrite(entry)));
    } catch (err) {
      entries.push(failureEntry(err, ctx));
    }
  }
  return { resourceType: 'Bundle', type: 'batch-response', entry: entries };
}

// ---------------------------------------------------------------------------------------------
// Transaction

async function transaction(raw: BundleEntry[], ctx: RequestContext, deps: BundleDeps): Promise<Bundle> {
  const entries: Entry[] = [];
  for (let i = 0; i < raw.length; i++) {
    await yieldIfHeld();
    entries.push(readEntry(raw[i], i, deps));
  }
  const fullUrls = new Map<string, Entry>();
  for (const entry of entries) {
    if (!entry.fullUrl) continue;
    if (fullUrls.has(entry.fullUrl))
      throw entryError(entry.index, `fullUrl ${clip(entry.fullUrl)} appears more than once`);
    fullUrls.set(entry.fullUrl, entry);
  }
  const results: FhirResponse[] = new Array(entries.length);
  const ordered = [...entries].sort((a, b) => ORDER[a.method] - ORDER[b.method] || a.index - b.index);
  const writesInOrder = ordered.filter(isWrite);
  await deps.repository.in(ctx.project).transaction(async (tx) => {
    const w = { tx, ctx, deps };
    const ids = await assignIds(writesInOrder, fullUrls, w);
    for (const entry of writesInOrder) {
      await yieldIfHeld();
      if (entry.resource) entry.resource = await rewriteReferences(entry, ids, w);
    }
    // Creates with server ids that nothing conditions go in one batch (a patient record is hundreds of them).
    const plainCreates = writesInOrder.filter((e) => e.method === 'POST' && e.ifNoneExist === undefined);
    const created = await createMany(plainCreates, ids, w);
    created.forEach((response, i) => (results[plainCreates[i].index] = response));
    for (const entry of writesInOrder) {
      if (results[entry.index]) continue;
      await yieldIfHeld();
      results[entry.index] = await atEntry(entry.index, () => write(entry, w, ids.get(entry.fullUrl ?? '')));
    }
  });
  for (const entry of ordered.filter((e) => !isWrite(e))) {
    await yieldIfHeld();
    try {
      results[entry.index] = await read(entry, ctx, deps);
    } catch (err) {
      results[entry.index] = failureResponse(err);
    }
  }
  const answers: BundleEntry[] = [];
  for (const [i, r] of results.entries()) {
    await yieldIfHeld();
    answers.push(r.status >= 400 ? failureEntryOf(r) : responseEntry(r, ctx, isWrite(entries[i])));
  }
  return { resourceType: 'Bundle', type: 'transaction-response', entry: answers };
}

function isWrite(entry: Entry): boolean {
  return !entry.operation && entry.method !== 'GET' && entry.method !== 'HEAD';
}

/**
 * The `Type/id` each write's fullUrl stands for: a new id for a create, the matched resource for a
 * conditional create that matches, the id in the URL for an update, the match for a conditional
 * update. Criteria may name other entries' fullUrls; those are resolved first, and criteria that
 * depend on each other in a circle are refused.
 */
async function assignIds(
  entries: Entry[],
  fullUrls: Map<string, Entry>,
  w: writes.Writes,
): Promise<Map<string, string>> {
  const ids = new Map<string, string>();
  const pending = entries.filter((e) => e.method !== 'DELETE');
  for (const entry of pending) {
    if (entry.method === 'PUT' && entry.id && entry.fullUrl) ids.set(entry.fullUrl, `${entry.type}/${entry.id}`);
    if (entry.method === 'POST' && entry.ifNoneExist === undefined && entry.fullUrl)
      ids.set(entry.fullUrl, `${entry.type}/${newResourceId()}`);
  }
  let unresolved = pending.filter(
    (e) =>
      (e.method === 'POST' && e.ifNoneExist !== undefined) ||
      ((e.method === 'PUT' || e.method === 'PATCH') && e.criteria !== undefined),
  );
  while (unresolved.length > 0) {
    const ready = unresolved.filter((e) =>
      mentioned(e.ifNoneExist ?? e.criteria ?? '', fullUrls).every((u) => ids.has(u)),
    );
    if (ready.length === 0)
      throw entryError(
        unresolved[0].index,
        'its conditions refer to other entries whose own conditions refer back to it (a circle)',
      );
    for (const entry of ready) {
      const criteria = substitute(entry.ifNoneExist ?? entry.criteria ?? '', ids);
      if (entry.ifNoneExist !== undefined) entry.ifNoneExist = criteria;
      else entry.criteria = criteria;
      await writes.lockCriteria(w, entry.type as string, criteria);
      const matches = await atEntry(entry.index, () =>
        w.deps.search.matchKeys(entry.type as string, queryOfString(criteria), w.ctx, w.tx.store, 2),
      );
      if (matches.length > 1)
        throw entryError(entry.index, `its criteria '${clip(criteria)}' match more than one ${entry.type}`, 412);
      const id = matches[0]?.id ?? (entry.method === 'PATCH' ? undefined : (entry.resource?.id ?? newResourceId()));
      if (id === undefined)
        throw entryError(entry.index, `its criteria '${clip(criteria)}' match no ${entry.type}`, 404);
      if (entry.fullUrl) ids.set(entry.fullUrl, `${entry.type}/${id}`);
    }
    unresolved = unresolved.filter((e) => !ready.includes(e));
  }
  return ids;
}

async function createMany(entries: Entry[], ids: Map<string, string>, w: writes.Writes): Promise<FhirResponse[]> {
  for (const entry of entries) {
    await yieldIfHeld();
    await atEntry(entry.index, () => writes.permit(w, 'create', entry.type as string, entry.resource as Resource));
  }
  const resources: Resource[] = [];
  for (const entry of entries) {
    await yieldIfHeld();
    checkAt(entry.index, () => w.deps.checkResource(entry.type as string, entry.resource as Resource, w.ctx));
    const assigned = entry.fullUrl ? ids.get(entry.fullUrl) : undefined;
    const id = assigned ? assigned.slice(assigned.indexOf('/') + 1) : newResourceId();
    resources.push({ ...(entry.resource as Resource), id } as Resource);
  }
  const validate = w.deps.validate;
  if (validate) {
    for (let i = 0; i < resources.length; i++) {
      await yieldIfHeld();
      await atEntry(entries[i].index, () => validate(resources[i], w.ctx));
    }
  }
  const written = await w.tx.createMany(resources);
  return written.map((v) => writes.created(w.ctx, v));
}

async function write(entry: Entry, w: writes.Writes, assigned?: string): Promise<FhirResponse> {
  const type = entry.type as string;
  const id = assigned ? assigned.slice(assigned.indexOf('/') + 1) : undefined;
  switch (entry.method) {
    case 'POST':
      return writes.create(w, type, entry.resource as Resource, { ifNoneExist: entry.ifNoneExist, id });
    case 'PUT':
      if (entry.criteria !== undefined) {
        if (id === undefined)
          return writes.conditionalUpdate(w, type, entry.criteria, entry.resource as Resource, entry.ifMatch);
        // Resolved already, when its fullUrl was assigned: an update (or create) of that resource.
        return writes.update(w, type, id, { ...(entry.resource as Resource), id } as Resource, entry.ifMatch);
      }
      return writes.update(w, type, entry.id as string, entry.resource as Resource, entry.ifMatch);
    case 'DELETE':
      return entry.criteria !== undefined
        ? writes.conditionalDelete(w, type, entry.criteria)
        : writes.remove(w, type, entry.id as string, entry.ifMatch);
    case 'PATCH': {
      const body = patchBody(entry.resource as Resource);
      const { ifMatch } = entry;
      if (entry.criteria !== undefined) {
        return id
          ? writes.patch(w, { type, id, body, contentType: undefined, ifMatch })
          : writes.conditionalPatch(w, { type, criteria: entry.criteria, body, contentType: undefined, ifMatch });
      }
      return writes.patch(w, { type, id: entry.id as string, body, contentType: undefined, ifMatch });
    }
    default:
      throw entryError(entry.index, `${entry.method} is not a write`);
  }
}

/** A PATCH entry carries a Parameters (FHIRPath Patch) or a Binary holding a JSON Patch. */
function patchBody(resource: Resource): unknown {
  if (resource.resourceType === 'Binary') {
    const data = (resource as { data?: string }).data;
    try {
      return JSON.parse(Buffer.from(data ?? '', 'base64').toString('utf8'));
    } catch {
      throw fhirError('ERR_PATCH_INVALID', { reason: 'the Binary does not hold a JSON Patch' });
    }
  }
  return resource;
}

/** A read (or an operation) entry, answered as a request of its own would be. */
async function read(entry: Entry, ctx: RequestContext, deps: BundleDeps): Promise<FhirResponse> {
  const q = entry.url.indexOf('?');
  const headers: FhirRequest['headers'] = {};
  if (entry.ifNoneMatch) headers['if-none-match'] = entry.ifNoneMatch;
  if (entry.ifModifiedSince) headers['if-modified-since'] = entry.ifModifiedSince;
  return deps.handle(
    {
      method: entry.method,
      path: q < 0 ? entry.url : entry.url.slice(0, q),
      query: q < 0 ? emptyQuery() : queryOfString(entry.url.slice(q + 1)),
      headers,
      body: entry.resource,
    },
    ctx,
  );
}
