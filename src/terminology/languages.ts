/**
 * Language tags (BCP 47, as FHIR uses them) and preference lists (displayLanguage,
 * Accept-Language), with the matching depths display selection and checking need.
 */

const parsedTags = new Map<string, Language>();

export type MatchDepth = 'language' | 'region' | 'full';

export class Language {
  /**
   * The tag, parsed once: the engine asks for a code system's language on every check. Languages
   * are never changed once made; the cache is bounded as tags can come from requests.
   */
  static of(code: string): Language {
    let language = parsedTags.get(code);
    if (!language) {
      if (parsedTags.size >= 1000) parsedTags.clear();
      language = new Language(code);
      parsedTags.set(code, language);
    }
    return language;
  }

  readonly code: string;
  readonly language: string;
  readonly region?: string;

  constructor(code: string) {
    this.code = code;
    const parts = code.split('-');
    this.language = parts[0].toLowerCase();
    // The region is the first 2-letter or 3-digit subtag after the language (skipping a script).
    this.region = parts
      .slice(1)
      .find((p) => /^[A-Za-z]{2}$|^\d{3}$/.test(p))
      ?.toUpperCase();
  }

  /** Whether this tag names `other` at the given depth ('de' matches 'de-CH' at language depth). */
  matches(other: Language, depth: MatchDepth = 'language'): boolean {
    if (this.language === '*' || other.language === '*') return true;
    if (this.language !== other.language) return false;
    if (depth === 'language') return true;
    if (depth === 'region') return this.region === undefined || this.region === other.region;
    return this.code.toLowerCase() === other.code.toLowerCase();
  }
}

const TAG = /^([A-Za-z]{2,3}|\*)(-[A-Za-z0-9]{1,8})*$/;

export function isLanguageTag(text: string): boolean {
  return TAG.test(text);
}

/** A preference list, highest quality first; entries with q=0 are kept but never match. */
export class LanguageList {
  constructor(
    readonly entries: { language: Language; quality: number }[],
    /** The text this list was read from, for echoing it back. */
    readonly source = '',
  ) {}

  static empty(): LanguageList {
    return new LanguageList([]);
  }

  /**
   * Parses `de, en-AU;q=0.4`. Throws on a malformed entry; a server validating codes must not
   * silently check against a language nobody asked for.
   */
  static parse(text: string | undefined): LanguageList {
    if (text === undefined || text.trim() === '') return LanguageList.empty();
    const entries = text.split(',').map((part) => {
      const [tag, ...params] = part
        .trim()
        .split(';')
        .map((s) => s.trim());
      if (!isLanguageTag(tag)) throw new InvalidLanguageError(text);
      let quality = 1;
      for (const p of params) {
        const m = /^q=([0-9.]+)$/.exec(p);
        if (m) quality = Number(m[1]);
      }
      return { language: new Language(tag), quality };
    });
    entries.sort((a, b) => b.quality - a.quality);
    return new LanguageList(entries, text.trim());
  }

  get isEmpty(): boolean {
    return this.entries.length === 0;
  }

  /** The usable languages, most preferred first. */
  get languages(): Language[] {
    return this.entries.filter((e) => e.quality > 0).map((e) => e.language);
  }

  /** `*;q=0`: no language other than those listed is acceptable, not even as a fallback. */
  get refusesOthers(): boolean {
    return this.entries.some((e) => e.language.code === '*' && e.quality === 0);
  }

  /** Whether any wanted language matches `stated` at `depth`. */
  accepts(stated: Language, depth: MatchDepth): boolean {
    return this.languages.some((wanted) => wanted.matches(stated, depth));
  }

  /** English or nothing: the case where a code system's own displays are what is wanted. */
  get isEnglishOrNothing(): boolean {
    const langs = this.languages;
    return langs.length === 0 || langs.every((l) => l.language === 'en');
  }

  /** For messages: `de,it`, or `--` when no language was asked for. */
  summary(): string {
    const codes = this.entries.map((e) => e.language.code);
    return codes.length === 0 ? '--' : codes.join(',');
  }
}

/**
 * A language preference list as an expansion echoes it: as written, unless it carries weights,
 * which are then written the way HTTP lists them (`de, *; q=0`), so the same preference always
 * reads the same whatever spacing the request used.
 */
export function echoLanguages(text: string): string {
  const trimmed = text.trim();
  if (!trimmed.includes(';')) return trimmed;
  return trimmed
    .split(',')
    .map((part) =>
      part
        .split(';')
        .map((s) => s.trim())
        .filter((s) => s !== '')
        .join('; '),
    )
    .join(', ');
}

export class InvalidLanguageError extends Error {
  constructor(readonly text: string) {
    super(`Invalid language '${text}'`);
  }
}
