import DataLoader from 'dataloader';
import { GraphQLError, type GraphQLFieldResolver } from 'graphql';
import type { Bundle, Reference, Resource } from 'fhir/r4';
import { isFhirError } from '../fhir/errors';
import type { FhirRequest } from '../rest/fhir-request';
import {
  asGraphQLError,
  byFhirPath,
  checkBudget,
  paced,
  remember,
  spendSearch,
  type FhirPathFilter,
  type GraphQLDataDeps,
  type GraphQLLimits,
  type GraphQLRequestState,
} from './request-state';
import { connectionOffset, GraphQLSearches } from './searches';

/**
 * What each field of the generated schema does: elements read from the resource as stored (with
 * graphql.html's list filters), references followed through one batched search per type and level,
 * reverse references and lists as searches, mutations through the REST core. Every read goes
 * through the same services as REST, with the request's context: the same project, scopes and
 * policies, and the same 404s.
 */

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
  const searches = new GraphQLSearches(deps, limits);
  return { ...elementResolvers(searches), ...searchResolvers(searches), ...mutationResolvers(deps) };
}

/** Elements as stored, lists filtered by their arguments; `Reference.resource` through the request's batch loader. */
function elementResolvers(searches: GraphQLSearches): Pick<FieldResolvers, 'element' | 'reference'> {
  return {
    element: (name, array) => (source, args, state) => {
      const value = (source as Record<string, unknown>)[name];
      if (!array || !Array.isArray(value)) return paced(state, value);
      return filterList(value, args, searches.filter(state)).then((list) => paced(state, list));
    },
    reference: async (source, args, state) => {
      const local = (source as Reference).reference;
      if (local?.startsWith('#')) {
        const holder = state.containers.get(source as object) as (Resource & { contained?: Resource[] }) | undefined;
        const found = holder?.contained?.find((c) => c.id === local.slice(1)) ?? null;
        if (found && typeof args.type === 'string' && found.resourceType !== args.type) return null;
        if (!found && args.optional !== true)
          throw new GraphQLError(`The contained resource ${local} is not in the resource`);
        return found ? remember(state, found) : null;
      }
      const target = referenceKey(local);
      if (!target || (typeof args.type === 'string' && !target.startsWith(`${args.type}/`))) return null;
      const found = await state.references.load(target);
      if (!found && args.optional !== true) throw new GraphQLError(`The reference ${target} cannot be resolved`);
      return found ? remember(state, found) : null;
    },
  };
}

/** Root lists and connections, and reverse references, as searches. */
function searchResolvers(
  searches: GraphQLSearches,
): Pick<FieldResolvers, 'list' | 'connection' | 'reverse' | 'reverseConnection'> {
  return {
    list: (type) => async (_source, args, state) =>
      searches.list(state, type, searches.queryOf(type, args), args.fhirpath),
    connection: (type) => async (_source, args, state) => {
      const query = searches.queryOf(type, args);
      return searches.connection(state, {
        type,
        query,
        offset: connectionOffset(args, query),
        fhirpath: args.fhirpath,
      });
    },
    reverse: (type) => async (source, args, state) =>
      searches.list(state, type, searches.reverseQuery(type, source, args), args.fhirpath),
    reverseConnection: (type) => async (source, args, state) => {
      const query = searches.reverseQuery(type, source, args);
      return searches.connection(state, {
        type,
        query,
        offset: Number(query._offset?.[0] ?? 0),
        fhirpath: args.fhirpath,
      });
    },
  };
}

/** `Patient(id)` and the mutations, through the REST core. */
function mutationResolvers(deps: GraphQLDataDeps): Pick<FieldResolvers, 'read' | 'create' | 'update' | 'remove'> {
  const write = async (state: GraphQLRequestState, request: FhirRequest) => {
    checkBudget(state);
    try {
      return (await deps.handle(request, state.ctx)).body ?? null;
    } catch (err) {
      throw asGraphQLError(err);
    }
  };
  return {
    read: (type) => async (_source, args, state) => {
      checkBudget(state);
      try {
        return remember(state, await deps.read(type, String(args.id), state.ctx));
      } catch (err) {
        throw asGraphQLError(err);
      }
    },
    create: (type) => async (_source, args, state) =>
      write(state, { method: 'POST', path: type, query: {}, headers: {}, body: args.res }),
    update: (type) => async (_source, args, state) =>
      write(state, { method: 'PUT', path: `${type}/${String(args.id)}`, query: {}, headers: {}, body: args.res }),
    remove: (type) => async (_source, args, state) => {
      await write(state, { method: 'DELETE', path: `${type}/${String(args.id)}`, query: {}, headers: {} });
      return null;
    },
  };
}

/** A loader of `Type/id` references for one request: one search per type per batch (a level of the query). */
export function referenceLoader(
  deps: GraphQLDataDeps,
  stateOf: () => GraphQLRequestState,
  limits: GraphQLLimits,
): DataLoader<string, Resource | null> {
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
        bundle = await deps.search.search(
          { level: 'type', type },
          { _id: [ids.join(',')], _count: [String(ids.length)] },
          state.ctx,
        );
      } catch (err) {
        // A type the caller may not read resolves to nothing, as a missing resource does.
        if (isFhirError(err) && (err.status === 403 || err.status === 404)) continue;
        throw err;
      }
      for (const entry of bundle.entry ?? [])
        if (entry.resource) found.set(`${type}/${entry.resource.id}`, entry.resource);
    }
    return keys.map((key) => found.get(key) ?? null);
  });
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
      return Array.isArray(value)
        ? value.map(String).includes(String(wanted))
        : value !== undefined && String(value) === String(wanted);
    });
  }
  out = await byFhirPath(out, args.fhirpath, filter);
  const offset = typeof args._offset === 'number' ? args._offset : 0;
  const count = typeof args._count === 'number' ? args._count : undefined;
  return out.slice(offset, count === undefined ? undefined : offset + count);
}
