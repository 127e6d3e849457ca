import type { Resource, ValueSet } from 'fhir/r4';
import type { CanonicalIndex, TerminologyResource } from './canonical-index';
import type { StoredTerminology } from './content/stored-terminology';
import { ProviderRegistry } from './codesystem/registry';
import { builtInTerminologies } from './providers';
import { Resolver } from './resolver';

/**
 * The terminology engine's front door for the rest of the server: resolvers over the bundled
 * and stored content (refreshed before each use), and lookups of bundled resources by id.
 */
export class TerminologyService {
  private readonly providers: ProviderRegistry;
  private base?: { generation: number; resolver: Resolver };

  constructor(
    readonly core: CanonicalIndex,
    readonly stored: StoredTerminology,
  ) {
    this.providers = new ProviderRegistry(builtInTerminologies((url) => core.find<ValueSet>('ValueSet', url)));
  }

  /** A resolver that sees what is stored now, plus the request's own tx-resources in front. */
  async resolver(requestResources: Resource[] = []): Promise<Resolver> {
    await this.stored.refresh();
    if (!this.base || this.base.generation !== this.stored.generation) {
      this.base = { generation: this.stored.generation, resolver: new Resolver([this.stored.index, this.providers.index, this.core], this.providers) };
    }
    const own = requestResources.filter((r): r is TerminologyResource =>
      r.resourceType === 'CodeSystem' || r.resourceType === 'ValueSet' || r.resourceType === 'ConceptMap',
    );
    return this.base.resolver.withRequestResources(own);
  }

  /**
   * Names the terminology content answers depend on now: it changes whenever stored content
   * changes (here or in another process over the same database); the bundled content never does.
   */
  async stateToken(): Promise<string> {
    await this.stored.refresh();
    return String(this.stored.generation);
  }

  /**
   * The one code system a bundled value set draws its codes from (administrative-gender ->
   * http://hl7.org/fhir/administrative-gender), or undefined when it draws on several or none.
   */
  systemOfValueSet(url: string): string | undefined {
    if (this.systemsOfValueSets.has(url)) return this.systemsOfValueSets.get(url) ?? undefined;
    const systems = new Set((this.core.find<ValueSet>('ValueSet', url)?.compose?.include ?? []).map((i) => i.system));
    const system = systems.size === 1 ? ([...systems][0] ?? null) : null;
    this.systemsOfValueSets.set(url, system);
    return system ?? undefined;
  }

  private readonly systemsOfValueSets = new Map<string, string | null>();

  /** A bundled resource by type and id (the stored ones are read from storage). */
  coreById(type: string, id: string): TerminologyResource | undefined {
    if (type !== 'CodeSystem' && type !== 'ValueSet' && type !== 'ConceptMap') return undefined;
    return this.core.getById(type, id);
  }
}
