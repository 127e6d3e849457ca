import type { CodeSystem } from 'fhir/r4';
import { CanonicalIndex } from '../canonical-index';
import type { CodeSystemProvider } from './provider';
import { ResourceCodeSystemProvider } from './resource-provider';
import { SupplementedProvider } from './supplemented-provider';

/**
 * A terminology the server knows by rules or tables rather than by a CodeSystem resource's
 * concepts (UCUM, BCP-47, ISO 3166, ...). Its `resource` describes it (url, version, name) and is
 * found by url like any CodeSystem, so versions, capabilities and status checks need nothing
 * special; `create` builds the provider, once, the first time a request needs it.
 */
export interface BuiltInTerminology {
  readonly resource: CodeSystem;
  create(): CodeSystemProvider;
}

/**
 * Picks the provider for a code system: the built-in one when the CodeSystem found is a built-in's
 * description, otherwise one over the CodeSystem resource's concepts. Providers are expensive to
 * build and cheap to keep: built-ins live as long as the server, resource providers as long as
 * their resource object (a stored resource that changes is a new object, so its stale provider is
 * never asked for again and is collected with it), each per set of supplements.
 */
export class ProviderRegistry {
  /** The built-ins' descriptions, as one more source of CodeSystems. */
  readonly index: CanonicalIndex;
  private readonly builtIns = new Map<CodeSystem, { factory: BuiltInTerminology; provider?: CodeSystemProvider }>();
  private readonly cache = new WeakMap<CodeSystem, Map<string, CodeSystemProvider>>();

  constructor(builtIns: BuiltInTerminology[] = []) {
    for (const factory of builtIns) this.builtIns.set(factory.resource, { factory });
    this.index = new CanonicalIndex(builtIns.map((b) => b.resource));
  }

  provider(cs: CodeSystem, supplements: CodeSystem[] = []): CodeSystemProvider {
    let byKey = this.cache.get(cs);
    if (!byKey) {
      byKey = new Map();
      this.cache.set(cs, byKey);
    }
    const key = supplements.map((s) => `${s.url}|${s.version ?? ''}`).join(',');
    let provider = byKey.get(key);
    if (!provider) {
      provider = this.build(cs, supplements);
      byKey.set(key, provider);
    }
    return provider;
  }

  private build(cs: CodeSystem, supplements: CodeSystem[]): CodeSystemProvider {
    const builtIn = this.builtIns.get(cs);
    if (!builtIn) return new ResourceCodeSystemProvider(cs, supplements);
    builtIn.provider ??= builtIn.factory.create();
    return supplements.length === 0 ? builtIn.provider : new SupplementedProvider(builtIn.provider, supplements);
  }
}
