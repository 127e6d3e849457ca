import type { Resource, ValueSet } from 'fhir/r4';
import type { CanonicalIndex, TerminologyResource } from './canonical-index';
import type { StoredTerminologies } from './content/stored-terminology';
import { SYSTEM_PROJECT } from '../context/projects';
import { ProviderRegistry } from './providers/registry';
import { builtInTerminologies } from './providers';
import { Resolver } from './resolver';

/**
 * The terminology engine's front door for the rest of the server: resolvers over the bundled
 * and stored content (refreshed before each use), and lookups of bundled resources by id.
 */
export class TerminologyService {
  private readonly providers: ProviderRegistry;
  /** Per project: the resolver over its content, while the content stays as it was. */
  private readonly bases = new Map<string, { token: string; resolver: Resolver }>();

  constructor(
    readonly core: CanonicalIndex,
    readonly stored: StoredTerminologies,
  ) {
    this.providers = new ProviderRegistry(builtInTerminologies((url) => core.find<ValueSet>('ValueSet', url)));
  }

  /**
   * A resolver that sees what the project and the system scope have stored now, plus the
   * request's own tx-resources in front.
   */
  async resolver(project: string, requestResources: Resource[] = []): Promise<Resolver> {
    const token = await this.stateToken(project);
    let base = this.bases.get(project);
    if (!base || base.token !== token) {
      const own = this.stored.of(project);
      const indexes = project === SYSTEM_PROJECT ? [own.index] : [own.index, this.stored.system.index];
      base = { token, resolver: new Resolver([...indexes, this.providers.index, this.core], this.providers) };
      // Projects that stop asking give their resolvers back (built again in microseconds when asked).
      if (this.bases.size >= 1000) this.bases.delete(this.bases.keys().next().value as string);
      this.bases.set(project, base);
    }
    const own = requestResources.filter((r): r is TerminologyResource =>
      r.resourceType === 'CodeSystem' || r.resourceType === 'ValueSet' || r.resourceType === 'ConceptMap',
    );
    return base.resolver.withRequestResources(own);
  }

  /**
   * Names the terminology content a project's answers depend on now: it changes whenever its stored
   * content or the system scope's changes (here or in another process over the same database);
   * the bundled content never does.
   */
  async stateToken(project: string): Promise<string> {
    const own = this.stored.of(project);
    if (project === SYSTEM_PROJECT) {
      await own.refresh();
      return String(own.generation);
    }
    const system = this.stored.system;
    // Usually neither needs a refresh (nothing changed): no promise to wait for.
    const refreshing = [own.refresh(), system.refresh()].filter((p) => p !== undefined);
    if (refreshing.length > 0) await Promise.all(refreshing);
    return `${own.generation}.${system.generation}`;
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
