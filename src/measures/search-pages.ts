import type { Bundle, Resource } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import type { SearchService } from '../search/search-service';

/** Searches read whole, page by page (subjects and data of a measure; no CQL engine needed). */

export type SearchTarget = Parameters<SearchService['search']>[0];

/** The matches of a search page by page, following its next links. */
export async function* searchPages(
  search: SearchService,
  target: SearchTarget,
  query: Record<string, string[]>,
  ctx: RequestContext,
  pageSize = 1000,
): AsyncGenerator<Resource[]> {
  let cursor: string | undefined;
  do {
    const page: Bundle = await search.search(
      target,
      { ...query, _count: [String(pageSize)], ...(cursor ? { _cursor: [cursor] } : {}) },
      ctx,
    );
    yield (page.entry ?? [])
      .filter((e) => e.search?.mode !== 'include' && e.resource)
      .map((e) => e.resource as Resource);
    const next = page.link?.find((l) => l.relation === 'next')?.url;
    cursor = next === undefined ? undefined : (new URL(next).searchParams.get('_cursor') ?? undefined);
  } while (cursor !== undefined);
}

/** Every match of a search, all pages. */
export async function searchAll(
  search: SearchService,
  target: SearchTarget,
  query: Record<string, string[]>,
  ctx: RequestContext,
): Promise<Resource[]> {
  const out: Resource[] = [];
  for await (const page of searchPages(search, target, query, ctx)) out.push(...page);
  return out;
}
