import { versionFromRow, type StoredVersion, type StoreReader, type VersionRow } from '../storage/store';
import type { Include, SearchQuery } from './query/criteria';
import { SqlBuilder } from './query/sql';
import type { SearchParameterRegistry } from './registry';

/**
 * `_include` and `_revinclude` (with `:iterate`): the resources a page's matches point at, and
 * those that point at them, each once, up to a limit. Iteration follows the `:iterate` ones from
 * what was just added, at most a few levels deep.
 */

const MAX_ITERATIONS = 4;

interface IncludeRequest {
  project: string;
  store: StoreReader;
  registry: SearchParameterRegistry;
  matches: StoredVersion[];
  query: SearchQuery;
  limit: number;
}

export async function includeEntries(
  request: IncludeRequest,
): Promise<{ versions: StoredVersion[]; truncated: boolean }> {
  const { project, store, matches, query, limit } = request;
  const seen = new Set(matches.map(key));
  const added: StoredVersion[] = [];
  let truncated = false;
  let frontier = matches;
  for (let round = 0; round < MAX_ITERATIONS && frontier.length > 0 && !truncated; round++) {
    const includes = query.include.filter((i) => round === 0 || i.iterate);
    const revincludes = query.revinclude.filter((i) => round === 0 || i.iterate);
    if (includes.length === 0 && revincludes.length === 0) break;
    const found: StoredVersion[] = [];
    for (const include of includes) found.push(...(await forward(project, store, frontier, include, limit + 1)));
    for (const include of revincludes) found.push(...(await reverse(project, store, frontier, include, limit + 1)));
    const fresh: StoredVersion[] = [];
    for (const version of found) {
      if (seen.has(key(version))) continue;
      if (added.length >= limit) {
        truncated = true;
        break;
      }
      seen.add(key(version));
      added.push(version);
      fresh.push(version);
    }
    frontier = fresh;
  }
  return { versions: added, truncated };
}

function key(version: StoredVersion): string {
  return `${version.type}/${version.id}`;
}

/** What the sources point at through the parameter. */
async function forward(
  project: string,
  store: StoreReader,
  sources: StoredVersion[],
  include: Include,
  limit: number,
): Promise<StoredVersion[]> {
  const from = include.sourceType === '*' ? sources : sources.filter((s) => s.type === include.sourceType);
  if (from.length === 0) return [];
  const b = new SqlBuilder(project);
  const pairs = from.map((s) => `(${b.bind(s.type)}, ${b.bind(s.id)})`).join(', ');
  const conditions = ['x.target_id IS NOT NULL'];
  if (include.param !== '*') conditions.push(`x.param = ${b.bind(include.param)}`);
  if (include.targetType) conditions.push(`x.target_type = ${b.bind(include.targetType)}`);
  const targets = await b.run<{ target_type: string; target_id: string }>(
    store,
    `SELECT DISTINCT x.target_type, x.target_id FROM search_reference x JOIN resources s ON s.rid = x.rid
      WHERE s.project = ${b.bind(project)} AND (s.type, s.id) IN (VALUES ${pairs}) AND ${conditions.join(' AND ')}`,
  );
  return readCurrent(
    project,
    store,
    targets.slice(0, limit).map((t) => [t.target_type, t.target_id]),
  );
}

/** What points at the sources through the parameter. */
async function reverse(
  project: string,
  store: StoreReader,
  targets: StoredVersion[],
  include: Include,
  limit: number,
): Promise<StoredVersion[]> {
  if (targets.length === 0) return [];
  const b = new SqlBuilder(project);
  const conditions: string[] = [`x.project = ${b.bind(project)}`];
  if (include.sourceType !== '*') conditions.push(`x.type = ${b.bind(include.sourceType)}`);
  if (include.param !== '*') conditions.push(`x.param = ${b.bind(include.param)}`);
  const pairs = targets.map((t) => `(${b.bind(t.type)}, ${b.bind(t.id)})`).join(', ');
  conditions.push(`(x.target_type, x.target_id) IN (VALUES ${pairs})`);
  const rows = await b.run<VersionRow>(
    store,
    `SELECT v.project, v.type, v.id, v.version, v.last_updated, v.content FROM resource_versions v
      JOIN resources r ON v.project = r.project AND v.type = r.type AND v.id = r.id AND v.version = r.version
      WHERE r.deleted = FALSE AND r.rid IN (SELECT x.rid FROM search_reference x WHERE ${conditions.join(' AND ')})
      ORDER BY r.rid LIMIT ${b.bind(limit)}`,
  );
  return rows.map((row) => versionFromRow(row));
}

/** The current, live versions of the resources named (type, id). */
async function readCurrent(project: string, store: StoreReader, keys: [string, string][]): Promise<StoredVersion[]> {
  if (keys.length === 0) return [];
  const b = new SqlBuilder(project);
  const pairs = keys.map(([type, id]) => `(${b.bind(type)}, ${b.bind(id)})`).join(', ');
  const rows = await b.run<VersionRow>(
    store,
    `SELECT v.project, v.type, v.id, v.version, v.last_updated, v.content FROM resources r
      JOIN resource_versions v ON v.project = r.project AND v.type = r.type AND v.id = r.id AND v.version = r.version
      WHERE r.project = ${b.bind(project)} AND (r.type, r.id) IN (VALUES ${pairs}) AND r.deleted = FALSE ORDER BY r.rid`,
  );
  return rows.map((row) => versionFromRow(row));
}
