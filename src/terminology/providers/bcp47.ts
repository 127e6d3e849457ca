import { createRequire } from 'node:module';
import type { BuiltInTerminology } from './registry';
import { BuiltInProvider, describe, type BuiltInConcept } from './base';

/**
 * BCP-47 language tags (`urn:ietf:bcp:47`), checked against the IANA Language Subtag Registry
 * (npm language-subtag-registry, CC0): every subtag must be registered for its place (language,
 * extlang, script, region, variant), written in the case the registry's conventions give it
 * (`en-US`, not `en-us`: the ecosystem treats tags as case-sensitive). Extensions and private use
 * are checked for shape only. The display is built from the registry's English descriptions:
 * `English (United States)`. A grammar, so nothing to enumerate unless a value set of languages
 * stands in for all of them (`http://terminology.hl7.org/ValueSet/Languages`, when it is known).
 */

export const BCP_47 = 'urn:ietf:bcp:47';

interface RegistryRecord {
  Type: string;
  Subtag?: string;
  Tag?: string;
  Description: string[];
}

type SubtagType = 'language' | 'extlang' | 'script' | 'region' | 'variant';

class Registry {
  private readonly byType = new Map<string, Map<string, string>>();
  private readonly tags = new Map<string, string>();

  constructor(records: RegistryRecord[]) {
    for (const r of records) {
      if (r.Tag) this.tags.set(r.Tag, r.Description[0]);
      if (!r.Subtag || r.Subtag.includes('..')) continue;
      let table = this.byType.get(r.Type);
      if (!table) this.byType.set(r.Type, (table = new Map()));
      table.set(r.Subtag, r.Description[0]);
    }
  }

  describe(type: SubtagType, subtag: string): string | undefined {
    return this.byType.get(type)?.get(subtag);
  }

  /** A whole tag the registry lists (grandfathered and redundant tags). */
  tag(tag: string): string | undefined {
    return this.tags.get(tag);
  }
}

interface ParsedTag {
  language: string;
  extlang: string[];
  script?: string;
  region?: string;
  variants: string[];
}

/** Splits a tag by RFC 5646's grammar, with the registry's case conventions; undefined when it breaks them. */
function parse(tag: string): ParsedTag | undefined {
  const parts = tag.split('-');
  let i = 0;
  const language = parts[i++];
  if (!/^[a-z]{2,3}$|^[a-z]{5,8}$/.test(language)) return undefined;
  const parsed: ParsedTag = { language, extlang: [], variants: [] };
  while (i < parts.length && parsed.extlang.length < 3 && language.length <= 3 && /^[a-z]{3}$/.test(parts[i]))
    parsed.extlang.push(parts[i++]);
  if (i < parts.length && /^[A-Z][a-z]{3}$/.test(parts[i])) parsed.script = parts[i++];
  if (i < parts.length && /^[A-Z]{2}$|^\d{3}$/.test(parts[i])) parsed.region = parts[i++];
  while (i < parts.length && /^[a-z0-9]{5,8}$|^\d[a-z0-9]{3}$/.test(parts[i])) parsed.variants.push(parts[i++]);
  // Extensions (a singleton and 2-8 character subtags) and private use (x-...), by shape only.
  while (i < parts.length) {
    const singleton = parts[i++];
    if (!/^[a-wyz0-9]$|^x$/.test(singleton)) return undefined;
    const min = singleton === 'x' ? 1 : 2;
    let count = 0;
    while (
      i < parts.length &&
      new RegExp(`^[a-z0-9]{${min},8}$`).test(parts[i]) &&
      (singleton === 'x' || parts[i].length > 1)
    ) {
      i++;
      count++;
    }
    if (count === 0) return undefined;
    if (singleton === 'x') break;
  }
  return i === parts.length ? parsed : undefined;
}

class LanguageTagProvider extends BuiltInProvider {
  readonly enumerable = false;
  override readonly expansionBasis = 'http://terminology.hl7.org/ValueSet/Languages';
  private registry?: Registry;
  private readonly found = new Map<string, BuiltInConcept | null>();

  /** The registry is read on first use (1 MB of JSON): most requests never need it. */
  private get subtags(): Registry {
    if (!this.registry) {
      const require = createRequire(import.meta.url);
      this.registry = new Registry(require('language-subtag-registry/data/json/registry.json') as RegistryRecord[]);
    }
    return this.registry;
  }

  locate(code: string): BuiltInConcept | undefined {
    let concept = this.found.get(code);
    if (concept === undefined) {
      concept = this.read(code) ?? null;
      if (this.found.size > 10_000) this.found.clear();
      this.found.set(code, concept);
    }
    return concept ?? undefined;
  }

  private read(code: string): BuiltInConcept | undefined {
    const whole = this.subtags.tag(code);
    if (whole) return { code, display: whole };
    if (code.startsWith('x-')) return parse(`und-${code}`) ? { code, display: code } : undefined;
    const tag = parse(code);
    if (!tag) return undefined;
    const language = this.subtags.describe('language', tag.language);
    if (!language) return undefined;
    const details: string[] = [];
    const regionOnly: string[] = [];
    for (const e of tag.extlang) if (!this.subtags.describe('extlang', e)) return undefined;
    if (tag.script) {
      const script = this.subtags.describe('script', tag.script);
      if (!script) return undefined;
      details.push(script);
    }
    if (tag.region) {
      const region = this.subtags.describe('region', tag.region);
      if (!region) return undefined;
      details.push(region);
      regionOnly.push(region);
    }
    for (const v of tag.variants) {
      const variant = this.subtags.describe('variant', v);
      if (!variant) return undefined;
      details.push(variant);
    }
    const display = details.length > 0 ? `${language} (${details.join(', ')})` : language;
    // The ecosystem's other spellings of a language-region tag are valid displays too.
    const alternates = regionOnly.length === 1 && details.length === 1 ? [`${language} (Region=${regionOnly[0]})`] : [];
    return { code, display, alternates };
  }
}

export const bcp47: BuiltInTerminology = {
  resource: describe({ url: BCP_47, name: 'IETFLanguageCodes', title: 'IETF language tags (BCP 47)' }),
  create() {
    return new LanguageTagProvider(this.resource);
  },
};
