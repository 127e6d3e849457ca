import { GraphQLError } from 'graphql';
import type { Bundle, Resource } from 'fhir/r4';
import { emptyQuery, queryOfString } from '../fhir/query';
import {
  byFhirPath,
  remember,
  rethrow,
  spendSearch,
  type FhirPathFilter,
  type GraphQLDataDeps,
  type GraphQLLimits,
  type GraphQLRequestState,
} from './request-state';
import { argName } from './schema';

/**
 * The fields that are searches: root lists and connections, reverse references. GraphQL arguments
 * become the search's query (names mapped back to parameter codes, `_count` capped), each search is
 * counted against the query's limit, and a connection's page links become opaque cursors.
 */

/** A connection's page: what the search asked, where the page starts, and the `fhirpath` that filters it. */
interface ConnectionPage {
  type: string;
  query: Record<string, string[]>;
  offset: number;
  fhirpath: unknown;
}

export class GraphQLSearches {
  constructor(
    private readonly deps: GraphQLDataDeps,
    private readonly limits: GraphQLLimits,
  ) {}

  /** A search of one type, counted against the query's limit. */
  search(state: GraphQLRequestState, type: string, query: Record<string, string[]>): Promise<Bundle> {
    spendSearch(state, this.limits);
    return this.deps.search.search({ level: 'type', type }, query, state.ctx);
  }

  /** A list's matches (not its includes), filtered by its `fhirpath` argument. */
  async list(
    state: GraphQLRequestState,
    type: string,
    query: Record<string, string[]>,
    fhirpath: unknown,
  ): Promise<Resource[]> {
    const bundle = await this.search(state, type, query).catch(rethrow);
    const matches = (bundle.entry ?? [])
      .filter((e) => e.search?.mode !== 'include' && e.search?.mode !== 'outcome')
      .map((e) => remember(state, e.resource as Resource));
    return byFhirPath(matches, fhirpath, this.filter(state));
  }

  /** The search query of a field's arguments (a cursor's query added), without those named in `skip`. */
  queryOf(type: string, args: Record<string, unknown>, skip: string[] = []): Record<string, string[]> {
    const codes = new Map(this.deps.searchParams(type).map((code) => [argName(code), code]));
    const query = emptyQuery();
    for (const [name, value] of Object.entries(args)) {
      if (value === undefined || value === null || skip.includes(name)) continue;
      if (name === '_cursor' || name === 'cursor' || name === 'fhirpath') continue;
      const code = codes.get(name) ?? name;
      query[code] = [String(value)];
    }
    if (query._count) query._count = [String(Math.min(Number(query._count[0]), this.limits.maxCount))];
    const cursor = cursorOf(args);
    if (cursor) Object.assign(query, decodeCursor(cursor).query);
    return query;
  }

  /** The search a reverse reference runs: `type` resources whose `_reference` parameter points at `source`. */
  reverseQuery(type: string, source: unknown, args: Record<string, unknown>): Record<string, string[]> {
    const resource = source as Resource;
    const param = String(args._reference);
    const known = this.deps.searchParams(type);
    const code = known.find((c) => argName(c) === param) ?? param;
    if (!known.includes(code))
      throw new GraphQLError(`${type} has no search parameter '${param}' to follow back to a ${resource.resourceType}`);
    const query = this.queryOf(type, args, ['_reference']);
    query[code] = [`${resource.resourceType}/${resource.id}`];
    return query;
  }

  /**
   * One page of a search as a connection; `offset` is where the page starts in the whole result.
   * `fhirpath` filters the page after paging (graphql.html allows it), so a page may come out shorter.
   */
  async connection(state: GraphQLRequestState, page: ConnectionPage) {
    const { type, query, offset } = page;
    query._total = ['accurate'];
    const bundle = await this.search(state, type, query).catch(rethrow);
    const edges = (bundle.entry ?? []).filter((e) => e.search?.mode !== 'outcome');
    const matched = edges.filter((e) => e.search?.mode !== 'include').length;
    const kept = new Set(
      await byFhirPath(
        edges.map((e) => e.resource),
        page.fhirpath,
        this.filter(state),
      ),
    );
    const pagesize = Number(query._count?.[0] ?? 0) || matched;
    const starts: Record<string, number> = {
      first: 0,
      self: offset,
      previous: Math.max(0, offset - pagesize),
      next: offset + matched,
    };
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
      edges: edges
        .filter((e) => kept.has(e.resource))
        .map((e) => ({
          mode: e.search?.mode,
          score: e.search?.score,
          resource: remember(state, e.resource as Resource),
        })),
    };
  }

  /** Where the request's `fhirpath` arguments are evaluated. */
  filter(state: GraphQLRequestState): FhirPathFilter {
    return { pool: this.deps.fhirpath, deadline: state.ctx.deadline };
  }
}

/** Where a root connection's page starts: the cursor's offset, or `_offset`. */
export function connectionOffset(args: Record<string, unknown>, query: Record<string, string[]>): number {
  const cursor = cursorOf(args);
  return cursor ? decodeCursor(cursor).offset : Number(query._offset?.[0] ?? 0);
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
  if (typeof q !== 'string' || typeof o !== 'number' || !Number.isInteger(o) || o < 0)
    throw new GraphQLError('The cursor is not one this server gave');
  return { query: queryOfString(q), offset: o };
}
