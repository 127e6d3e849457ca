import type { CodeSystem, ConceptMap, ValueSet } from 'fhir/r4';
import { CanonicalIndex, selectVersion, type CanonicalSource, type TerminologyResource } from './canonical-index';
import type { CodeSystemProvider } from './providers/provider';
import type { ProviderRegistry } from './providers/registry';
import { ContentMemo } from './content-memo';
import { versionMatches } from './versions';

const MAX_LOOKUPS = 10_000;

/**
 * Finds terminology resources across sources, in order of precedence: what the request carries
 * (tx-resource), what users stored, and the bundled FHIR R4 content. A versioned reference is
 * answered by the first source that has that version; an unversioned one by the first source
 * that has the resource at all (its latest version there).
 */
export class Resolver {
  /** Implicit value sets built so far (null: the url names none). */
  private readonly implicit = new Map<string, ValueSet | null>();
  /** Work derived from the content this resolver sees (expansions), dropped with it. */
  readonly memo = new ContentMemo();

  constructor(
    readonly sources: CanonicalSource[],
    private readonly providers: ProviderRegistry,
  ) {}

  /** The same sources with a request's own resources in front. */
  withRequestResources(resources: TerminologyResource[]): Resolver {
    if (resources.length === 0) return this;
    return new Resolver([new CanonicalIndex(resources, { byId: false }), ...this.sources], this.providers);
  }

  codeSystem(url: string, version?: string): CodeSystem | undefined {
    return this.found('CodeSystem', url, version, () =>
      this.find<CodeSystem>('CodeSystem', url, version, (cs) => cs.content !== 'supplement'),
    );
  }

  /** Any CodeSystem with this url, a supplement included (for error messages). */
  anyCodeSystem(url: string, version?: string): CodeSystem | undefined {
    return this.found('CodeSystem+', url, version, () => this.find<CodeSystem>('CodeSystem', url, version));
  }

  valueSet(url: string, version?: string): ValueSet | undefined {
    return this.found(
      'ValueSet',
      url,
      version,
      () => this.find<ValueSet>('ValueSet', url, version) ?? this.implicitValueSet(url, version),
    );
  }

  /**
   * Lookups answered before (a request asks for the same code system several times, every request
   * for the same few): the sources stay as they are for this resolver's life (a change of content
   * makes a new one). By kind, url and version, without building a key; bounded, as the urls come
   * from requests.
   */
  private readonly lookups = new Map<string, Map<string, Map<string, TerminologyResource | null>>>();
  private lookupCount = 0;

  private found<T extends TerminologyResource>(
    kind: string,
    url: string,
    version: string | undefined,
    look: () => T | undefined,
  ): T | undefined {
    let byUrl = this.lookups.get(kind);
    if (!byUrl) this.lookups.set(kind, (byUrl = new Map()));
    let byVersion = byUrl.get(url);
    const known = byVersion?.get(version ?? '');
    if (known !== undefined) return (known ?? undefined) as T | undefined;
    const resource = look();
    if (++this.lookupCount > MAX_LOOKUPS) {
      this.lookups.clear();
      this.lookupCount = 0;
      return resource;
    }
    if (!byVersion) byUrl.set(url, (byVersion = new Map()));
    byVersion.set(version ?? '', resource ?? null);
    return resource;
  }

  /**
   * Value sets that exist without a resource: a code system's `valueSet` (all of its codes), and
   * the `?fhir_vs` forms (`http://snomed.info/sct?fhir_vs`, `...?fhir_vs=isa/<code>`), and
   * `http://loinc.org/vs` for all of LOINC. Built once per resolver, so caches keyed on the
   * value set keep working.
   */
  private implicitValueSet(url: string, version?: string): ValueSet | undefined {
    const key = `${url}|${version ?? ''}`;
    const cached = this.implicit.get(key);
    if (cached !== undefined) return cached ?? undefined;
    let include: NonNullable<ValueSet['compose']>['include'][number] | undefined;
    const q = url.indexOf('?fhir_vs');
    if (q > 0) {
      const system = url.slice(0, q);
      const rest = url.slice(q + '?fhir_vs'.length);
      if (rest === '') include = { system };
      else if (rest.startsWith('=isa/'))
        include = { system, filter: [{ property: 'concept', op: 'is-a', value: rest.slice(5) }] };
    } else if (url === 'http://loinc.org/vs') {
      include = { system: 'http://loinc.org' };
    } else {
      const cs = this.sources.map((s) => s.codeSystemForValueSet(url)).find((c) => c !== undefined);
      // All codes of the code system, at whatever version the request or rules select. A version
      // asked for explicitly must exist: of the value set, or of the code system it stands for.
      const versionExists =
        !version ||
        (this.valueSetVersions(url).length === 0 &&
          cs?.url !== undefined &&
          this.codeSystemVersions(cs.url).includes(version));
      if (cs?.url && versionExists) include = { system: cs.url };
    }
    const vs: ValueSet | null = include
      ? { resourceType: 'ValueSet', url, version, status: 'active', compose: { include: [include] } }
      : null;
    this.implicit.set(key, vs);
    return vs ?? undefined;
  }

  conceptMap(url: string, version?: string): ConceptMap | undefined {
    return this.found('ConceptMap', url, version, () => this.find<ConceptMap>('ConceptMap', url, version));
  }

  /** Every known version of a code system, across sources. */
  /**
   * Every ConceptMap known, the request's first; one that a source of higher precedence has at
   * the same url and version hides the others.
   */
  conceptMaps(): ConceptMap[] {
    const seen = new Set<string>();
    const result: ConceptMap[] = [];
    for (const source of this.sources) {
      const here: ConceptMap[] = [];
      for (const map of source.conceptMaps()) {
        const key = `${map.url ?? ''}|${map.version ?? ''}`;
        if (map.url && seen.has(key)) continue;
        here.push(map);
      }
      for (const map of here) seen.add(`${map.url ?? ''}|${map.version ?? ''}`);
      result.push(...here);
    }
    return result;
  }

  /** Every code system known (supplements aside), with its versions, by url. */
  codeSystemCatalogue(): { url: string; versions: string[] }[] {
    const urls = new Set<string>();
    for (const source of this.sources) for (const url of source.urls('CodeSystem')) urls.add(url);
    return [...urls]
      .sort()
      .map((url) => ({ url, versions: this.codeSystemVersions(url) }))
      .filter(({ url }) => this.codeSystem(url) !== undefined);
  }

  codeSystemVersions(url: string): string[] {
    const versions = new Set<string>();
    for (const source of this.sources) {
      for (const cs of source.all<CodeSystem>('CodeSystem', url))
        if (cs.version && cs.content !== 'supplement') versions.add(cs.version);
    }
    return [...versions].sort();
  }

  valueSetVersions(url: string): string[] {
    const versions = new Set<string>();
    for (const source of this.sources)
      for (const vs of source.all<ValueSet>('ValueSet', url)) if (vs.version) versions.add(vs.version);
    return [...versions].sort();
  }

  /** The supplement with this canonical (`url` or `url|version`), if known. */
  supplement(canonical: string): CodeSystem | undefined {
    const [url, version] = canonical.split('|');
    const found = this.find<CodeSystem>('CodeSystem', url, version);
    return found?.content === 'supplement' ? found : undefined;
  }

  /** The stated supplements (useSupplement, valueset-supplement) that apply to this code system. */
  supplementsFor(cs: CodeSystem, stated: Iterable<string>): CodeSystem[] {
    const result: CodeSystem[] = [];
    for (const source of this.sources) {
      for (const pack of source.languagePacks(cs.url ?? '')) {
        const targetVersion = pack.supplements?.split('|')[1];
        if (!targetVersion || !cs.version || versionMatches(targetVersion, cs.version)) result.push(pack);
      }
    }
    for (const canonical of stated) {
      const supplement = this.supplement(canonical);
      if (!supplement?.supplements) continue;
      const [target, targetVersion] = supplement.supplements.split('|');
      if (target !== cs.url) continue;
      if (targetVersion && cs.version && !versionMatches(targetVersion, cs.version)) continue;
      if (!result.includes(supplement)) result.push(supplement);
    }
    return result;
  }

  /** The provider for a CodeSystem found here (built-in or over its concepts), with supplements applied. */
  provider(cs: CodeSystem, supplements: CodeSystem[] = []): CodeSystemProvider {
    return this.providers.provider(cs, supplements);
  }

  private find<T extends TerminologyResource>(
    type: T['resourceType'],
    url: string,
    version?: string,
    accept: (r: T) => boolean = () => true,
  ): T | undefined {
    for (const source of this.sources) {
      const candidates = source.all<T>(type, url).filter(accept);
      if (candidates.length === 0) continue;
      const found = selectVersion(candidates, version);
      if (found) return found;
      if (!version) return undefined;
    }
    return undefined;
  }
}
