import type { Bundle, BundleLink } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import { fhirError } from '../fhir/errors';
import { readHistory, type HistoryQuery } from '../storage/history';
import type { StoredVersion, StoreReader } from '../storage/store';
import { historyEntry } from './responses';

/**
 * History at instance, type and system level (R4 http.html#history): newest first, `_count`,
 * `_since`, `_at`, paged by a cursor on the last version shown; each entry carries the request
 * that made the version and its response (bdl-3, bdl-4), a deletion as a DELETE with no resource.
 */

export const DEFAULT_HISTORY_COUNT = 50;
export const MAX_HISTORY_COUNT = 1000;

export interface HistoryTarget {
  type?: string;
  id?: string;
}

export async function history(
  reader: StoreReader,
  target: HistoryTarget,
  query: Record<string, string[]>,
  ctx: RequestContext,
): Promise<Bundle> {
  const one = (name: string) => query[name]?.[0];
  const count = one('_count');
  if (count !== undefined && !/^\d{1,7}$/.test(count))
    throw fhirError('ERR_HISTORY_PARAM', { name: '_count', value: count.slice(0, 50) });
  const q: HistoryQuery = {
    ...target,
    project: ctx.project,
    count: Math.min(count === undefined ? DEFAULT_HISTORY_COUNT : Number(count), MAX_HISTORY_COUNT),
  };
  const since = one('_since');
  if (since !== undefined) q.since = instant('_since', since);
  const at = one('_at');
  if (at !== undefined) q.at = instant('_at', at);
  const cursor = one('_page');
  if (cursor !== undefined) q.after = decodePage(cursor);
  const { versions, more } = q.count === 0 ? { versions: [], more: false } : await readHistory(reader, q);
  if (target.id !== undefined && versions.length === 0 && !cursor && !since && !at) {
    throw fhirError('ERR_RESOURCE_NOT_FOUND', { type: target.type as string, id: target.id });
  }
  const base = `${ctx.baseUrl}${target.type ? `/${target.type}` : ''}${target.id ? `/${target.id}` : ''}/_history`;
  const params = new URLSearchParams();
  if (since !== undefined) params.set('_since', since);
  if (at !== undefined) params.set('_at', at);
  params.set('_count', String(q.count));
  const links: BundleLink[] = [
    { relation: 'self', url: `${base}?${params.toString()}${cursor ? `&_page=${cursor}` : ''}` },
  ];
  const last = versions[versions.length - 1];
  if (more && last) links.push({ relation: 'next', url: `${base}?${params.toString()}&_page=${encodePage(last)}` });
  const created = await creations(reader, ctx.project, versions);
  const bundle: Bundle = {
    resourceType: 'Bundle',
    type: 'history',
    link: links,
    entry: versions.map((v) => historyEntry(ctx, v, created.has(v))),
  };
  if (!more && !cursor) bundle.total = versions.length;
  return bundle;
}

/**
 * The versions that created their resource, as their write answered 201: the first, and one
 * written after a deletion (a re-create). Whether the version before was a deletion is read from the
 * page, or from the store for those whose previous version is not on it (at most one per resource).
 */
async function creations(reader: StoreReader, project: string, versions: StoredVersion[]): Promise<Set<StoredVersion>> {
  const key = (type: string, id: string, versionId: number) => `${type}/${id}/${versionId}`;
  const onPage = new Map(versions.map((v) => [key(v.type, v.id, v.versionId), v]));
  const created = new Set<StoredVersion>();
  const offPage: StoredVersion[] = [];
  for (const v of versions) {
    if (v.resource === null) continue;
    if (v.versionId === 1) {
      created.add(v);
      continue;
    }
    const previous = onPage.get(key(v.type, v.id, v.versionId - 1));
    if (previous === undefined) offPage.push(v);
    else if (previous.resource === null) created.add(v);
  }
  const previous = await Promise.all(offPage.map((v) => reader.readVersion(project, v.type, v.id, v.versionId - 1)));
  offPage.forEach((v, i) => {
    if (previous[i]?.resource === null) created.add(v);
  });
  return created;
}

function instant(name: string, value: string): string {
  const at = Date.parse(value);
  if (!/^\d{4}-\d\d-\d\d(T[\d:.]+(Z|[+-]\d\d:\d\d)?)?$/.test(value) || !Number.isFinite(at))
    throw fhirError('ERR_HISTORY_PARAM', { name, value: value.slice(0, 50) });
  return new Date(at).toISOString();
}

function encodePage(v: { lastUpdated: string; type: string; id: string; versionId: number }): string {
  return Buffer.from(JSON.stringify([v.lastUpdated, v.type, v.id, v.versionId]), 'utf8').toString('base64url');
}

function decodePage(text: string): HistoryQuery['after'] {
  try {
    const [lastUpdated, type, id, version] = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as unknown[];
    if (
      typeof lastUpdated === 'string' &&
      typeof type === 'string' &&
      typeof id === 'string' &&
      typeof version === 'number'
    )
      return { lastUpdated, type, id, version };
  } catch {
    // fall through
  }
  throw fhirError('ERR_HISTORY_PARAM', { name: '_page', value: text.slice(0, 50) });
}
