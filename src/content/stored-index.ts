import type { CodeSystem, ConceptMap } from 'fhir/r4';
import {
  languagePackTarget,
  type CanonicalSource,
  type TerminologyResource,
  type TerminologyType,
} from '../terminology/service';
import { topLevelMembers } from './top-level-json';

/**
 * The stored CodeSystems, ValueSets and ConceptMaps, found by canonical URL like any other
 * source, but held as the JSON text the store gave until one is first used: a server over an
 * imported IG (THO: 3,400 resources, 23 MB of JSON) reads only what it needs to look them up
 * (url, implicit value set, language-pack target) at its first terminology request, and parses a
 * resource's content once, when a request reaches it. Parsed content is kept, without its
 * narrative (nothing in the engine reads it), so each resource is one stable object.
 */
export class StoredIndex implements CanonicalSource {
  private readonly byId = new Map<string, Held>();
  private readonly byKey = new Map<string, Held[]>();
  private readonly byImplicitValueSet = new Map<string, Held>();
  private readonly maps = new Set<Held>();
  private readonly packs = new Map<string, Held[]>();

  /** Holds the stored JSON of `type/id`, replacing what was held under that id. */
  putJson(type: TerminologyType, id: string, json: string): void {
    let members: Record<string, unknown>;
    try {
      members = topLevelMembers(json, LOOKUP_MEMBERS);
    } catch {
      // Stored content is always JSON the server wrote; should that ever not hold, parse it whole.
      members = JSON.parse(json) as Record<string, unknown>;
    }
    this.put(new Held(type, id, lookupOf({ ...members, resourceType: type } as TerminologyResource), json));
  }

  /** Holds a resource already parsed (one this process wrote), replacing what was held under its id. */
  putResource(resource: TerminologyResource & { id: string }): void {
    this.put(new Held(resource.resourceType, resource.id, lookupOf(resource), undefined, resource));
  }

  removeById(type: TerminologyType, id: string): void {
    const held = this.byId.get(`${type}/${id}`);
    if (!held) return;
    this.byId.delete(`${type}/${id}`);
    const { url, implicitValueSet, packFor } = held.lookup;
    if (held.type === 'ConceptMap') this.maps.delete(held);
    if (packFor) this.packs.set(packFor, without(this.packs.get(packFor), held));
    if (implicitValueSet && this.byImplicitValueSet.get(implicitValueSet) === held)
      this.byImplicitValueSet.delete(implicitValueSet);
    if (url) {
      const key = `${held.type}|${url}`;
      const rest = without(this.byKey.get(key), held);
      if (rest.length === 0) this.byKey.delete(key);
      else this.byKey.set(key, rest);
    }
  }

  all<T extends TerminologyResource>(type: T['resourceType'], url: string): T[] {
    return (this.byKey.get(`${type}|${url}`) ?? []).map((held) => held.resource() as T);
  }

  codeSystemForValueSet(url: string): CodeSystem | undefined {
    return this.byImplicitValueSet.get(url)?.resource() as CodeSystem | undefined;
  }

  *urls(type: TerminologyType): Iterable<string> {
    const prefix = `${type}|`;
    for (const key of this.byKey.keys()) if (key.startsWith(prefix)) yield key.slice(prefix.length);
  }

  *conceptMaps(): Iterable<ConceptMap> {
    for (const held of this.maps) yield held.resource() as ConceptMap;
  }

  languagePacks(url: string): CodeSystem[] {
    return (this.packs.get(url) ?? []).map((held) => held.resource() as CodeSystem);
  }

  private put(held: Held): void {
    this.removeById(held.type, held.id);
    this.byId.set(`${held.type}/${held.id}`, held);
    const { url, implicitValueSet, packFor } = held.lookup;
    if (held.type === 'ConceptMap') this.maps.add(held);
    if (packFor) this.packs.set(packFor, [...(this.packs.get(packFor) ?? []), held]);
    if (!url) return;
    if (implicitValueSet) this.byImplicitValueSet.set(implicitValueSet, held);
    const key = `${held.type}|${url}`;
    this.byKey.set(key, [...(this.byKey.get(key) ?? []), held]);
  }
}

/** The top-level members a resource is looked up by (and that decide whether it is a language pack). */
const LOOKUP_MEMBERS: ReadonlySet<string> = new Set(['url', 'valueSet', 'content', 'supplements', 'extension']);

interface Lookup {
  url?: string;
  /** A CodeSystem's `valueSet`: the canonical of its implicit all-codes value set. */
  implicitValueSet?: string;
  /** The code system a language pack supplements. */
  packFor?: string;
}

function lookupOf(resource: TerminologyResource): Lookup {
  return {
    url: typeof resource.url === 'string' ? resource.url : undefined,
    implicitValueSet:
      resource.resourceType === 'CodeSystem' && typeof resource.valueSet === 'string' ? resource.valueSet : undefined,
    packFor: languagePackTarget(resource),
  };
}

/** One stored resource: its JSON until first used, then the parsed object (the JSON let go). */
class Held {
  constructor(
    readonly type: TerminologyType,
    readonly id: string,
    readonly lookup: Lookup,
    private json?: string,
    private parsed?: TerminologyResource,
  ) {}

  resource(): TerminologyResource {
    if (!this.parsed) {
      // A copy without the narrative rather than `delete`, which would leave the object slow to read.
      const { text: _narrative, ...content } = JSON.parse(this.json as string) as TerminologyResource & {
        text?: unknown;
      };
      this.parsed = content as TerminologyResource;
      this.json = undefined;
    }
    return this.parsed;
  }
}

function without(list: Held[] | undefined, held: Held): Held[] {
  return (list ?? []).filter((h) => h !== held);
}
