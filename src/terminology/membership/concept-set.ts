import type { ValueSetComposeInclude, ValueSetComposeIncludeConcept } from 'fhir/r4';
import {
  FilterNotSupportedError,
  type CodeSystemProvider,
  type ConceptFilter,
  type ConceptHandle,
} from '../providers/provider';
import { filterOp } from '../compose';
import { addToPath, TerminologyError, txIssue } from '../issues';
import { message } from '../messages';
import type { ValueSetChecker } from './checker';
import { canonicalOf, type CodingState } from './state';

const VS_DEPRECATED = 'http://hl7.org/fhir/StructureDefinition/valueset-deprecated';
const STANDARDS_STATUS = 'http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status';

export interface ConceptSetCheck {
  path: string;
  /** 'in' for an include, 'not in' for an exclude (which reports nothing of its own). */
  role: 'in' | 'not in';
  cs: CodeSystemProvider;
  set: ValueSetComposeInclude;
  code: string;
  state: CodingState;
}

/** Concept lists indexed by code, and filters compiled per provider: built once per include. */
const conceptIndex = new WeakMap<ValueSetComposeInclude, Map<string, ValueSetComposeIncludeConcept>>();
const compiledFilters = new WeakMap<
  ValueSetComposeInclude,
  WeakMap<CodeSystemProvider, ConceptFilter<ConceptHandle>[]>
>();

function conceptsOf(set: ValueSetComposeInclude): Map<string, ValueSetComposeIncludeConcept> {
  let map = conceptIndex.get(set);
  if (!map) {
    map = new Map((set.concept ?? []).map((c) => [c.code, c]));
    conceptIndex.set(set, map);
  }
  return map;
}

export function filtersOf(
  checker: ValueSetChecker,
  set: ValueSetComposeInclude,
  cs: CodeSystemProvider,
): ConceptFilter<ConceptHandle>[] {
  let byProvider = compiledFilters.get(set);
  if (!byProvider) {
    byProvider = new WeakMap();
    compiledFilters.set(set, byProvider);
  }
  let filters = byProvider.get(cs);
  if (!filters) {
    filters = (set.filter ?? []).map((f) => {
      if (f.value === undefined || f.value === '') {
        throw new TerminologyError(
          txIssue('UNABLE_TO_HANDLE_SYSTEM_FILTER_WITH_NO_VALUE', [cs.url, f.property, filterOp(f)]),
          400,
        );
      }
      try {
        return cs.filter(f.property, filterOp(f), f.value);
      } catch (err) {
        if (!(err instanceof FilterNotSupportedError)) throw err;
        throw new TerminologyError(
          txIssue('FILTER_NOT_UNDERSTOOD', [f.property, filterOp(f), f.value, checker.canonical, cs.url]),
          400,
        );
      }
    });
    byProvider.set(cs, filters);
  }
  return filters;
}

/** Whether the code is in one include (or exclude) of a value set, reporting why not where it matters. */
export function checkConceptSet(checker: ValueSetChecker, check: ConceptSetCheck): boolean {
  const { set } = check;
  if (!set.concept && !set.filter) return checkWholeSystem(checker, check);
  if (set.concept) {
    const listed = conceptsOf(set).get(check.code);
    if (listed) {
      const concept = check.cs.locate(check.code);
      if (concept && acceptConcept(checker, check, concept, listed)) return true;
    }
  }
  if (set.filter && set.filter.length > 0) {
    const filters = filtersOf(checker, set, check.cs);
    const concept = check.cs.locate(check.code);
    if (concept && filters.every((f) => f.contains(concept))) return acceptConcept(checker, check, concept, undefined);
    const refusing = concept ? filters.find((f) => !f.contains(concept)) : undefined;
    const why = concept && check.role === 'in' ? refusing?.explain?.(concept) : undefined;
    if (why) check.state.messages.push(why);
  }
  return false;
}

function checkWholeSystem(checker: ValueSetChecker, check: ConceptSetCheck): boolean {
  const { cs, code, state, path, role } = check;
  const { params } = checker.env;
  const concept = cs.locate(code);
  if (!concept) {
    if (params.membershipOnly || role === 'not in') return false;
    // A fragment says other codes may exist elsewhere; every other kind of content that lacks
    // the code (complete, example) means the code is not known.
    if (cs.content === 'fragment') {
      state.issues.add(
        txIssue('UNKNOWN_CODE_IN_FRAGMENT', [code, cs.url, cs.version], { path: addToPath(path, 'code') }),
      );
      return true;
    }
    state.issues.add(
      txIssue(cs.version ? 'Unknown_Code_in_Version' : 'Unknown_Code_in', [code, cs.url, cs.version], {
        path: addToPath(path, 'code'),
      }),
    );
    // A grammar can say what is wrong with the code; the ecosystem gives that as a plain note.
    const reason = cs.explainUnknown?.(code);
    if (reason)
      state.issues.add({
        severity: 'information',
        code: 'code-invalid',
        type: 'invalid-code',
        text: reason,
        path: addToPath(path, 'code'),
      });
    return false;
  }
  return acceptConcept(checker, check, concept, undefined);
}

/**
 * The code is in the set: record its displays and status, and refuse it where it is abstract
 * (abstract=false) or inactive (activeOnly, or compose.inactive=false).
 */
function acceptConcept(
  checker: ValueSetChecker,
  check: ConceptSetCheck,
  concept: ConceptHandle,
  listed: ValueSetComposeIncludeConcept | undefined,
): boolean {
  const { cs, code, state, path, role } = check;
  const { params } = checker.env;
  if (concept.code !== code) {
    // The code system is case-insensitive and the code differs from its own spelling by case.
    state.issues.add(
      txIssue('CODE_CASE_DIFFERENCE', [code, concept.code, cs.version ? `${cs.url}|${cs.version}` : cs.url], {
        path: addToPath(path, 'code'),
      }),
    );
    state.normalForm = concept.code;
  }
  state.displays.add(cs.designations(concept));
  if (cs.allowsOwnDisplay?.(concept)) state.ownDisplay = true;
  if (listed) {
    const vsLanguage = checker.valueSet.language;
    if (listed.display) state.displays.addIncludeDisplay(listed.display, vsLanguage);
    state.displays.add(
      (listed.designation ?? []).map((d) => ({
        language: d.language,
        use: d.use,
        value: d.value,
        status: 'active',
        isDisplay: false,
      })),
    );
  }
  const inactive = cs.isInactive(concept);
  if (!params.abstractOk && cs.isAbstract(concept)) {
    if (!params.membershipOnly && role !== 'not in') {
      state.issues.add(txIssue('ABSTRACT_CODE_NOT_ALLOWED', [cs.url, code], { path: addToPath(path, 'code') }));
    }
    return false;
  }
  const excludeInactive = checker.valueSet.compose?.inactive === false;
  if ((excludeInactive || params.activeOnly) && inactive) {
    if (role !== 'not in') {
      const text = message('STATUS_CODE_WARNING_CODE', 'not active', code);
      state.issues.add(txIssue('STATUS_CODE_WARNING_CODE', ['not active', code], { path: addToPath(path, 'code') }));
      state.messages.push(text);
      if (!params.membershipOnly) state.inactive = { path, code, status: cs.status(concept) };
    }
    return false;
  }
  if (role !== 'not in') {
    if (listed) reportDeprecatedInValueSet(checker, check, listed);
    if (!state.inactive) {
      if (inactive) state.inactive = { path, code, status: cs.status(concept) };
      const status = cs.status(concept);
      if (status && !state.status) state.status = status;
    }
  }
  return true;
}

function reportDeprecatedInValueSet(
  checker: ValueSetChecker,
  check: ConceptSetCheck,
  listed: ValueSetComposeIncludeConcept,
): void {
  const standards = listed.extension?.find((e) => e.url === STANDARDS_STATUS)?.valueCode;
  const deprecated = listed.extension?.some((e) => e.url === VS_DEPRECATED);
  const status =
    standards === 'withdrawn' || standards === 'deprecated' ? standards : deprecated ? 'deprecated' : undefined;
  if (!status) return;
  check.state.issues.add(
    txIssue('CONCEPT_DEPRECATED_IN_VALUESET', [check.cs.url, check.code, status, canonicalOf(checker.valueSet)], {
      path: addToPath(check.path, 'code'),
    }),
  );
}
