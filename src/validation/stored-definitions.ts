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
  /** The current resources of the project with this url (and version). */
  search(type: string, query: { url: string; version?: string }, project: string): Promise<{ resources: StoredRow[] }>;
  /** Per type, a number that grows with every write of that type in the project. */
  changeMarks(project: string, types: string[]): Promise<Map<string, number>>;
  /** The scope whose definitions every project sees besides its own. */
  shared: string;
}

const TYPE = 'StructureDefinition';

export function storedDefinitions(reader: DefinitionReader): StoredDefinitions {
  return {
    async generation(project) {
      const own = (await reader.changeMarks(project, [TYPE])).get(TYPE) ?? 0;
      if (project === reader.shared) return String(own);
      return `${own}.${(await reader.changeMarks(reader.shared, [TYPE])).get(TYPE) ?? 0}`;
    },
    async find(url, version, project) {
      // The project's own definition wins over the shared scope's.
      for (const scope of project === reader.shared ? [project] : [project, reader.shared]) {
        const { resources } = await reader.search(TYPE, version ? { url, version } : { url }, scope);
        const rows = resources.filter((r) => (r.resource as StructureDefinition | null)?.resourceType === TYPE);
        if (rows.length === 0) continue;
        const newest = rows.reduce((a, b) => (newer(b, a) ? b : a));
        const found: StoredDefinition = {
          definition: newest.resource as StructureDefinition,
          stamp: `${scope}/${newest.id}/${newest.versionId}/${newest.lastUpdated}`,
        };
        return found;
      }
      return undefined;
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
