import type { Coding } from 'fhir/r4';
import type { Designation } from '../providers/provider';
import { Language, type LanguageList, type MatchDepth } from '../languages';

/**
 * The designations a concept has (display first), with the language rules for choosing a
 * display and for checking one a client sent.
 */

const DISPLAY_USE = { system: 'http://terminology.hl7.org/CodeSystem/hl7TermMaintInfra', code: 'preferredForLanguage' };
const SNOMED = 'http://snomed.info/sct';

export type DisplayDifference = 'none' | 'case' | 'normalized';

interface Entry {
  language?: Language;
  use?: Coding;
  value: string;
  status: string;
}

export class DisplayList {
  private readonly entries: Entry[] = [];
  /** The code system's language; a designation without one is in it. */
  baseLanguage?: Language;

  /** A concept's designations, in a code system whose own language (CodeSystem.language) is `language`. */
  static of(designations: Designation[], language: string | undefined): DisplayList {
    const list = new DisplayList();
    list.baseLanguage = language ? new Language(language) : undefined;
    list.add(designations);
    return list;
  }

  add(designations: Designation[]): void {
    for (const d of designations) {
      if (!d.value) continue;
      this.entries.push({
        language: d.language ? new Language(d.language) : undefined,
        use: d.use,
        value: d.value,
        status: d.status,
      });
    }
  }

  /** A ValueSet include concept's own display, in the value set's language. */
  addIncludeDisplay(display: string, language: string | undefined): void {
    this.entries.push({
      language: language ? new Language(language) : undefined,
      use: DISPLAY_USE,
      value: display.trim(),
      status: 'active',
    });
  }

  get count(): number {
    return this.entries.length;
  }

  hasDisplay(
    langs: LanguageList | undefined,
    defLang: Language | undefined,
    value: string,
    activeOnly: boolean,
  ): { found: boolean; difference: DisplayDifference } {
    const candidates = this.entries.filter(
      (e) => this.langsMatch(langs, e.language, 'language', defLang) && (!activeOnly || isActive(e)),
    );
    if (candidates.some((e) => e.value.toLowerCase() === value.toLowerCase()))
      return { found: true, difference: 'none' };
    if (candidates.some((e) => normalize(e.value) === normalize(value)))
      return { found: false, difference: 'normalized' };
    return { found: false, difference: 'none' };
  }

  /** How many displays the wanted languages have, trying the closest match depth first. */
  displayCount(langs: LanguageList | undefined, defLang: Language | undefined, displayOnly: boolean): number {
    for (const depth of ['full', 'region', 'language'] as MatchDepth[]) {
      const n = this.entries.filter(
        (e) => (!displayOnly || isDisplay(e)) && this.langsMatch(langs, e.language, depth, defLang),
      ).length;
      if (n > 0) return n;
    }
    return 0;
  }

  /** `'Display 1' (en) or 'Anzeige 1' (de)`: the valid displays, for a message. */
  present(langs: LanguageList | undefined, displayOnly: boolean): string {
    let chosen = this.entries.filter(
      (e) => (!displayOnly || isDisplay(e)) && this.langsMatch(langs, e.language, 'language', undefined),
    );
    if (chosen.length === 0) chosen = this.entries.filter((e) => !displayOnly || isDisplay(e));
    return joinWithOr(chosen.map((e) => (e.language ? `'${e.value}' (${e.language.code})` : `'${e.value}'`)));
  }

  /** The displays of active designations, for the inactive-display message. */
  allowedDisplays(): string[] {
    const seen: string[] = [];
    for (const e of this.entries) if (isActive(e) && isDisplay(e) && !seen.includes(e.value)) seen.push(e.value);
    return seen;
  }

  statusOf(value: string): string {
    return this.entries.find((e) => e.value === value)?.status ?? '';
  }

  /** The display to report for these languages (or the code system's own, with none). */
  preferredDisplay(langs: LanguageList | undefined): string | undefined {
    const wanted = langs?.entries.filter((e) => e.quality > 0) ?? [];
    if (wanted.length === 0) {
      const pick =
        this.entries.find((e) => isPreferred(e) && isActive(e)) ??
        this.entries.find((e) => isDisplay(e) && isActive(e)) ??
        this.entries.find((e) => isDisplay(e)) ??
        this.entries.find((e) => isPreferred(e)) ??
        this.entries[0];
      return pick?.value;
    }
    for (const { language } of wanted) {
      for (const activeOnly of [true, false]) {
        for (const depth of ['full', 'region', 'language'] as MatchDepth[]) {
          const ok = (e: Entry) => this.langMatches(language, e.language, depth) && (!activeOnly || isActive(e));
          const pick =
            this.entries.find((e) => ok(e) && isPreferred(e)) ??
            this.entries.find((e) => ok(e) && isDisplay(e)) ??
            this.entries.find(ok);
          if (pick) return pick.value;
        }
      }
    }
    return this.entries.find((e) => !e.language && isDisplay(e))?.value;
  }

  private langMatches(wanted: Language, stated: Language | undefined, depth: MatchDepth): boolean {
    const actual = stated ?? this.baseLanguage;
    if (wanted.language === '*') return true;
    return actual !== undefined && wanted.matches(actual, depth);
  }

  private langsMatch(
    langs: LanguageList | undefined,
    stated: Language | undefined,
    depth: MatchDepth,
    defLang: Language | undefined,
  ): boolean {
    if (defLang && stated && stated.matches(defLang)) return true;
    if (!stated || !langs || langs.isEmpty) return true;
    return langs.entries.some((e) => e.quality > 0 && this.langMatches(e.language, stated, depth));
  }
}

function isDisplay(e: Entry): boolean {
  if (!e.use) return true;
  return (
    (e.use.system === DISPLAY_USE.system && e.use.code === DISPLAY_USE.code) ||
    (e.use.system === SNOMED && e.use.code === '900000000000548007')
  );
}

function isPreferred(e: Entry): boolean {
  return isDisplay(e) || (e.use?.system === SNOMED && e.use.code === '900000000000013009');
}

function isActive(e: Entry): boolean {
  return e.status !== 'withdrawn' && e.status !== 'inactive' && e.status !== 'deprecated' && e.status !== 'retired';
}

function normalize(text: string): string {
  return text.replace(/\s+/g, ' ').trim().toLowerCase();
}

export function joinWithOr(items: string[]): string {
  if (items.length <= 1) return items.join('');
  if (items.length === 2) return `${items[0]} or ${items[1]}`;
  return `${items.slice(0, -1).join(', ')} or ${items[items.length - 1]}`;
}
