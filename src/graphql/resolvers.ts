import DataLoader from 'dataloader';
import { GraphQLError, type GraphQLFieldResolver } from 'graphql';
import type { Bundle, Reference, Resource } from 'fhir/r4';
import type { Budget } from '../context/budget';
import type { RequestContext } from '../context/request-context';
import { fhirError, isFhirError } from '../fhir/errors';
import type { FhirPathPool } from '../fhir/fhirpath/pool';
import { emptyQuery, queryOfString } from '../fhir/query';
import type { FhirRequest } from '../rest/fhir-request';
import type { SearchHandler } from '../search/search-service';
import { argName } from './schema';

/**
 * What each field of the generated schema does: elements read from the resource as stored (with
 * graphql.html's list filters), references followed through one batched search per type and level,
 * reverse references and lists as searches, mutations through the REST core. Every read goes
 * through the same services as REST, with the request's context: the same project, scopes and
 * policies, and the same 404s.
 */

export interface GraphQLDataDeps {
  search: SearchHandler;
  /** A RESTful interaction (mutations). */
  handle(request: FhirRequest, ctx: RequestContext): Promise<{ status: number; body?: Resource }>;
  read(type: string, id: string, ctx: RequestContext): Promise<Resource>;
  /** The search parameter codes of a type (to map GraphQL argument names back). */
  searchParams(type: string): string[];
  /** Where `fhirpath:` arguments are evaluated, bounded (they are the client's expressions). */
  fhirpath: Pick<FhirPathPool, 'evaluate'>;
}

export interface GraphQLLimits {
  /** Searches (lists, connections, reverse references, reference batches) one query may run. */
  searches: number;
  /** Largest `_count` of one list. */
  maxCount: number;
}

/** Per request: its context, the batch loader of references, and what it has spent. */
export interface GraphQLRequestState {
  ctx: RequestContext;
  /** Local references (`#id`) of resources with contained ones, to the resource holding them. */
  containers: WeakMap<object, Resource>;
  references: DataLoader<string, Resource | null>;
  searches: number;
  /** The request's time, shared with the work before and after execution. */
  budget: Budget;
  /** Set when the time ran out during execution: every field after it is null, and the answer too-costly. */
  overrun: boolean;
}

type Resolver = GraphQLFieldResolver<unknown, GraphQLRequestState, Record<string, unknown>>;

export interface FieldResolvers {
  element(name: string, array: boolean): Resolver;
  reference: Resolver;
  read(type: string): Resolver;
  list(type: string): Resolver;
  connection(type: string): Resolver;
  reverse(type: string): Resolver;
  reverseConnection(type: string): Resolver;
  create(type: string): Resolver;
  update(type: string): Resolver;
  remove(type: string): Resolver;
}

/** Names an element list may be filtered by (graphql.html "field arguments"), besides fhirpath, _count and _offset. */
const LIST_CONTROLS = new Set(['fhirpath', '_count', '_offset']);

export function fieldResolvers(deps: GraphQLDataDeps, limits: GraphQLLimits): FieldResolvers {
  const search = async (state: GraphQLRequestState, type: string, query: Record<string, string[]>): Promise<Bundle> => {
    spendSearch(state, limits);
    return deps.search.search({ level: 'type', type }, query, state.ctx);
  };
  const queryOf = (type: string, args: Record<string, unknown>, skip: string[] = []): Record<string, string[]> => {
    const codes = new Map(deps.searchParams(type).map((code) => [argName(code), code]));
    const query = emptyQuery();
    for (const [name, value] of Object.entries(args)) {
      if (value === undefined || value === null || skip.includes(name)) continue;
      if (name === '_cursor' || name === 'cursor' || name === 'fhirpath') continue;
      const code = codes.get(name) ?? name;
      query[code] = [String(value)];
    }
    if (query._count) query._count = [String(Math.min(Number(query._count[0]), limits.maxCount))];
    const cursor = cursorOf(args);
    if (cursor) Object.assign(query, decodeCursor(cursor).query);
    return query;
  };
  /**
   * One page of a search as a connection; `offset` is where the page starts in the whole result.
   * `fhirpath` filters the page after paging (graphql.html allows it), so a page may come out shorter.
   */
  const connect = async (state: GraphQLRequestState, type: string, query: Record<string, string[]>, offset: number, fhirpath: unknown) => {
    query._total = ['accurate'];
    const bundle = await search(state, type, query).catch(rethrow);
    const edges = (bundle.entry ?? []).filter((e) => e.search?.mode !== 'outcome');
    const matched = edges.filter((e) => e.search?.mode !== 'include').length;
    const kept = new Set(await byFhirPath(edges.map((e) => e.resource), fhirpath, filterDeps(state)));
    const pagesize = Number(query._count?.[0] ?? 0) || matched;
    const starts: Record<string, number> = { first: 0, self: offset, previous: Math.max(0, offset - pagesize), next: offset + matched };
    const link = (relation: string) => {
      const url = bundle.link?.find((l) => l.relation === relation)?.url;
      if (!url) return undefined;
      const stated = Number(new URL(url, 'http://base').searchParams.get('_offset') ?? NaN);
      return encodeCursor(url, Number.isInteger(stated) ? stated : (starts[relation] ?? 0));
    };
    return {
      count: bundle.total,
      offset,
      pagesize,
      first: link('first') ?? (offset === 0 ? link('self') : undefined),
      previous: link('previous'),
      next: link('next'),
      last: link('last'),
      edges: edges.filter((e) => kept.has(e.resource)).map((e) => ({ mode: e.search?.mode, score: e.search?.score, resource: remember(state, e.resource as Resource) })),
    };
  };
  /** The search a reverse reference runs: `type` resources whose `_reference` parameter points at `source`. */
  const reverseQuery = (type: string, source: unknown, args: Record<string, unknown>) => {
    const resource = source as Resource;
    const param = String(args._reference);
    const known = deps.searchParams(type);
    const code = known.find((c) => argName(c) === param) ?? param;
    if (!known.includes(code)) throw new GraphQLError(`${type} has no search parameter '${param}' to follow back to a ${resource.resourceType}`);
    const query = queryOf(type, args, ['_reference']);
    query[code] = [`${resource.resourceType}/${resource.id}`];
    return query;
  };
  const matches = (bundle: Bundle, state: GraphQLRequestState) =>
    (bundle.entry ?? []).filter((e) => e.search?.mode !== 'include' && e.search?.mode !== 'outcome').map((e) => remember(state, e.resource as Resource));
  const write = async (state: GraphQLRequestState, request: FhirRequest) => {
    checkBudget(state);
    try {
      return (await deps.handle(request, state.ctx)).body ?? null;
    } catch (err) {
      throw asGraphQLError(err);
    }
  };

  const filterDeps = (state: GraphQLRequestState): FhirPathFilter => ({ pool: deps.fhirpath, deadline: state.ctx.deadline });

  return {
    element: (name, array) => (source, args, state) => {
      const value = (source as Record<string, unknown>)[name];
      if (!array || !Array.isArray(value)) return paced(state, value);
      return filterList(value, args, filterDeps(state)).then((list) => paced(state, list));
    },
    reference: async (source, args, state) => {
      const local = (source as Reference).reference;
      if (local?.startsWith('#')) {
        const holder = state.containers.get(source as object) as (Resource & { contained?: Resource[] }) | undefined;
        const found = holder?.contained?.find((c) => c.id === local.slice(1)) ?? null;
        if (found && typeof args.type === 'string' && found.resourceType !== args.type) return null;
        if (!found && args.optional !== true) throw new GraphQLError(`The contained resource ${local} is not in the resource`);
        return found ? remember(state, found) : null;
      }
      const target = referenceKey(local);
      if (!target || (typeof args.type === 'string' && !target.startsWith(`${args.type}/`))) return null;
      const found = await state.references.load(target);
      if (!found && args.optional !== true) throw new GraphQLError(`The reference ${target} cannot be resolved`);
      return found ? remember(state, found) : null;
    },
    read: (type) => async (_source, args, state) => {
      checkBudget(state);
      try {
        return remember(state, await deps.read(type, String(args.id), state.ctx));
      } catch (err) {
        throw asGraphQLError(err);
      }
    },
    list: (type) => async (_source, args, state) => byFhirPath(matches(await search(state, type, queryOf(type, args)).catch(rethrow), state), args.fhirpath, filterDeps(state)),
    connection: (type) => async (_source, args, state) => {
      const cursor = cursorOf(args);
      const query = queryOf(type, args);
      return connect(state, type, query, cursor ? decodeCursor(cursor).offset : Number(query._offset?.[0] ?? 0), args.fhirpath);
    },
    reverse: (type) => async (source, args, state) => byFhirPath(matches(await search(state, type, reverseQuery(type, source, args)).catch(rethrow), state), args.fhirpath, filterDeps(state)),
    reverseConnection: (type) => async (source, args, state) => {
      const query = reverseQuery(type, source, args);
      return connect(state, type, query, Number(query._offset?.[0] ?? 0), args.fhirpath);
    },
    create: (type) => async (_source, args, state) => write(state, { method: 'POST', path: type, query: {}, headers: {}, body: args.res }),
    update: (type) => async (_source, args, state) => write(state, { method: 'PUT', path: `${type}/${String(args.id)}`, query: {}, headers: {}, body: args.res }),
    remove: (type) => async (_source, args, state) => {
      await write(state, { method: 'DELETE', path: `${type}/${String(args.id)}`, query: {}, headers: {} });
      return null;
    },
  };
}

/** A loader of `Type/id` references for one request: one search per type per batch (a level of the query). */
export function referenceLoader(deps: GraphQLDataDeps, stateOf: () => GraphQLRequestState, limits: GraphQLLimits): DataLoader<string, Resource | null> {
  return new DataLoader<string, Resource | null>(async (keys) => {
    const state = stateOf();
    const byType = new Map<string, string[]>();
    for (const key of keys) {
      const [type, id] = key.split('/');
      byType.set(type, [...(byType.get(type) ?? []), id]);
    }
    const found = new Map<string, Resource>();
    for (const [type, ids] of byType) {
      spendSearch(state, limits);
      let bundle: Bundle;
      try {
        bundle = await deps.search.search({ level: 'type', type }, { _id: [ids.join(',')], _count: [String(ids.length)] }, state.ctx);
      } catch (err) {
        // A type the caller may not read resolves to nothing, as a missing resource does.
        if (isFhirError(err) && (err.status === 403 || err.status === 404)) continue;
        throw err;
      }
      for (const entry of bundle.entry ?? []) if (entry.resource) found.set(`${type}/${entry.resource.id}`, entry.resource);
    }
    return keys.map((key) => found.get(key) ?? null);
  });
}

/**
 * Notes where the local references (`#id`) of a resource with contained resources point from, so
 * that `resource` can follow them (a field's resolver sees only its own object). Resources without
 * contained ones cost nothing.
 */
export function remember(state: GraphQLRequestState, resource: Resource): Resource {
  const contained = (resource as { contained?: Resource[] }).contained;
  if (!contained?.length) return resource;
  const stack: unknown[] = [resource];
  while (stack.length > 0) {
    const node = stack.pop();
    if (!node || typeof node !== 'object') continue;
    if (Array.isArray(node)) {
      stack.push(...node);
      continue;
    }
    const reference = (node as { reference?: unknown }).reference;
    if (typeof reference === 'string' && reference.startsWith('#')) state.containers.set(node, resource);
    for (const value of Object.values(node)) if (value && typeof value === 'object') stack.push(value);
  }
  return resource;
}

/** `Patient/1`, `http://base/Patient/1`, `Patient/1/_history/2` -> `Patient/1`; contained and other forms -> undefined. */
function referenceKey(reference: string | undefined): string | undefined {
  const match = /(?:^|\/)([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/[^/]+)?$/.exec(reference ?? '');
  return match ? `${match[1]}/${match[2]}` : undefined;
}

async function filterList(items: unknown[], args: Record<string, unknown>, filter: FhirPathFilter): Promise<unknown[]> {
  let out = items;
  for (const [name, wanted] of Object.entries(args)) {
    if (wanted === undefined || wanted === null || LIST_CONTROLS.has(name)) continue;
    out = out.filter((item) => {
      const value = (item as Record<string, unknown>)?.[name];
      return Array.isArray(value) ? value.map(String).includes(String(wanted)) : value !== undefined && String(value) === String(wanted);
    });
  }
  out = await byFhirPath(out, args.fhirpath, filter);
  const offset = typeof args._offset === 'number' ? args._offset : 0;
  const count = typeof args._count === 'number' ? args._count : undefined;
  return out.slice(offset, count === undefined ? undefined : offset + count);
}

/** Where a `fhirpath` argument is evaluated: the bounded pool, until the request's deadline. */
interface FhirPathFilter {
  pool: Pick<FhirPathPool, 'evaluate'>;
  deadline: number;
}

/**
 * The items for which a `fhirpath` argument, when given, is true (a non-empty result without
 * `false`). The expression is the client's: it is evaluated in the pool's workers, all items in
 * one batch, and one that runs out of time ends the query with too-costly.
 */
async function byFhirPath<T>(items: T[], expression: unknown, filter: FhirPathFilter): Promise<T[]> {
  if (typeof expression !== 'string' || items.length === 0) return items;
  const answers = await filter.pool.evaluate(items.map((focus) => ({ expression, focus })), { deadline: filter.deadline });
  return items.filter((_, i) => {
    const answer = answers[i];
    if (answer.ok) return answer.summary.length > 0 && !answer.summary.hasFalse;
    if (answer.error === 'invalid') throw new GraphQLError(`The fhirpath '${expression.slice(0, 100)}' is not valid`);
    throw asGraphQLError(fhirError('ERR_OP_TOO_COSTLY', { what: `The fhirpath '${expression.slice(0, 100)}' was stopped: ${answer.message}` }));
  });
}

/** The cursor a connection was given: `_cursor` (the page's query) or `cursor` (its linked example). */
function cursorOf(args: Record<string, unknown>): string | undefined {
  const given = args._cursor ?? args.cursor;
  return typeof given === 'string' ? given : undefined;
}

/**
 * A connection's cursor, opaque to the client: the search link it stands for, and where that page
 * starts (a keyset link does not say, and the connection reports it as `offset`).
 */
function encodeCursor(url: string, offset: number): string {
  const q = url.indexOf('?');
  return Buffer.from(JSON.stringify({ q: q < 0 ? '' : url.slice(q + 1), o: offset }), 'utf8').toString('base64url');
}

function decodeCursor(cursor: string): { query: Record<string, string[]>; offset: number } {
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    decoded = undefined;
  }
  const { q, o } = (decoded ?? {}) as { q?: unknown; o?: unknown };
  if (typeof q !== 'string' || typeof o !== 'number' || !Number.isInteger(o) || o < 0) throw new GraphQLError('The cursor is not one this server gave');
  return { query: queryOfString(q), offset: o };
}

/**
 * A field's value, the event loop given back first when this slice of the budget is spent:
 * element fields resolve without I/O, so graphql-js would run a large answer in one stretch.
 */
function paced<T>(state: GraphQLRequestState, value: T): T | null | Promise<T | null> {
  if (state.overrun) return null;
  if (!state.budget.due()) return value;
  return state.budget.pause().then(
    () => value,
    () => {
      state.overrun = true;
      return null;
    },
  );
}

/** One more search for this query: refused past the limit, or when the time budget is spent. */
function spendSearch(state: GraphQLRequestState, limits: GraphQLLimits): void {
  checkBudget(state);
  if (++state.searches > limits.searches) throw tooCostly(`more than ${limits.searches} searches in one query`);
}

function checkBudget(state: GraphQLRequestState): void {
  if (Date.now() > state.ctx.deadline) throw tooCostly('the time budget of the request is spent');
}

function tooCostly(reason: string): GraphQLError {
  return new GraphQLError(`The query is too costly: ${reason}`, { extensions: { outcome: { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'too-costly', details: { text: reason } }] } } });
}

function rethrow(err: unknown): never {
  throw asGraphQLError(err);
}

/** A FhirError as a GraphQL error carrying its OperationOutcome. */
export function asGraphQLError(err: unknown): GraphQLError {
  if (err instanceof GraphQLError) return err;
  if (isFhirError(err)) return new GraphQLError(err.outcome.issue[0]?.details?.text ?? err.message, { extensions: { outcome: err.outcome, status: err.status } });
  throw err;
}

