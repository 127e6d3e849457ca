import type { OperationDefinition, Resource, SearchParameter } from 'fhir/r4';
import { readBundledDefinitions, type BundledDefinitionsFile } from '../fhir/bundled-definitions';

/**
 * The conformance resources the server holds without storing them, served as resources (read
 * and search) like stored ones: the operations it offers (its registry's OperationDefinitions),
 * the R4 terminology it bundles, the R4 search parameters, compartment definitions and
 * StructureDefinitions. A stored resource with the same type and id replaces a built-in one.
 * The large sets (StructureDefinitions, 35 MB) are read the first time they are asked for.
 */

export interface BuiltInSources {
  operationDefinitions(): OperationDefinition[];
  /** CodeSystem, ValueSet, ConceptMap of the bundled R4 content. */
  terminology(type: 'CodeSystem' | 'ValueSet' | 'ConceptMap'): Resource[];
  searchParameters(): SearchParameter[];
}

export class BuiltInResources {
  private readonly byType = new Map<string, Map<string, Resource>>();

  constructor(private readonly sources: BuiltInSources) {}

  of(type: string): readonly Resource[] {
    return [...this.index(type).values()];
  }

  read(type: string, id: string): Resource | undefined {
    return this.index(type).get(id);
  }

  private index(type: string): Map<string, Resource> {
    let map = this.byType.get(type);
    if (!map) {
      map = new Map();
      for (const resource of this.load(type)) if (resource.id) map.set(resource.id, resource);
      this.byType.set(type, map);
    }
    return map;
  }

  private load(type: string): Resource[] {
    switch (type) {
      case 'OperationDefinition':
        return this.sources.operationDefinitions();
      case 'CodeSystem':
      case 'ValueSet':
      case 'ConceptMap':
        return this.sources.terminology(type);
      case 'SearchParameter':
        return this.sources.searchParameters();
      case 'StructureDefinition':
        return [...fromBundle('profiles-types.json', type), ...fromBundle('profiles-resources.json', type)];
      case 'CompartmentDefinition':
        return fromBundle('profiles-resources.json', type);
      default:
        return [];
    }
  }
}

/** The resources of a type in one of the pinned definition bundles, without narrative. */
function fromBundle(file: BundledDefinitionsFile, type: string): Resource[] {
  const bundle = readBundledDefinitions(file);
  const out: Resource[] = [];
  for (const entry of bundle.entry ?? []) {
    const resource = entry.resource as (Resource & { text?: unknown }) | undefined;
    if (resource?.resourceType !== type) continue;
    const { text: _narrative, ...rest } = resource;
    out.push(rest as Resource);
  }
  return out;
}
