import type { CodeSystem, ConceptMap, ValueSet } from 'fhir/r4';
import { latestVersion, versionMatches } from './versions';

export type TerminologyResource = CodeSystem | ValueSet | ConceptMap;
export type TerminologyType = TerminologyResource['resourceType'];
export const TERMINOLOGY_TYPES: TerminologyType[] = ['CodeSystem', 'ValueSet', 'ConceptMap'];

/** What the resolver asks of one source of terminology resources. */
export interface CanonicalSource {
  /** Every version of the resource with this type and url. */
  all<T extends TerminologyResource>(type: T['resourceType'], url: string): T[];
  /** The code system whose `valueSet` element names this canonical. */
  codeSystemForValueSet(url: string): CodeSystem | undefined;
  /** The urls of every resource of a type. */
  urls(type: TerminologyType): Iterable<string>;
  conceptMaps(): Iterable<ConceptMap>;
  /** The language packs for a code system (`url`, without version). */
  languagePacks(url: string): CodeSystem[];
}

/**
 * Terminology resources of one source (bundled content, stored resources, or those a request
 * carries), found by canonical URL and version.
 */
export class CanonicalIndex implements CanonicalSource {
  private readonly byKey = new Map<string, TerminologyResource[]>();
  private readonly byId = new Map<string, TerminologyResource>();
  /** Code systems by the canonical of their implicit "all codes" value set. */
  private readonly byImplicitValueSet = new Map<string, CodeSystem>();
  /** Every ConceptMap, for a translation that names no map. */
  private readonly maps = new Set<ConceptMap>();
  /** Language packs (supplements of the lang-pack type) by the code system they supplement. */
  private readonly packs = new Map<string, CodeSystem[]>();

  /**
   * `byId`: a resource replaces the one with its type and id (stored content). Resources a request
   * carries are kept side by side: two versions of one code system often share an id there.
   */
  constructor(
    resources: Iterable<TerminologyResource> = [],
    private readonly options: { byId: boolean } = { byId: true },
  ) {
    for (const r of resources) this.add(r);
  }

  add(resource: TerminologyResource): void {
    if (resource.id && this.options.byId) {
      const idKey = `${resource.resourceType}/${resource.id}`;
      const previous = this.byId.get(idKey);
      if (previous) this.remove(previous);
      this.byId.set(idKey, resource);
    }
    if (resource.resourceType === 'ConceptMap') this.maps.add(resource);
    const packFor = languagePackTarget(resource);
    if (packFor) this.packs.set(packFor, [...(this.packs.get(packFor) ?? []), resource as CodeSystem]);
    if (!resource.url) return;
    if (resource.resourceType === 'CodeSystem' && resource.valueSet)
      this.byImplicitValueSet.set(resource.valueSet, resource);
    const key = `${resource.resourceType}|${resource.url}`;
    const list = this.byKey.get(key) ?? [];
    list.push(resource);
    this.byKey.set(key, list);
  }

  remove(resource: TerminologyResource): void {
    if (resource.id) {
      const idKey = `${resource.resourceType}/${resource.id}`;
      if (this.byId.get(idKey) === resource) this.byId.delete(idKey);
    }
    if (resource.resourceType === 'ConceptMap') this.maps.delete(resource);
    const packFor = languagePackTarget(resource);
    if (packFor)
      this.packs.set(
        packFor,
        (this.packs.get(packFor) ?? []).filter((r) => r !== resource),
      );
    if (!resource.url) return;
    if (
      resource.resourceType === 'CodeSystem' &&
      resource.valueSet &&
      this.byImplicitValueSet.get(resource.valueSet) === resource
    ) {
      this.byImplicitValueSet.delete(resource.valueSet);
    }
    const key = `${resource.resourceType}|${resource.url}`;
    const list = (this.byKey.get(key) ?? []).filter((r) => r !== resource);
    if (list.length === 0) this.byKey.delete(key);
    else this.byKey.set(key, list);
  }

  removeById(type: TerminologyType, id: string): void {
    const existing = this.byId.get(`${type}/${id}`);
    if (existing) this.remove(existing);
  }

  /** Every resource of a type that has an id. */
  *ofType<T extends TerminologyResource>(type: T['resourceType']): Iterable<T> {
    const prefix = `${type}/`;
    for (const [key, resource] of this.byId) if (key.startsWith(prefix)) yield resource as T;
  }

  getById<T extends TerminologyResource>(type: T['resourceType'], id: string): T | undefined {
    return this.byId.get(`${type}/${id}`) as T | undefined;
  }

  all<T extends TerminologyResource>(type: T['resourceType'], url: string): T[] {
    return (this.byKey.get(`${type}|${url}`) ?? []) as T[];
  }

  /** The resource with this url (and version, exact or by wildcard); without one, the latest. */
  find<T extends TerminologyResource>(type: T['resourceType'], url: string, version?: string): T | undefined {
    return selectVersion(this.all<T>(type, url), version);
  }

  /** The code system whose `valueSet` element names this canonical. */
  codeSystemForValueSet(url: string): CodeSystem | undefined {
    return this.byImplicitValueSet.get(url);
  }

  /** The urls of every resource of a type. */
  *urls(type: TerminologyType): Iterable<string> {
    const prefix = `${type}|`;
    for (const key of this.byKey.keys()) if (key.startsWith(prefix)) yield key.slice(prefix.length);
  }

  conceptMaps(): Iterable<ConceptMap> {
    return this.maps;
  }

  /** The language packs for a code system (`url`, without version). */
  languagePacks(url: string): CodeSystem[] {
    return this.packs.get(url) ?? [];
  }
}

const SUPPLEMENT_TYPE = 'http://hl7.org/fhir/StructureDefinition/codesystem-supplement-type';

/** A language pack applies whenever its code system is used, without being asked for. */
export function languagePackTarget(resource: TerminologyResource): string | undefined {
  if (resource.resourceType !== 'CodeSystem' || resource.content !== 'supplement' || !resource.supplements)
    return undefined;
  const type = resource.extension?.find((e) => e.url === SUPPLEMENT_TYPE)?.valueCode;
  return type === 'lang-pack' ? resource.supplements.split('|')[0] : undefined;
}

/** From the versions of one resource: the exact version, else a wildcard match, else (none asked) the latest. */
export function selectVersion<T extends TerminologyResource>(candidates: T[], version?: string): T | undefined {
  if (candidates.length === 0) return undefined;
  if (!version) return pickLatest(candidates);
  return (
    candidates.find((r) => r.version === version) ??
    pickLatest(candidates.filter((r) => versionMatches(version, r.version)))
  );
}

export function pickLatest<T extends TerminologyResource>(candidates: T[]): T | undefined {
  if (candidates.length <= 1) return candidates[0];
  const versions = candidates.map((r) => r.version).filter((v): v is string => v !== undefined);
  const newest = latestVersion(versions);
  return candidates.find((r) => r.version === newest) ?? candidates[candidates.length - 1];
}
