import type { Extension, ValueSetCompose } from 'fhir/r4';
import { TerminologyError, txIssue } from './issues';
import { InvalidLanguageError, LanguageList } from './languages';

/**
 * The parameters that steer terminology operations (the tx "expansion profile"): version
 * rules, language preferences, and the switches of $validate-code and $expand. Built from an
 * operation's input; a value set's own expansion-parameter extensions fill what the request
 * left unset.
 */

export type VersionRuleMode = 'default' | 'override' | 'check';

export interface VersionRule {
  system: string;
  version: string;
  mode: VersionRuleMode;
  /** Rule about a value set (default-valueset-version) rather than a code system. */
  valueSet: boolean;
}

export interface TxParamsInput {
  'system-version'?: string[];
  'check-system-version'?: string[];
  'force-system-version'?: string[];
  'default-valueset-version'?: string[];
  displayLanguage?: string;
  activeOnly?: boolean;
  abstract?: boolean;
  inferSystem?: boolean;
  'lenient-display-validation'?: boolean;
  'valueset-membership-only'?: boolean;
  'default-to-latest-version'?: boolean;
  useSupplement?: string[];
}

export class TxParams {
  readonly versionRules: VersionRule[] = [];
  activeOnly = false;
  /** Abstract codes are acceptable unless the request says abstract=false. */
  abstractOk = true;
  inferSystem = false;
  /** lenient-display-validation: a wrong display is a warning, not an error. */
  displayWarning = false;
  membershipOnly = false;
  defaultToLatest = false;
  displayLanguages?: LanguageList;
  httpLanguages?: LanguageList;
  readonly supplements = new Set<string>();
  /** Version rules that decided a version somewhere in this request (echoed by $expand). */
  readonly usedRules = new Set<VersionRule>();
  /** versionsMatch: one code in several versions of a system counts once. */
  versionsMatch = false;
  /** Names set by the request itself, which a value set's own parameters must not override. */
  private readonly explicit = new Set<string>();

  static from(input: TxParamsInput, acceptLanguage?: string): TxParams {
    const params = new TxParams();
    if (acceptLanguage) {
      try {
        params.httpLanguages = LanguageList.parse(acceptLanguage);
      } catch {
        // A malformed Accept-Language is ignored, as HTTP asks.
      }
    }
    for (const v of input['system-version'] ?? []) params.addRule(v, 'default', false);
    for (const v of input['force-system-version'] ?? []) params.addRule(v, 'override', false);
    for (const v of input['check-system-version'] ?? []) params.addRule(v, 'check', false);
    for (const v of input['default-valueset-version'] ?? []) params.addRule(v, 'default', true);
    for (const v of input.useSupplement ?? []) params.supplements.add(v);
    if (input.displayLanguage !== undefined) params.setDisplayLanguage(input.displayLanguage, true);
    const flags: [keyof TxParamsInput, (p: TxParams, v: boolean) => void][] = [
      ['activeOnly', (p, v) => (p.activeOnly = v)],
      ['abstract', (p, v) => (p.abstractOk = v)],
      ['inferSystem', (p, v) => (p.inferSystem = v)],
      ['lenient-display-validation', (p, v) => (p.displayWarning = v)],
      ['valueset-membership-only', (p, v) => (p.membershipOnly = v)],
      ['default-to-latest-version', (p, v) => (p.defaultToLatest = v)],
    ];
    for (const [name, set] of flags) {
      const value = input[name];
      if (typeof value === 'boolean') {
        set(params, value);
        params.explicit.add(name);
      }
    }
    return params;
  }

  private addRule(canonical: string, mode: VersionRuleMode, valueSet: boolean): void {
    const bar = canonical.indexOf('|');
    if (bar <= 0 || bar === canonical.length - 1) return;
    this.versionRules.push({ system: canonical.slice(0, bar), version: canonical.slice(bar + 1), mode, valueSet });
  }

  private setDisplayLanguage(text: string, explicit: boolean): void {
    if (!explicit && this.explicit.has('displayLanguage')) return;
    try {
      this.displayLanguages = LanguageList.parse(text);
    } catch (err) {
      if (!(err instanceof InvalidLanguageError)) throw err;
      throw new TerminologyError(txIssue('INVALID_DISPLAY_NAME', [text]), 400);
    }
    if (explicit) this.explicit.add('displayLanguage');
  }

  /**
   * A value set's compose may carry expansion parameters (valueset-expansion-parameter
   * extensions); they apply where the request did not say otherwise. Its language stands in
   * for a missing Accept-Language.
   */
  applyValueSetDefaults(compose: ValueSetCompose | undefined, language: string | undefined): void {
    for (const ext of compose?.extension ?? []) {
      if (!ext.url.endsWith('/valueset-expansion-parameter')) continue;
      const name = subValue(ext, 'name');
      const value = subValue(ext, 'value');
      if (name === undefined || value === undefined) continue;
      if (name === 'displayLanguage') this.setDisplayLanguage(String(value), false);
      else if (name === 'activeOnly' && !this.explicit.has('activeOnly'))
        this.activeOnly = value === true || value === 'true';
      else if (name === 'versionsMatch') {
        this.versionsMatch = value === true || value === 'true';
        this.explicit.add('versionsMatch');
      }
    }
    if ((!this.httpLanguages || this.httpLanguages.isEmpty) && language) {
      try {
        this.httpLanguages = LanguageList.parse(language);
      } catch {
        // an invalid ValueSet.language is not the client's problem
      }
    }
  }

  /** Whether versionsMatch was stated (either way), so it must not be inferred. */
  get versionsMatchGiven(): boolean {
    return this.explicit.has('versionsMatch');
  }

  /** Whether the request said activeOnly (either way), which $expand echoes. */
  get activeOnlyGiven(): boolean {
    return this.explicit.has('activeOnly');
  }

  /** displayLanguage when given, else Accept-Language. */
  workingLanguages(): LanguageList | undefined {
    if (this.displayLanguages && !this.displayLanguages.isEmpty) return this.displayLanguages;
    return this.httpLanguages;
  }

  langSummary(): string {
    return this.workingLanguages()?.summary() ?? '--';
  }

  rulesFor(system: string, valueSet = false): VersionRule[] {
    return this.versionRules.filter((r) => r.system === system && r.valueSet === valueSet);
  }

  /**
   * The version to use for a system, given the version a value set or coding states:
   * force-system-version wins; system-version fills in a missing version; a check rule names
   * the version only when nothing else did.
   */
  versionFor(system: string, stated: string | undefined, valueSet = false): string | undefined {
    const rules = this.rulesFor(system, valueSet);
    const override = rules.find((r) => r.mode === 'override');
    if (override) {
      if (override.version !== stated) this.usedRules.add(override);
      return override.version;
    }
    if (stated) return stated;
    const fallback = rules.find((r) => r.mode === 'default') ?? rules.find((r) => r.mode === 'check');
    if (fallback) this.usedRules.add(fallback);
    return fallback?.version;
  }

  /** A fingerprint of everything that changes a compiled value set or a cached answer. */
  fingerprint(): string {
    return JSON.stringify([
      this.versionRules,
      this.activeOnly,
      this.abstractOk,
      this.inferSystem,
      this.displayWarning,
      this.membershipOnly,
      this.defaultToLatest,
      this.workingLanguages()?.summary(),
      [...this.supplements],
    ]);
  }
}

function subValue(ext: Extension, url: string): string | boolean | undefined {
  const sub = ext.extension?.find((e) => e.url === url);
  if (!sub) return undefined;
  return sub.valueCode ?? sub.valueString ?? sub.valueBoolean ?? sub.valueUri;
}
