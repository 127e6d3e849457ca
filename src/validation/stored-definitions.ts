import type { StructureDefinition } from 'fhir/r4';
import type { StoredDefinition, StoredDefinitions } from './library';

/**
 * The stored StructureDefinitions, read through whatever the application reads resources with
 * (its repository): a lookup by canonical url, and the store's change mark for the type, so that
 * lookups are reused until a StructureDefinition is written (by this process or another).
 */

interface StoredRow {
  id: string;
  versionId: number;
  lastUpdated: string;
  resource: unknown;
}

/** What is needed of the repository (its shape, not its module: validation imports no storage). */
export interface DefinitionReader {
  search(type: string, query: { url?: string; version?: string }, page: { count: number; offset: number }): Promise<{ resources: StoredRow[] }>;
  store: { changeMarks(types: string[]): Promise<Map<string, number>> };
}

const TYPE = 'StructureDefinition';

export function storedDefinitions(reader: DefinitionReader): StoredDefinitions {
  return {
    async generation() {
      const marks = await reader.store.changeMarks([TYPE]);
      return String(marks.get(TYPE) ?? 0);
    },
    async find(url, version) {
      const { resources } = await reader.search(TYPE, version ? { url, version } : { url }, { count: 100, offset: 0 });
      const rows = resources.filter((r) => (r.resource as StructureDefinition | null)?.resourceType === TYPE);
      if (rows.length === 0) return undefined;
      const newest = rows.reduce((a, b) => (newer(b, a) ? b : a));
      const found: StoredDefinition = { definition: newest.resource as StructureDefinition, stamp: `${newest.id}/${newest.versionId}/${newest.lastUpdated}` };
      return found;
    },
  };
}

/** Of several versions of one url, the highest version; the latest written when they tie. */
function newer(a: StoredRow, b: StoredRow): boolean {
  const va = (a.resource as StructureDefinition).version ?? '';
  const vb = (b.resource as StructureDefinition).version ?? '';
  const order = va.localeCompare(vb, 'en', { numeric: true });
  return order !== 0 ? order > 0 : a.lastUpdated > b.lastUpdated;
}
