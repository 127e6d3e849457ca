import { versionFromRow, type StoredVersion, type StoreReader, type VersionRow } from './store';

/**
 * History across resources (of one type, or all): versions newest first, by the instant they were
 * written, paged with a keyset on (instant, type, id, version) so a page boundary never moves when
 * new versions arrive. The SQL is the same on both backends.
 */

export interface HistoryQuery {
  project: string;
  type?: string;
  id?: string;
  /** Only versions written at or after this instant (ISO, UTC). */
  since?: string;
  /** Only the versions that were current at this instant (ISO, UTC). */
  at?: string;
  count: number;
  /** Continue after this version (the last one of the previous page). */
  after?: { lastUpdated: string; type: string; id: string; version: number };
}

export async function readHistory(
  reader: StoreReader,
  query: HistoryQuery,
): Promise<{ versions: StoredVersion[]; more: boolean }> {
  const where: string[] = ['v.project = ?'];
  const params: unknown[] = [query.project];
  const filter = (condition: string, value: unknown) => {
    where.push(condition);
    params.push(value);
  };
  if (query.type !== undefined) filter('v.type = ?', query.type);
  if (query.id !== undefined) filter('v.id = ?', query.id);
  if (query.since !== undefined) filter('v.last_updated >= ?', query.since);
  if (query.at !== undefined) {
    where.push(`v.last_updated <= ? AND v.version = (SELECT MAX(w.version) FROM resource_versions w
      WHERE w.project = v.project AND w.type = v.type AND w.id = v.id AND w.last_updated <= ?)`);
    params.push(query.at, query.at);
  }
  if (query.after && query.id !== undefined) {
    // One resource's history goes by version (two writers' clocks need not agree with the order the store gave).
    where.push('v.version < ?');
    params.push(query.after.version);
  } else if (query.after) {
    const a = query.after;
    where.push(
      `(v.last_updated < ? OR (v.last_updated = ? AND (v.type < ? OR (v.type = ? AND (v.id < ? OR (v.id = ? AND v.version < ?))))))`,
    );
    params.push(a.lastUpdated, a.lastUpdated, a.type, a.type, a.id, a.id, a.version);
  }
  const rows = await reader.query<VersionRow>(
    `SELECT v.project, v.type, v.id, v.version, v.last_updated, v.content, v.method FROM resource_versions v
      WHERE ${where.join(' AND ')}
      ORDER BY ${query.id !== undefined ? 'v.version DESC' : 'v.last_updated DESC, v.type DESC, v.id DESC, v.version DESC'} LIMIT ?`,
    [...params, query.count + 1],
  );
  return { versions: rows.slice(0, query.count).map((row) => versionFromRow(row)), more: rows.length > query.count };
}
