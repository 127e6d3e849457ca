import type { CodeSystem, ValueSet, ValueSetComposeInclude, ValueSetExpansionContains } from 'fhir/r4';
import type { CodeSystemProvider } from '../providers/provider';
import { filterOp, MAX_IMPORT_DEPTH, pinImport, resolveImport } from '../compose';
import { addToPath, TerminologyError, txIssue } from '../issues';
import { Language } from '../languages';
import { message } from '../messages';
import { compareVersions, presentVersions, versionMatches } from '../versions';
import { checkConceptSet } from './concept-set';
import { checkCodeSystemStatus, checkResourceStatus } from './status';
import { canonicalOf, type CodingQuery, type CodingState, type Membership, type ValidationEnv } from './state';

/** Where a checker sits among the value sets one request prepares. */
interface CheckerNesting {
  /** Canonicals of the value sets that led here, to refuse circular imports. */
  chain: string[];
  /** The value sets this request has prepared, each once. */
  prepared: Map<ValueSet, ValueSetChecker>;
}

/**
 * Membership of one code in one value set, with the diagnostics the HL7 terminology ecosystem
 * expects. `prepare()` resolves what the value set depends on once (imports, code systems,
 * filters); `check()` then answers per code without enumerating the value set.
 */
export class ValueSetChecker {
  private readonly imports = new Map<string, ValueSetChecker>();
  /** Answers given while checking one coding: an import reached twice is asked once. */
  private readonly answers = new WeakMap<CodingState, Map<string, Membership>>();
  private readonly chain: string[];
  private readonly prepared: Map<ValueSet, ValueSetChecker>;

  constructor(
    readonly env: ValidationEnv,
    readonly valueSet: ValueSet,
    nesting: CheckerNesting = { chain: [], prepared: new Map() },
  ) {
    this.chain = nesting.chain;
    this.prepared = nesting.prepared;
  }

  /** The value set's url|version, as messages name it ('(unidentified)' for one without a url). */
  get canonical(): string {
    return this.valueSet.url ? canonicalOf(this.valueSet) : '(unidentified)';
  }

  /** Resolves imports and checks filters; throws TerminologyError for a value set that cannot be used. */
  prepare(): void {
    const key = this.canonical;
    if (this.chain.includes(key)) {
      throw new TerminologyError(txIssue('VALUESET_CIRCULAR_REFERENCE', [key, [...this.chain, key].join(', ')]), 400);
    }
    const compose = this.valueSet.compose;
    if (!compose) return;
    if (compose.lockedDate) {
      // A locked date pins every code system to its version at that date; without the history
      // to resolve that, answering anyway would be answering about other versions.
      throw new TerminologyError(txIssue('LOCKED_DATE_NOT_SUPPORTED', [key]), 400);
    }
    compose.include.forEach((include, i) => this.prepareSet(include, `include[${i}]`));
    (compose.exclude ?? []).forEach((exclude, i) => this.prepareSet(exclude, `exclude[${i}]`));
  }

  private prepareSet(set: ValueSetComposeInclude, where: string): void {
    this.env.checkBudget();
    for (const url of set.valueSet ?? []) {
      const pinned = this.pinValueSet(url);
      if (this.imports.has(pinned)) continue;
      const other = this.resolveImport(pinned);
      if (!other) throw new TerminologyError(txIssue('Unable_to_resolve_value_Set_', [pinned]));
      // A value set prepared before in this request cannot lead back here (its preparation would have found the cycle).
      let checker = this.prepared.get(other);
      if (!checker) {
        if (this.chain.length >= MAX_IMPORT_DEPTH) {
          throw new TerminologyError(txIssue('VALUESET_IMPORTS_TOO_DEEP', [this.canonical, MAX_IMPORT_DEPTH]), 422);
        }
        checker = new ValueSetChecker(this.env, other, {
          chain: [...this.chain, this.canonical],
          prepared: this.prepared,
        });
        checker.prepare();
        this.prepared.set(other, checker);
      }
      this.imports.set(pinned, checker);
    }
    if (!set.system) return;
    const version = this.env.params.versionFor(set.system, set.version);
    const cs = this.env.resolver.codeSystem(set.system, version);
    if (!cs) return;
    this.providerFor(cs);
    (set.filter ?? []).forEach((filter, i) => {
      if (filter.value === undefined || filter.value === '') {
        throw new TerminologyError(
          txIssue('UNABLE_TO_HANDLE_SYSTEM_FILTER_WITH_NO_VALUE', [cs.url, filter.property, filterOp(filter)], {
            path: `ValueSet.compose.${where}.filter[${i}]`,
          }),
          400,
        );
      }
    });
  }

  private resolveImport(pinned: string): ValueSet | undefined {
    return resolveImport(this.valueSet, this.env.resolver, pinned);
  }

  private pinValueSet(url: string): string {
    return pinImport(this.env.params, url).pinned;
  }

  /** The provider for a system at a version, with the stated supplements that apply to it. */
  provider(system: string, version: string | undefined): CodeSystemProvider | undefined {
    const cs = this.env.resolver.codeSystem(system, version);
    // A code system whose content this server does not hold cannot confirm or refuse a code.
    if (!cs || cs.content === 'not-present') return undefined;
    return this.providerFor(cs);
  }

  providerFor(cs: CodeSystem): CodeSystemProvider {
    const supplements = this.env.resolver.supplementsFor(cs, this.env.requiredSupplements);
    for (const s of supplements) this.env.usedSupplements.add(s.version ? `${s.url}|${s.version}` : (s.url as string));
    const provider = this.env.resolver.provider(cs, supplements);
    for (const required of this.env.requiredSupplements)
      if (provider.hasSupplement(required)) this.env.usedSupplements.add(required);
    return provider;
  }

  /** Whether the coding asked about is in the value set (null: cannot say), its problems noted in `state`. */
  check(query: CodingQuery, state: CodingState): Membership {
    const { path, system, version, code, display } = query;
    let answers = this.answers.get(state);
    if (!answers) {
      answers = new Map();
      this.answers.set(state, answers);
    }
    const key = [path, system ?? '', version ?? '', code, display ?? ''].join('\u0000');
    const known = answers.get(key);
    if (known !== undefined) return known;
    const answer = this.checkOnce(query, state);
    answers.set(key, answer);
    return answer;
  }

  private checkOnce(query: CodingQuery, state: CodingState): Membership {
    const { params } = this.env;
    const { path, code } = query;
    let { system } = query;
    if (!system && !params.inferSystem) {
      const text = message('Coding_has_no_system__cannot_validate');
      state.messages.push(text);
      state.issues.add(txIssue('Coding_has_no_system__cannot_validate', [], { path: path || undefined }));
      return false;
    }
    if (!system) {
      const inferred = this.inferSystem(code, state);
      if (!inferred) return false;
      system = inferred;
      state.impliedSystem = inferred;
    }
    const compose = this.valueSet.compose;
    if (compose) return this.checkCompose({ ...query, system }, state);
    if (this.valueSet.expansion) return this.checkExpansion({ ...query, system }, state);
    return false;
  }

  private checkCompose(query: CodingQuery & { system: string }, state: CodingState): Membership {
    const { path, system, version, code, display } = query;
    const compose = this.valueSet.compose as NonNullable<ValueSet['compose']>;
    let result: Membership = false;
    const forSystem = compose.include.filter((inc) => inc.system === system);
    let chosenVersion: string | undefined;
    if (!version) {
      const versions = new Set(forSystem.map((inc) => inc.version).filter((v): v is string => !!v));
      if (versions.size > 1) chosenVersion = this.pickApplicableVersion(versions, system, code, display);
    }
    const includes = newestFirst(compose);
    for (const include of includes) {
      this.env.checkBudget();
      if (!include.system) {
        result = true;
      } else if (
        include.system === system &&
        (!chosenVersion || include.version === chosenVersion) &&
        this.useThisVersion(include, version)
      ) {
        const v = this.determineVersion(path, include.system, include.version, version, state);
        const cs = this.provider(system, v);
        if (!cs && this.env.params.membershipOnly && isEnumeration(include)) {
          // Membership only: a listed code is in the value set by its definition, whether or not
          // this server holds the code system's content (search's :in on LOINC lists, say).
          result = include.concept?.some((c) => c.code === code) === true;
          if (result) break;
          continue;
        }
        if (!cs) return this.unknownSystem(path, system, v, state);
        this.checkVersionRules(path, cs.url, cs.version, state);
        state.defLang = Language.of(cs.language ?? 'en');
        checkCodeSystemStatus(state, cs, this.valueSet);
        state.contentMode = cs.content;
        if (checkConceptSet(this, { path, role: 'in', cs, set: include, code, state })) {
          state.version = cs.version;
          result = true;
        } else {
          result = false;
        }
      } else {
        result = false;
      }
      for (const url of include.valueSet ?? []) {
        const checker = this.imports.get(this.pinValueSet(url));
        if (!checker) throw new Error(`value set import ${url} was not prepared`);
        checkResourceStatus(state, checker.valueSet, this.valueSet);
        if (result === true) result = checker.check(query, state);
      }
      if (result === true) break;
    }
    if (result !== true) return result;
    for (const exclude of compose.exclude ?? []) {
      let excluded: boolean;
      if (!exclude.system) {
        excluded = true;
      } else {
        const cs = this.provider(exclude.system, this.env.params.versionFor(exclude.system, exclude.version));
        excluded =
          cs !== undefined &&
          cs.url === system &&
          checkConceptSet(this, { path, role: 'not in', cs, set: exclude, code, state });
      }
      for (const url of exclude.valueSet ?? []) {
        const checker = this.imports.get(this.pinValueSet(url));
        if (!checker) continue;
        excluded = excluded && checker.check(query, state) === true;
      }
      if (excluded) return false;
    }
    return true;
  }

  private checkExpansion(query: CodingQuery & { system: string }, state: CodingState): Membership {
    const { path, system, version, code } = query;
    const entry = findInExpansion(this.valueSet.expansion?.contains ?? [], system, code);
    if (!entry) return false;
    const v = entry.version ?? version;
    const cs = this.provider(system, v);
    if (!cs) return this.unknownSystem(path, system, v, state);
    state.defLang = Language.of(cs.language ?? 'en');
    state.version = cs.version;
    state.contentMode = cs.content;
    const concept = cs.locate(code);
    if (!concept) {
      state.issues.add(
        txIssue(cs.version ? 'Unknown_Code_in_Version' : 'Unknown_Code_in', [code, cs.url, cs.version], {
          path: addToPath(path, 'code'),
        }),
      );
      return false;
    }
    state.displays.add(cs.designations(concept));
    if (!state.inactive && cs.isInactive(concept)) state.inactive = { path, code, status: cs.status(concept) };
    return true;
  }

  /** check-system-version: the version in use must match the rule's (wildcards allowed). */
  private checkVersionRules(path: string, system: string, version: string | undefined, state: CodingState): void {
    for (const rule of this.env.params.rulesFor(system)) {
      if (rule.mode !== 'check' || versionMatches(rule.version, version)) continue;
      const issue = txIssue('VALUESET_VERSION_CHECK', [system, version, rule.version], {
        path: addToPath(path, 'version'),
      });
      if (state.issues.add(issue)) state.messages.push(issue.text);
    }
  }

  /** The error for a code system (or version) that cannot be found; the answer is "cannot say". */
  private unknownSystem(path: string, system: string, version: string | undefined, state: CodingState): Membership {
    if (this.env.params.membershipOnly) return false;
    let id:
      | 'UNKNOWN_CODESYSTEM'
      | 'UNKNOWN_CODESYSTEM_VERSION'
      | 'UNKNOWN_CODESYSTEM_VERSION_NONE'
      | 'CODESYSTEM_CONTENT_NOT_PRESENT' = 'UNKNOWN_CODESYSTEM';
    let key = system;
    let args: string[] = [system];
    const contentless = this.env.resolver.codeSystem(system, version);
    if (contentless) {
      id = 'CODESYSTEM_CONTENT_NOT_PRESENT';
      args = [canonicalOf(contentless)];
    } else if (version) {
      const known = this.env.resolver.codeSystemVersions(system);
      id = known.length === 0 ? 'UNKNOWN_CODESYSTEM_VERSION_NONE' : 'UNKNOWN_CODESYSTEM_VERSION';
      key = known.length === 0 ? system : `${system}|${version}`;
      args = [system, version, presentVersions(known)];
    }
    state.messages.push(message(id, ...args));
    if (!state.unknownSystems.has(key)) {
      state.unknownSystems.add(key);
      state.issues.add(txIssue(id, args, { path: addToPath(path, 'system') }));
    }
    return null;
  }

  /**
   * The version of `system` to check against: the value set's (after version rules), or the
   * coding's when the value set leaves it open. Reports a coding version that disagrees.
   */
  private determineVersion(
    path: string,
    system: string,
    versionVS: string | undefined,
    versionCoding: string | undefined,
    state: CodingState,
  ): string | undefined {
    const { params, resolver } = this.env;
    let result = params.versionFor(system, versionVS);
    if (!versionCoding) return result;
    if (result && versionCoding !== result && versionMatches(result, versionCoding)) result = versionCoding;
    if (!result) {
      const known = resolver.codeSystemVersions(system);
      if (known.some((v) => v === versionCoding || versionMatches(versionCoding, v))) result = versionCoding;
    }
    const cs = resolver.codeSystem(system, result);
    if (cs && cs.version !== versionCoding && !versionMatches(versionCoding, cs.version)) {
      const at = { path: addToPath(path, 'version') };
      // Only a mismatch with the version the value set fixed is an error (the catalogue says which).
      const issue = !result
        ? txIssue('VALUESET_VALUE_MISMATCH_DEFAULT', [system, cs.version, versionVS, versionCoding], at)
        : result !== versionVS
          ? txIssue('VALUESET_VALUE_MISMATCH_CHANGED', [system, result, versionVS ?? '', versionCoding], at)
          : txIssue('VALUESET_VALUE_MISMATCH', [system, versionVS, versionCoding], at);
      state.issues.add(issue);
      if (issue.severity === 'error') state.messages.push(issue.text);
      if (!resolver.codeSystem(system, versionCoding)) {
        const known = resolver.codeSystemVersions(system);
        state.unknownSystems.add(`${system}|${versionCoding}`);
        const unknown = txIssue('UNKNOWN_CODESYSTEM_VERSION', [system, versionCoding, presentVersions(known)], {
          path: addToPath(path, 'system'),
        });
        state.issues.add(unknown);
        state.messages.push(unknown.text);
      }
    } else if (!cs && result !== versionCoding) {
      const issue = txIssue('VALUESET_VALUE_MISMATCH', [system, result, versionCoding], {
        path: addToPath(path, 'version'),
      });
      state.issues.add(issue);
      state.messages.push(issue.text);
    }
    return result;
  }

  /** Several includes of one system at different versions: the newest one the code is in (with that display). */
  private pickApplicableVersion(
    versions: Set<string>,
    system: string,
    code: string,
    display?: string,
  ): string | undefined {
    const found: string[] = [];
    for (const v of versions) {
      const cs = this.provider(system, v);
      const concept = cs?.locate(code);
      if (cs && concept && (!display || cs.designations(concept).some((d) => d.value === display))) found.push(v);
    }
    if (found.length === versions.size) return undefined;
    const pool = found.length > 0 ? found : [...versions];
    return pool.sort((a, b) => -compareVersions(a, b))[0];
  }

  /** A coding's version picks among includes that state versions; otherwise any include may answer. */
  private useThisVersion(include: ValueSetComposeInclude, version: string | undefined): boolean {
    if (!version || include.version === version) return true;
    return !(this.valueSet.compose?.include ?? []).some((inc) => inc.version === version);
  }

  /** inferSystem: the one system whose code this is, among those the value set includes. */
  private inferSystem(code: string, state: CodingState): string | undefined {
    const systems = this.systemsFor(code);
    if (systems.length === 1) return systems[0];
    const vs = this.canonical;
    if (systems.length > 1) {
      const issue = txIssue(
        'Unable_to_resolve_system__value_set_has_multiple_matches',
        [code, vs, systems.join(', ')],
        { path: 'code' },
      );
      state.messages.push(issue.text);
      state.issues.add(issue);
    } else {
      const issue = txIssue('UNABLE_TO_INFER_CODESYSTEM', [code, vs], { path: 'code' });
      state.messages.push(issue.text);
      state.issues.add(issue);
    }
    return undefined;
  }

  /** The systems of this value set (and its imports) that contain the code. */
  systemsFor(code: string): string[] {
    const found: string[] = [];
    for (const include of this.valueSet.compose?.include ?? []) {
      if (include.system && !found.includes(include.system)) {
        const cs = this.provider(include.system, this.env.params.versionFor(include.system, include.version));
        const inList = include.concept ? include.concept.some((c) => c.code === code) : cs?.locate(code) !== undefined;
        if (cs && inList) found.push(include.system);
      }
      for (const url of include.valueSet ?? []) {
        for (const s of this.imports.get(this.pinValueSet(url))?.systemsFor(code) ?? [])
          if (!found.includes(s)) found.push(s);
      }
    }
    for (const entry of flatten(this.valueSet.expansion?.contains ?? [])) {
      if (entry.code === code && entry.system && !found.includes(entry.system)) found.push(entry.system);
    }
    return found;
  }
}

/** Of several includes of one system, the newest version is tried first; sorted once per compose. */
const sortedIncludes = new WeakMap<NonNullable<ValueSet['compose']>, ValueSetComposeInclude[]>();

function newestFirst(compose: NonNullable<ValueSet['compose']>): ValueSetComposeInclude[] {
  let includes = sortedIncludes.get(compose);
  if (!includes) {
    includes = [...compose.include].sort((a, b) =>
      a.system === b.system && a.version && b.version ? -compareVersions(a.version, b.version) : 0,
    );
    sortedIncludes.set(compose, includes);
  }
  return includes;
}

function flatten(entries: ValueSetExpansionContains[]): ValueSetExpansionContains[] {
  return entries.flatMap((e) => [e, ...flatten(e.contains ?? [])]);
}

function findInExpansion(
  entries: ValueSetExpansionContains[],
  system: string,
  code: string,
): ValueSetExpansionContains | undefined {
  return flatten(entries).find((e) => e.system === system && e.code === code);
}

/** An include that lists its codes and nothing else: membership needs no code system content. */
export function isEnumeration(include: ValueSetComposeInclude): boolean {
  return (include.concept?.length ?? 0) > 0 && !include.filter?.length && !include.valueSet?.length;
}
