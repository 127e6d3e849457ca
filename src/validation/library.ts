import type { StructureDefinition } from 'fhir/r4';
import { MEDPLUM_DEFINITION_PREFIX } from '../fhir/admin-types';
import type { BundledDefinitions } from './bundled-definitions';
import { compileProfile, ProfileError } from './compile';
import type { CompiledProfile } from './model';
import { generateSnapshot } from './snapshot';

/**
 * Where profiles come from, and their compiled forms kept: the bundled R4 definitions (compiled on
 * first use, kept for the life of the process) and the StructureDefinitions users store (read
 * through a port, compiled per stored version: a changed profile is compiled again, never served
 * stale). Bundled urls win: the R4 definitions cannot be replaced by storing one with their url.
 */

export interface StoredDefinition {
  definition: StructureDefinition;
  /** Changes whenever the stored resource does (id, versionId, lastUpdated). */
  stamp: string;
}

/** The stored StructureDefinitions, as the application reaches them (no storage code here). */
export interface StoredDefinitions {
  /** Changes whenever any stored StructureDefinition does; lookups are reused while it does not. */
  generation(project: string): Promise<string>;
  /**
   * The current StructureDefinition of the project (or the system scope) with this url (and
   * version, when given); the newest when several. Its stamp names the project too.
   */
  find(url: string, version: string | undefined, project: string): Promise<StoredDefinition | undefined>;
}

export const CORE_PREFIX = 'http://hl7.org/fhir/StructureDefinition/';

/** Compiled stored profiles kept (each a few hundred KB at most). */
const MAX_STORED = 500;

export class ProfileLibrary {
  private readonly bundledCompiled = new Map<string, CompiledProfile | null>();
  /** Base definitions by type name: asked for at every element, so without building a url each time. */
  private readonly bases = new Map<string, CompiledProfile | undefined>();
  private readonly storedCompiled = new Map<string, CompiledProfile | ProfileError>();
  /** Per project: lookups made while its stored definitions stayed as they were. */
  private readonly lookups = new Map<
    string,
    { generation: string; found: Map<string, Promise<StoredDefinition | undefined>> }
  >();

  constructor(
    readonly bundled: BundledDefinitions,
    private readonly stored?: StoredDefinitions,
  ) {}

  /** The base definition of a type (`Patient`, `CodeableConcept`, `string`). */
  base(type: string): CompiledProfile | undefined {
    let base = this.bases.get(type);
    if (base === undefined && !this.bases.has(type)) {
      base = this.bundledProfile(CORE_PREFIX + type) ?? this.bundledProfile(MEDPLUM_DEFINITION_PREFIX + type);
      this.bases.set(type, base);
    }
    return base;
  }

  isBundled(canonical: string): boolean {
    return this.bundled.has(canonical);
  }

  bundledProfile(canonical: string): CompiledProfile | undefined {
    const url = canonical.split('|')[0];
    let compiled = this.bundledCompiled.get(url);
    if (compiled === undefined) {
      const definition = this.bundled.get(url);
      compiled = definition ? compileProfile(definition) : null;
      this.bundledCompiled.set(url, compiled);
    }
    return compiled ?? undefined;
  }

  /** A resolution scope for one validation: stored lookups are current as of its start. */
  async session(project: string): Promise<ProfileSession> {
    if (this.stored) {
      const generation = await this.stored.generation(project);
      const known = this.lookups.get(project);
      if (known?.generation !== generation) {
        if (!known && this.lookups.size >= 100) this.lookups.delete(this.lookups.keys().next().value as string);
        this.lookups.set(project, { generation, found: new Map() });
      }
    }
    return new ProfileSession(this, project);
  }

  /** A session that sees the bundled definitions only (the structural check of writes). */
  sessionWithoutStore(): ProfileSession {
    return new ProfileSession(this, undefined);
  }

  findStored(canonical: string, project: string | undefined): Promise<StoredDefinition | undefined> {
    if (!this.stored || project === undefined) return Promise.resolve(undefined);
    const lookups = this.lookups.get(project)?.found;
    let found = lookups?.get(canonical);
    if (!found) {
      const [url, version] = canonical.split('|');
      found = this.stored.find(url, version, project);
      if (lookups) {
        lookups.set(canonical, found);
        found.catch(() => lookups.delete(canonical));
      }
    }
    return found;
  }

  compiledStored(key: string, build: () => CompiledProfile): CompiledProfile {
    const known = this.storedCompiled.get(key);
    if (known instanceof ProfileError) throw known;
    if (known) return known;
    try {
      const compiled = build();
      this.remember(key, compiled);
      return compiled;
    } catch (err) {
      if (err instanceof ProfileError) this.remember(key, err);
      throw err;
    }
  }

  private remember(key: string, value: CompiledProfile | ProfileError): void {
    if (this.storedCompiled.size >= MAX_STORED)
      this.storedCompiled.delete(this.storedCompiled.keys().next().value as string);
    this.storedCompiled.set(key, value);
  }
}

/** What a profile url resolves to in a session: a compiled profile, a profile that cannot be used, or nothing. */
export type Resolved = CompiledProfile | ProfileError | undefined;

export class ProfileSession {
  private readonly loaded = new Map<string, Resolved>();

  /** @param project whose stored profiles this session sees; none for a session of bundled definitions only */
  constructor(
    readonly library: ProfileLibrary,
    readonly project: string | undefined,
  ) {}

  base(type: string): CompiledProfile | undefined {
    return this.library.base(type);
  }

  /** Synchronous: bundled ones, and stored ones this session has loaded; 'unloaded' for the rest. */
  profile(canonical: string): Resolved | 'unloaded' {
    if (this.library.isBundled(canonical)) return this.library.bundledProfile(canonical);
    if (this.loaded.has(canonical)) return this.loaded.get(canonical);
    return 'unloaded';
  }

  /** Loads stored profiles (and the stored profiles they use, and the bases of differential-only ones). */
  async load(canonicals: Iterable<string>): Promise<void> {
    for (const canonical of canonicals) await this.loadOne(canonical, []);
  }

  private async loadOne(canonical: string, chain: string[]): Promise<Resolved> {
    if (this.library.isBundled(canonical)) return this.library.bundledProfile(canonical);
    if (this.loaded.has(canonical)) return this.loaded.get(canonical);
    const record = await this.library.findStored(canonical, this.project);
    if (!record) {
      this.loaded.set(canonical, undefined);
      return undefined;
    }
    let resolved: Resolved;
    try {
      const { definition, key } = await this.withSnapshot(record, [...chain, canonical]);
      resolved = this.library.compiledStored(key, () => {
        const sd = definition();
        // Its base first, so that the invariants it repeats from there are known as the bundled ones.
        if (sd.type) this.library.base(sd.type);
        return compileProfile(sd, { stored: true });
      });
    } catch (err) {
      if (!(err instanceof ProfileError)) throw err;
      resolved = err;
    }
    this.loaded.set(canonical, resolved);
    if (resolved && !(resolved instanceof ProfileError)) {
      for (const url of profilesUsedBy(resolved)) if (!this.library.isBundled(url)) await this.loadOne(url, []);
    }
    return resolved;
  }

  /**
   * The definition with a snapshot (generated, when first needed, for a differential-only one), and
   * a key naming every stored version it is built from: a changed base makes a new snapshot too.
   */
  private async withSnapshot(
    record: StoredDefinition,
    chain: string[],
  ): Promise<{ definition: () => StructureDefinition; key: string }> {
    const definition = record.definition;
    const own = `${definition.url}|${definition.version ?? ''}|${record.stamp}`;
    if (definition.snapshot?.element?.length) return { definition: () => definition, key: own };
    const url = definition.url ?? '(no url)';
    const baseUrl = definition.baseDefinition;
    if (!baseUrl) throw new ProfileError(url, 'it has neither a snapshot nor a base definition to build one from');
    if (chain.includes(baseUrl))
      throw new ProfileError(url, `its base definitions form a cycle (${[...chain, baseUrl].join(' -> ')})`);
    let base: (() => StructureDefinition | undefined) | undefined;
    let baseKey = baseUrl;
    if (this.library.isBundled(baseUrl)) {
      base = () => this.library.bundled.get(baseUrl);
    } else {
      const stored = await this.library.findStored(baseUrl, this.project);
      if (stored) {
        const built = await this.withSnapshot(stored, [...chain, baseUrl]);
        base = built.definition;
        baseKey = built.key;
      }
    }
    if (!base) throw new ProfileError(url, `its base definition '${baseUrl}' is not known`);
    const readBase = base;
    let generated: StructureDefinition | undefined;
    const build = (): StructureDefinition => {
      if (generated) return generated;
      const baseDefinition = readBase();
      if (!baseDefinition) throw new ProfileError(url, `its base definition '${baseUrl}' is not known`);
      const element = generateSnapshot(definition, baseDefinition, {
        typeDefinition: (type) =>
          this.library.bundled.get(CORE_PREFIX + type) ?? this.library.bundled.get(MEDPLUM_DEFINITION_PREFIX + type),
      });
      generated = { ...definition, snapshot: { element } };
      return generated;
    };
    return { definition: build, key: `${own}<${baseKey}` };
  }
}

/** The profiles a compiled profile's elements name for their types (extensions, constrained types). */
function profilesUsedBy(profile: CompiledProfile): Set<string> {
  const urls = new Set<string>();
  for (const node of profile.byId.values()) for (const t of node.types) for (const p of t.profiles) urls.add(p);
  return urls;
}
