import type { BundleEntry, BundleLink, OperationOutcome, Resource } from 'fhir/r4';
import { fhirError } from '../fhir/errors';
import type { StoreReader, StoredVersion } from '../storage/store';
import type { Page, PagePosition } from './execute';
import { includeEntries } from './includes';
import type { ElementModel } from '../fhir/model/model';
import type { SearchQuery } from './query/criteria';
import { decodeCursor, encodeCursor } from './query/cursor';
import type { SearchParameterRegistry } from './registry';
import { subset } from './summary';

/**
 * The searchset Bundle's parts around a page: where the page starts (`_cursor`, `_offset`), its
 * self/next/previous/first links, and its entries (matches, then the included resources the
 * principal may read, then an outcome when the includes were cut short).
 */

/** How many resources `_include`/`_revinclude` add to one page at most; beyond it an outcome says so. */
const MAX_INCLUDED = 1000;

export type SearchTarget =
  | { level: 'type'; type: string }
  | { level: 'system' }
  | { level: 'compartment'; compartment: string; id: string; type: string };

/** The page asked for by `_cursor` or `_offset` (400 when either is malformed). */
export function pagePosition(raw: Record<string, string[]>, sortKeys: number): PagePosition {
  const cursor = raw._cursor?.[0] !== undefined ? decodeCursor(raw._cursor[0], sortKeys) : undefined;
  const offsetText = raw._offset?.[0];
  if (offsetText !== undefined && !/^\d{1,9}$/.test(offsetText))
    throw fhirError('ERR_SEARCH_PARAM', { name: '_offset', value: offsetText.slice(0, 20) });
  const offset = offsetText === undefined ? undefined : Number(offsetText);
  return { cursor, offset };
}

/** The links of one search's pages, all built from the criteria understood and the result parameters asked for. */
export class SearchLinks {
  private readonly selfParams: [string, string][];

  constructor(
    private readonly base: string,
    private readonly target: SearchTarget,
    private readonly query: SearchQuery,
    private readonly raw: Record<string, string[]>,
  ) {
    this.selfParams = selfParams(query, raw);
  }

  /** The self link: the page asked for, so with its `_cursor`/`_offset` when it is not the first. */
  self(position: PagePosition): BundleLink {
    const { cursor, offset } = position;
    return {
      relation: 'self',
      url: this.url(cursor || offset ? [...this.selfParams, ...pagingParams(this.raw)] : this.selfParams),
    };
  }

  /** Self, then next and previous where the page has neighbours, then first when this is not it. */
  ofPage(page: Page, position: PagePosition): BundleLink[] {
    const { cursor, offset } = position;
    const count = this.query.count;
    const links = [this.self(position)];
    if (page.items.length > 0 && page.hasNext) {
      const last = page.items[page.items.length - 1];
      const next: [string, string][] =
        offset !== undefined
          ? [['_offset', String(offset + count)]]
          : [['_cursor', encodeCursor({ keys: last.keys, rid: last.rid, direction: 'next' })]];
      links.push({ relation: 'next', url: this.url([...this.selfParams, ...next]) });
    }
    if (page.items.length > 0 && page.hasPrevious) {
      const first = page.items[0];
      const previous: [string, string][] =
        offset !== undefined
          ? [['_offset', String(Math.max(0, offset - count))]]
          : [['_cursor', encodeCursor({ keys: first.keys, rid: first.rid, direction: 'previous' })]];
      links.push({ relation: 'previous', url: this.url([...this.selfParams, ...previous]) });
    }
    if (cursor !== undefined || (offset ?? 0) > 0) links.push({ relation: 'first', url: this.url(this.selfParams) });
    return links;
  }

  private url(params: [string, string][]): string {
    const target = this.target;
    const path =
      target.level === 'type'
        ? `/${target.type}`
        : target.level === 'compartment'
          ? `/${target.compartment}/${target.id}/${target.type}`
          : '';
    const query = new URLSearchParams(params).toString();
    return `${this.base}${path}${query ? `?${query}` : ''}`;
  }
}

/** The parameters of the self link: the criteria understood, then the result parameters asked for. */
function selfParams(query: SearchQuery, raw: Record<string, string[]>): [string, string][] {
  const params: [string, string][] = [...query.understood];
  for (const name of [
    '_type',
    '_sort',
    '_include',
    '_include:iterate',
    '_revinclude',
    '_revinclude:iterate',
    '_total',
    '_summary',
    '_elements',
  ]) {
    for (const value of raw[name] ?? []) params.push([name, value]);
  }
  params.push(['_count', String(query.count)]);
  return params;
}

function pagingParams(raw: Record<string, string[]>): [string, string][] {
  const out: [string, string][] = [];
  for (const name of ['_cursor', '_offset']) for (const value of raw[name] ?? []) out.push([name, value]);
  return out;
}

/** What a page's entries are built from. */
interface EntrySource {
  base: string;
  project: string;
  query: SearchQuery;
  store: StoreReader;
  registry: SearchParameterRegistry;
  model: ElementModel;
  /** Whether the principal may read an included resource (a match was already within its search grant). */
  visible(version: StoredVersion): boolean;
}

/** The page's matches, then what `_include`/`_revinclude` add that the principal may read, then an outcome if they were cut short. */
export async function pageEntries(versions: StoredVersion[], source: EntrySource): Promise<BundleEntry[]> {
  const { query } = source;
  const entries: BundleEntry[] = versions.map((v) => entry(source, v, 'match'));
  if (query.include.length === 0 && query.revinclude.length === 0) return entries;
  const { project, store, registry } = source;
  const included = await includeEntries({ project, store, registry, matches: versions, query, limit: MAX_INCLUDED });
  for (const v of included.versions) if (source.visible(v)) entries.push(entry(source, v, 'include'));
  if (included.truncated) {
    const outcome: OperationOutcome = {
      resourceType: 'OperationOutcome',
      issue: [
        {
          severity: 'warning',
          code: 'too-costly',
          details: { text: `_include and _revinclude were stopped at ${MAX_INCLUDED} resources for this page` },
        },
      ],
    };
    entries.push({ resource: outcome, search: { mode: 'outcome' } });
  }
  return entries;
}

function entry(source: EntrySource, version: StoredVersion, mode: 'match' | 'include'): BundleEntry {
  const { query, model } = source;
  const resource = subset(version.resource as Resource, model, { summary: query.summary, elements: query.elements });
  return { fullUrl: `${source.base}/${version.type}/${version.id}`, resource, search: { mode } };
}
