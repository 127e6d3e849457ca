import type { CodeableConcept, Coding } from 'fhir/r4';
import { addToPath, IssueList, plainIssue, txIssue } from '../issues';
import { message } from '../messages';
import type { ValueSetChecker } from './checker';
import { checkDisplay } from './display-check';
import { DisplayList } from './display-list';
import { checkResourceStatus } from './status';
import { type CodedMode, type CodingState, type Membership, type ValidationResult } from './state';
import { describeOutsideValueSet, softenUnknownSystems } from './outside-value-set';

interface CodedInput {
  checker: ValueSetChecker;
  concept: CodeableConcept;
  mode: CodedMode;
  /** '' for code, 'Coding', or 'CodeableConcept': the root of issue paths. */
  issuePath: string;
  /** Set when validating against a code system itself (CodeSystem/$validate-code). */
  internal?: boolean;
}

/** What the walk over the codings gathers, for the answer. */
interface Gathered {
  issues: IssueList;
  messages: string[];
  note: (text: string) => void;
  unknownSystems: Set<string>;
  ok: Membership;
  /** The first coding in the value set: it speaks for the result. */
  first?: { system?: string; code: string; path: string; version?: string; display?: string };
  /** Otherwise, the coding the answer echoes. */
  fallback: { system?: string; code?: string; version?: string };
  display?: string;
  inactive: CodingState['inactive'];
  status?: string;
  normalForm?: string;
  impliedSystem?: string;
  noCode: boolean;
  matched: Set<number>;
  seenUnknown: string[];
  codeList: string;
}

/**
 * Validates the codings of a code, Coding or CodeableConcept against the checker's value set and
 * assembles the answer: the first coding that is in the value set speaks for the result, and
 * every problem found on the way becomes an issue and part of the message.
 */
export function validateCoded(input: CodedInput): ValidationResult {
  const got = gather(input);
  summariseNotInValueSet(input, got);
  const result = resultOf(input, got);
  reportStatusOfCode(input, got, result);
  const { issues, messages, note } = got;
  for (const issue of issues.issues) if (issue.severity === 'error') note(issue.text);
  if (messages.length > 0) result.message = [...messages].sort().join('; ');
  if (input.mode === 'codeableConcept') result.codeableConcept = input.concept;
  if (!issues.isEmpty) result.issues = issues.toOutcome();
  return result;
}

/** Checks each coding in turn (a coding without a code ends the walk). */
function gather(input: CodedInput): Gathered {
  const { checker, concept, issuePath } = input;
  const messages: string[] = [];
  const got: Gathered = {
    issues: new IssueList(),
    messages,
    note: (text: string) => {
      if (text && !messages.includes(text)) messages.push(text);
    },
    unknownSystems: new Set<string>(),
    ok: false,
    fallback: {},
    inactive: undefined,
    noCode: false,
    matched: new Set<number>(),
    seenUnknown: [],
    codeList: '',
  };
  checkResourceStatus({ issues: got.issues }, checker.valueSet, checker.valueSet);
  const codings = concept.coding ?? [];
  for (let i = 0; i < codings.length; i++) {
    const path = issuePath === 'CodeableConcept' ? addToPath(issuePath, `coding[${i}]`) : issuePath;
    if (!checkCoding(input, got, { coding: codings[i], index: i, path })) break;
  }
  if (issuePath === 'CodeableConcept' && got.matched.size > 0)
    softenUnknownSystems(got.issues, codings, got.matched, messages, got.note);
  return got;
}

/** One coding: in the value set or not, and what is wrong with it either way. False: stop the walk. */
function checkCoding(input: CodedInput, got: Gathered, at: { coding: Coding; index: number; path: string }): boolean {
  const { checker, mode, issuePath } = input;
  const { params } = checker.env;
  const { issues, note } = got;
  const { coding: c, index: i, path } = at;
  if (!c.code) {
    const issue = c.system
      ? plainIssue('CODING_HAS_NO_CODE_FOR_SYSTEM', [c.system], { path: path || undefined })
      : plainIssue('CODING_HAS_NO_CODE', [], { path: path || undefined });
    note(issue.text);
    issues.add(issue);
    got.noCode = true;
    return false;
  }
  const state: CodingState = {
    issues,
    messages: got.messages,
    unknownSystems: got.unknownSystems,
    displays: new DisplayList(),
    inactive: got.inactive,
    status: got.status,
  };
  const v = checker.check({ path, system: c.system, version: c.version, code: c.code, display: c.display }, state);
  got.inactive = state.inactive;
  got.status = state.status;
  if (state.normalForm) got.normalForm = state.normalForm;
  if (state.impliedSystem) got.impliedSystem = state.impliedSystem;
  if (v === true) got.matched.add(i);
  const ws = state.impliedSystem ?? c.system ?? '';
  if (!got.fallback.code || v === true) got.fallback = { system: c.system, code: c.code, version: c.version };
  if (!got.fallback.version && state.version) got.fallback.version = state.version;
  let cc = c.version ? `${ws}|${c.version}#${c.code}` : `${ws}#${c.code}`;
  if (c.display) cc += ` ('${c.display}')`;
  got.codeList = got.codeList ? `${got.codeList}, '${cc}'` : `'${cc}'`;

  if (v === false && !input.internal && mode === 'codeableConcept') {
    issues.add(
      // Per coding of a CodeableConcept, the ecosystem reports this as a note, not the answer's error.
      txIssue('None_of_the_provided_codes_are_in_the_value_set_one', ['', checker.canonical, `'${cc}'`], {
        path: `${issuePath}.coding[${i}].code`,
        severity: 'information',
        type: 'this-code-not-in-vs',
      }),
    );
  }
  if (got.ok !== true && v !== false) got.ok = v;

  if (v === true) {
    if (state.contentMode === 'example') {
      const issue = plainIssue('CODESYSTEM_CONTENT_EXAMPLE', [c.system, c.code, c.display, state.contentMode], {
        path: path || undefined,
      });
      note(issue.text);
      issues.add(issue);
    } else if (c.display && state.displays.count > 0) {
      state.displays.baseLanguage = state.defLang;
      checkDisplay({
        coding: c,
        displays: state.displays,
        defLang: state.defLang,
        params,
        issues,
        note,
        path,
        ownDisplay: state.ownDisplay,
      });
    }
    if (!got.first) {
      state.displays.baseLanguage = state.defLang;
      const display =
        state.displays.preferredDisplay(params.workingLanguages()) ?? state.displays.preferredDisplay(undefined);
      got.first = { system: c.system, code: c.code, path, version: state.version, display };
    }
  } else if (!params.membershipOnly && ws) {
    describeOutsideValueSet({
      checker,
      coding: c,
      ws,
      path,
      mode,
      issuePath,
      index: i,
      state,
      note,
      seenUnknown: got.seenUnknown,
      onDisplay: (d) => (got.display = d),
    });
    if (!got.inactive && state.inactive) got.inactive = state.inactive;
    if (state.version && mode !== 'codeableConcept' && !got.fallback.version) got.fallback.version = state.version;
  }
  return true;
}

/** No coding is in the value set: the answer's error says so (unless a missing code already did). */
function summariseNotInValueSet(input: CodedInput, got: Gathered): void {
  const { checker, mode, issuePath } = input;
  const { issues, note } = got;
  const noCodeSummary = got.noCode && (mode !== 'codeableConcept' || input.internal);
  if (got.ok !== false || noCodeSummary || (input.internal && issues.hasErrors())) return;
  const vs = checker.canonical;
  const [id, args] =
    mode === 'codeableConcept'
      ? (['TX_GENERAL_CC_ERROR_MESSAGE', [vs]] as const)
      : (['None_of_the_provided_codes_are_in_the_value_set_one', ['', vs, got.codeList]] as const);
  const at =
    mode === 'codeableConcept'
      ? undefined
      : !issuePath
        ? 'code'
        : issuePath !== 'CodeableConcept'
          ? `${issuePath}.code`
          : issuePath;
  if (issues.add(txIssue(id, [...args], { path: at }))) note(message(id, ...args));
}

/** The answer's result, system, code, version and display, and the unknown systems behind it. */
function resultOf(input: CodedInput, got: Gathered): ValidationResult {
  const { mode } = input;
  const { ok, first, fallback, impliedSystem, unknownSystems } = got;
  const valid = ok === true && !got.issues.hasErrors();
  const result: ValidationResult = { result: valid };
  if (first?.system) result.system = first.system;
  else if (ok === true && impliedSystem) result.system = impliedSystem;
  else if (fallback.system && mode !== 'codeableConcept') result.system = fallback.system;
  // An unknown system is reported as the reason for the answer, unless another coding made it true.
  if (unknownSystems.size > 0 && ok === false) result['x-unknown-system'] = [...unknownSystems].map(asCanonical);
  else if (unknownSystems.size > 0 && !valid)
    result['x-caused-by-unknown-system'] = [...unknownSystems].map(asCanonical);
  if (got.normalForm) result['normalized-code'] = got.normalForm;
  if (first) result.code = first.code;
  else if (fallback.code && mode !== 'codeableConcept') result.code = fallback.code;
  if (first?.version) result.version = first.version;
  else if (fallback.version && mode !== 'codeableConcept') result.version = fallback.version;
  const shownDisplay = first ? first.display : got.display;
  if (shownDisplay && (first || (fallback.code && mode !== 'codeableConcept'))) result.display = shownDisplay;
  return result;
}

/** An inactive or deprecated code: the answer says so, with a warning. */
function reportStatusOfCode(input: CodedInput, got: Gathered, result: ValidationResult): void {
  const { mode, issuePath } = input;
  const { inactive, first, issues, note } = got;
  if (inactive) {
    if (mode !== 'codeableConcept' || (first && inactive.path === first.path)) {
      result.inactive = true;
      if (inactive.status && inactive.status !== 'inactive') result.status = inactive.status;
    }
    // A status that is not itself "inactive" is reported with it: "retired and inactive".
    const status = inactive.status ?? 'inactive';
    const plain = status === 'inactive' || status === 'DISCOURAGED';
    const issue = plain
      ? txIssue('INACTIVE_CONCEPT_FOUND', [status, inactive.code], { path: inactive.path || 'code' })
      : txIssue('INACTIVE_CONCEPT_FOUND_ADD', [status, inactive.code, 'inactive'], { path: inactive.path || 'code' });
    issue.messageId = 'INACTIVE_CONCEPT_FOUND';
    note(issue.text);
    issues.add(issue);
  } else if (got.status?.toLowerCase() === 'deprecated') {
    result.status = 'deprecated';
    const issue = txIssue('DEPRECATED_CONCEPT_FOUND', [got.status, first?.code ?? got.fallback.code], {
      path: issuePath || undefined,
    });
    note(issue.text);
    issues.add(issue);
  }
}

/**
 * `system|version` as a canonical: whitespace (a version may hold some; a canonical may not) is
 * percent-encoded, so the answer stays valid for any request.
 */
export function asCanonical(systemAndVersion: string): string {
  return systemAndVersion.replace(/\s/g, (c) => encodeURIComponent(c));
}
