import type { Resource } from 'fhir/r4';
import type { IndexRows } from '../storage/index-schema';
import type { StoredVersion } from '../storage/store';
import type { SearchPlan } from './execute';
import type { IndexExtractor } from './extract';
import { matches, sortValue } from './memory-match';
import { SqlBuilder } from './query/sql';

/**
 * The resources the server holds without storing them (the bundled R4 definitions) as search
 * matches: their index rows extracted once, matched and sorted in memory, and left out where a
 * stored resource of the same id replaces them.
 */

/** Resources the server holds without storing them (the bundled R4 definitions), by type. */
export interface BuiltInContent {
  of(type: string): readonly Resource[];
}

export interface BuiltInEntry {
  resource: Resource;
  rows: IndexRows;
}

export class BuiltInMatcher {
  private readonly cache = new Map<string, BuiltInEntry[]>();

  constructor(
    private readonly content?: BuiltInContent,
    private readonly extractor?: IndexExtractor,
  ) {}

  /** The built-in resources of a type with their index rows (extracted once: the content never changes). */
  entries(type: string): BuiltInEntry[] {
    const { content, extractor } = this;
    if (!content || !extractor) return [];
    let entries = this.cache.get(type);
    if (!entries) {
      entries = content.of(type).map((resource) => ({ resource, rows: extractor.extract(resource) }));
      this.cache.set(type, entries);
    }
    return entries;
  }

  /** The candidates (of `type`) that meet every criterion, in sort order; those a stored one replaces are left out. */
  async matches(plan: SearchPlan, type: string, candidates: BuiltInEntry[]): Promise<StoredVersion[]> {
    const { query, resolved, project } = plan;
    if (candidates.length === 0) return [];
    const found = candidates.filter(({ resource, rows }) =>
      query.criteria.every((c) => matches(resource, rows, c, resolved) === true),
    );
    if (found.length === 0) return [];
    const b = new SqlBuilder(project);
    const ids = found.map((f) => b.bind(f.resource.id));
    const shadowed = new Set(
      (
        await b.run<{ id: string }>(
          plan.store,
          `SELECT id FROM resources r WHERE ${b.scoped('r', [type])} AND deleted = FALSE AND id IN (${ids.join(', ')})`,
        )
      ).map((r) => r.id),
    );
    const visible = found.filter((f) => !shadowed.has(f.resource.id as string));
    const keyed = visible.map((f) => ({ f, keys: query.sort.map((key) => sortValue(f.resource, f.rows, key)) }));
    keyed.sort((a, b) => {
      for (let i = 0; i < query.sort.length; i++) {
        if (a.keys[i] === b.keys[i]) continue;
        const before = a.keys[i] < b.keys[i];
        return (before ? -1 : 1) * (query.sort[i].descending ? -1 : 1);
      }
      return (a.f.resource.id as string) < (b.f.resource.id as string) ? -1 : 1;
    });
    return keyed.map(({ f }) => builtInVersion(f.resource, project));
  }
}

/** A built-in resource as a version (what the server holds is its version 1, as published). */
export function builtInVersion(resource: Resource, project: string): StoredVersion {
  const meta = resource.meta;
  return {
    project,
    type: resource.resourceType,
    id: resource.id as string,
    versionId: Number(meta?.versionId ?? 1) || 1,
    lastUpdated: meta?.lastUpdated ?? '2019-11-01T00:00:00.000Z',
    resource,
  };
}
