import type { StoreReader, StoredVersion } from '../storage/store';
import { versionFromRow, type VersionRow } from '../storage/store';
import type { Criterion, SearchQuery } from './query/criteria';
import type { Cursor } from './query/cursor';
import { SqlBuilder, type ResolvedCodes } from './query/sql';
import { isTextSort, restrictsType } from './query/sql-values';

/**
 * Running a parsed search against the index: its count, and one page of stored versions in the
 * search's order after (or before) a keyset cursor or at an offset, with the built-in resources
 * placed ahead of the stored ones. Bundle and links are src/search/searchset.ts's.
 */

/** A search ready to run: what was parsed, the types searched, and its terminology criteria resolved to codes. */
export interface SearchPlan {
  store: StoreReader;
  project: string;
  query: SearchQuery;
  types: string[];
  resolved: Map<Criterion, ResolvedCodes>;
}

/** Where a page starts: after (or before) a cursor, at an offset, or at the first match. */
export interface PagePosition {
  cursor?: Cursor;
  offset?: number;
}

interface PageItem {
  version: StoredVersion;
  rid: number;
  keys: unknown[];
}

export interface Page {
  items: PageItem[];
  hasNext: boolean;
  hasPrevious: boolean;
}

interface PageRow {
  rid: number;
  project: string;
  type: string;
  id: string;
  version: number;
  keys: unknown[];
}

/** The conditions on the resources row `r` that the query's criteria make. */
export function whereClause(b: SqlBuilder, query: SearchQuery, types: string[]): string {
  // A criterion whose index rows are of the types searched already restricts the type; stating it
  // again on `resources` would make the planner scan every resource of the type instead of
  // looking up the few row ids the criterion names.
  const typed = query.criteria.some(restrictsType);
  const conditions = typed ? [] : [b.scoped('r', types)];
  return [...conditions, 'r.deleted = FALSE', ...query.criteria.map((c) => b.criterion(c, 'r', types))].join(
    '\n  AND ',
  );
}

/** How many stored resources match. */
export async function countMatches(plan: SearchPlan): Promise<number> {
  const b = new SqlBuilder(plan.project, plan.resolved);
  const sql = `SELECT COUNT(*) AS n FROM resources r WHERE ${whereClause(b, plan.query, plan.types)}`;
  const [row] = await b.run<{ n: number | string }>(plan.store, sql);
  return Number(row?.n ?? 0);
}

/**
 * One page in the search's order: built-in resources first (in their own sort order), then the
 * stored ones. A cursor into the built-in part carries a negative position; one into the
 * stored part is a keyset over the index.
 */
export async function assemblePage(plan: SearchPlan, builtIns: StoredVersion[], position: PagePosition): Promise<Page> {
  const { query } = plan;
  const { cursor, offset } = position;
  const n = builtIns.length;
  const placeholder = query.sort.map(() => 0);
  const inStored = cursor !== undefined && cursor.rid > 0;
  const items: PageItem[] = [];
  let start = 0;
  if (!inStored && n > 0) {
    if (cursor) start = cursor.direction === 'next' ? -cursor.rid : Math.max(0, -cursor.rid - 1 - query.count);
    else if (offset !== undefined) start = Math.min(offset, n);
    builtIns
      .slice(start, start + query.count)
      .forEach((version, i) => items.push({ version, rid: -(start + i + 1), keys: placeholder }));
  }
  const room = query.count - items.length;
  if (room === 0) {
    const more = start + items.length < n || (await fetchRows(plan, {}, 0)).hasMore;
    return { items, hasNext: more, hasPrevious: start > 0 };
  }
  const storedOffset = offset !== undefined ? Math.max(0, offset - n) : undefined;
  const window: PagePosition = inStored ? { cursor } : { offset: storedOffset };
  const { rows, hasMore } = await fetchRows(plan, window, room);
  const versions = await contents(plan.store, plan.project, rows);
  rows.forEach((row, i) => {
    if (versions[i]) items.push({ version: versions[i], rid: row.rid, keys: row.keys });
  });
  const backwards = cursor?.direction === 'previous' && inStored;
  return {
    items,
    hasNext: backwards ? true : hasMore,
    hasPrevious: backwards ? hasMore || n > 0 : start > 0 || inStored || (offset ?? 0) > 0,
  };
}

/** One page of matching rows in sort order, and whether more lie beyond it. */
async function fetchRows(
  plan: SearchPlan,
  position: PagePosition,
  count: number,
): Promise<{ rows: PageRow[]; hasMore: boolean }> {
  const { query } = plan;
  const { cursor, offset } = position;
  const b = new SqlBuilder(plan.project, plan.resolved);
  const keys = query.sort.map((key, i) => `${b.sortExpression(key, 'r')} AS k${i}`);
  const inner = `SELECT r.rid, r.project, r.type, r.id, r.version${keys.map((k) => `, ${k}`).join('')} FROM resources r WHERE ${whereClause(b, query, plan.types)}`;
  const backwards = cursor?.direction === 'previous';
  const ascending = query.sort.map((key) => key.descending === backwards);
  const keyset = cursor ? `WHERE ${keysetCondition(b, query, cursor, ascending)}` : '';
  const order = [
    ...query.sort.map((_, i) => `q.k${i} ${ascending[i] ? 'ASC' : 'DESC'}`),
    `q.rid ${backwards ? 'DESC' : 'ASC'}`,
  ].join(', ');
  const sql = `SELECT q.* FROM (${inner}) q ${keyset} ORDER BY ${order} LIMIT ${b.bind(count + 1)}${offset ? ` OFFSET ${b.bind(offset)}` : ''}`;
  const raw = await b.run<Record<string, unknown>>(plan.store, sql);
  const hasMore = raw.length > count;
  const rows: PageRow[] = raw.slice(0, count).map((row) => ({
    rid: Number(row.rid),
    project: String(row.project),
    type: String(row.type),
    id: String(row.id),
    version: Number(row.version),
    keys: query.sort.map((key, i) => (isTextSort(key) ? row[`k${i}`] : Number(row[`k${i}`]))),
  }));
  if (backwards) rows.reverse();
  return { rows, hasMore };
}

/** The rows of the subquery `q` beyond the cursor's row in the page's direction (sort keys, then row id). */
function keysetCondition(b: SqlBuilder, query: SearchQuery, cursor: Cursor, ascending: boolean[]): string {
  const backwards = cursor.direction === 'previous';
  const terms: string[] = [];
  for (let i = 0; i <= query.sort.length; i++) {
    const equal = query.sort.slice(0, i).map((_, j) => `q.k${j} = ${b.bind(cursor.keys[j])}`);
    const after =
      i < query.sort.length
        ? `q.k${i} ${ascending[i] ? '>' : '<'} ${b.bind(cursor.keys[i])}`
        : `q.rid ${backwards ? '<' : '>'} ${b.bind(cursor.rid)}`;
    terms.push(`(${[...equal, after].join(' AND ')})`);
  }
  return terms.join(' OR ');
}

/** The stored versions of a page's rows, in the page's order. */
async function contents(store: StoreReader, project: string, rows: PageRow[]): Promise<(StoredVersion | undefined)[]> {
  if (rows.length === 0) return [];
  const b = new SqlBuilder(project);
  const keys = rows
    .map(
      (row) =>
        `(${b.bind(row.project)}, ${b.bind(row.type)}, ${b.bind(row.id)}, CAST(${b.bind(row.version)} AS INTEGER))`,
    )
    .join(', ');
  const found = await b.run<VersionRow>(
    store,
    `SELECT project, type, id, version, last_updated, content FROM resource_versions WHERE (project, type, id, version) IN (VALUES ${keys})`,
  );
  const byKey = new Map(found.map((row) => [`${row.project}/${row.type}/${row.id}`, versionFromRow(row)]));
  return rows.map((row) => byKey.get(`${row.project}/${row.type}/${row.id}`) as StoredVersion);
}
