import type { Resource, ValueSet } from 'fhir/r4';
import type { CanonicalIndex, TerminologyResource } from './canonical-index';
import type { TerminologySource } from './content-port';
import { SYSTEM_PROJECT } from '../context/projects';
import { ProviderRegistry } from './providers/registry';
import { builtInTerminologies } from './providers';
import { Resolver } from './resolver';
import { TxParams, type TxParamsInput } from './params';
import { TerminologySession } from './session';

// What src/content needs to feed the engine: the port it implements and the index types it fills.
export { CanonicalIndex, languagePackTarget, TERMINOLOGY_TYPES } from './canonical-index';
export type { CanonicalSource, TerminologyResource, TerminologyType } from './canonical-index';
export type { ProjectTerminology, TerminologySource } from './content-port';
// What in-process callers name when they use a session.
export { TerminologySession } from './session';
export { TerminologyError, toFhirIssue } from './issues';
export { message } from './messages';
export type { TxParamsInput } from './params';
export type { Resolver } from './resolver';
export type { CompareResult } from './compare';
export type { LookupResult } from './lookup';
export type { SubsumptionOutcome } from './subsumes';
export type { ValidationResult } from './membership/state';
export type { DrawnOnMemo } from './membership/undecidable';

export interface SessionOptions {
  project: string;
  /** The request's terminology parameters (the tx expansion profile); none for defaults. */
  input?: TxParamsInput;
  /** The request's Accept-Language, for displays. */
  acceptLanguage?: string;
  /** The request's own tx-resources, seen in front of the stored content. */
  requestResources?: Resource[];
  /** Throws when the caller's time is spent; the engine calls it in its long loops. */
  checkBudget?: () => void;
}

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
    readonly stored: TerminologySource,
  ) {
    this.providers = new ProviderRegistry(builtInTerminologies((url) => core.find<ValueSet>('ValueSet', url)));
  }

  /**
   * The one way in-process callers use the engine: a session over what the project sees now
   * (plus the request's tx-resources), under the request's parameters and budget.
   */
  async session(options: SessionOptions): Promise<TerminologySession> {
    const resolver = await this.resolver(options.project, options.requestResources);
    const params = TxParams.from(options.input ?? {}, options.acceptLanguage);
    return new TerminologySession(resolver, params, options.checkBudget ?? noBudget);
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
      const indexes = project === SYSTEM_PROJECT ? [own.index] : [own.index, this.stored.of(SYSTEM_PROJECT).index];
      base = { token, resolver: new Resolver([...indexes, this.providers.index, this.core], this.providers) };
      // Projects that stop asking give their resolvers back (built again in microseconds when asked).
      if (this.bases.size >= 1000) this.bases.delete(this.bases.keys().next().value as string);
      this.bases.set(project, base);
    }
    const own = requestResources.filter(
      (r): r is TerminologyResource =>
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
    const system = this.stored.of(SYSTEM_PROJECT);
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

/** For callers without a deadline of their own. */
const noBudget = (): void => undefined;
