import type { Coding } from 'fhir/r4';
import { addToPath, IssueList, txIssue } from '../issues';
import { Language } from '../languages';
import { message } from '../messages';
import { presentVersions } from '../versions';
import type { CodeSystemProvider } from '../providers/provider';
import type { ValueSetChecker } from './checker';
import { checkDisplay } from './display-check';
import { DisplayList } from './display-list';
import { checkCodeSystemStatus } from './status';
import { canonicalOf, type CodedMode, type CodingState } from './state';

/** What a coding outside the value set is told: its system missing or unknown, its code unknown, or just not a member. */

export interface OutsideCheck {
  checker: ValueSetChecker;
  coding: Coding;
  ws: string;
  path: string;
  mode: CodedMode;
  issuePath: string;
  index: number;
  state: CodingState;
  note: (text: string) => void;
  seenUnknown: string[];
  onDisplay: (display: string | undefined) => void;
}

/**
 * A coding that is not in the value set is still looked up in its code system, to say whether
 * the code exists at all, whether its display is right, and what its status is.
 */
export function describeOutsideValueSet(check: OutsideCheck): void {
  const { checker, coding: c, ws, path, mode, issuePath, index, state } = check;
  const { params } = checker.env;
  if (!isAbsoluteUrl(ws)) {
    const p =
      mode === 'coding'
        ? `${issuePath}.system`
        : mode === 'codeableConcept'
          ? `${issuePath}.coding[${index}].system`
          : issuePath;
    const issue = txIssue('Terminology_TX_System_Relative', [], { path: p || undefined });
    state.messages.push(issue.text);
    state.issues.add(issue);
  }
  const lookupVersion = c.version ?? versionInValueSet(checker, c.system);
  const cs = checker.provider(ws, lookupVersion);
  if (!cs) return describeMissingSystem(check, lookupVersion);
  checkCodeSystemStatus(state, cs, checker.valueSet);
  const concept = cs.locate(c.code as string);
  if (!concept) return describeUnknownCode(check, cs);
  const displays = DisplayList.of(cs.designations(concept), cs.language);
  if (!params.membershipOnly && !state.inactive && cs.isInactive(concept)) {
    state.inactive = { path, code: c.code as string, status: cs.status(concept) };
  }
  check.onDisplay(displays.preferredDisplay(params.workingLanguages()) ?? displays.preferredDisplay(undefined));
  if (c.display && displays.count > 0) {
    const defLang = Language.of(cs.language ?? 'en');
    if (!displays.hasDisplay(params.workingLanguages(), defLang, c.display, false).found) {
      checkDisplay({
        coding: { ...c, system: cs.url },
        displays,
        defLang,
        params,
        issues: state.issues,
        note: check.note,
        path,
      });
    }
  }
  if (cs.version && mode !== 'codeableConcept') state.version = cs.version;
}

/** The coding's system has no content here: a value set named as a system, a supplement, or unknown (at that version). */
export function describeMissingSystem(check: OutsideCheck, lookupVersion: string | undefined): void {
  const { ws, path, state, note } = check;
  const { resolver } = check.checker.env;
  const issues = state.issues;
  const at = { path: addToPath(path, 'system') };
  if (resolver.valueSet(ws)) {
    const issue = txIssue('Terminology_TX_System_ValueSet2', [ws], at);
    note(issue.text);
    issues.add(issue);
    return;
  }
  const supplement = resolver.anyCodeSystem(ws, lookupVersion);
  if (supplement?.content === 'supplement') {
    const canonical = supplement.version ? `${supplement.url}|${supplement.version}` : ws;
    const issue = txIssue('CODESYSTEM_CS_NO_SUPPLEMENT', [canonical], at);
    note(issue.text);
    issues.add(issue);
    return;
  }
  const anyVersion = resolver.codeSystem(ws);
  const contentless = resolver.codeSystem(ws, lookupVersion);
  let key: string;
  let issue;
  if (contentless) {
    key = ws;
    issue = txIssue('CODESYSTEM_CONTENT_NOT_PRESENT', [canonicalOf(contentless)], at);
  } else if (!anyVersion && !lookupVersion) {
    key = ws;
    issue = txIssue('UNKNOWN_CODESYSTEM', [ws], at);
  } else {
    const known = resolver.codeSystemVersions(ws);
    const id = known.length === 0 ? 'UNKNOWN_CODESYSTEM_VERSION_NONE' : 'UNKNOWN_CODESYSTEM_VERSION';
    key = known.length === 0 ? ws : `${ws}|${lookupVersion}`;
    issue = txIssue(id, [ws, lookupVersion, presentVersions(known)], at);
  }
  if (!state.unknownSystems.has(key)) {
    state.unknownSystems.add(key);
    issues.add(issue);
  }
  note(issue.text);
}

/** The code is not in its code system (reported once per system, version and code). */
export function describeUnknownCode(check: OutsideCheck, cs: CodeSystemProvider): void {
  const { coding: c, ws, path, state, note } = check;
  const key = `${ws}|${cs.version}#${c.code}`;
  if (check.seenUnknown.includes(key)) return;
  check.seenUnknown.push(key);
  if (cs.content === 'fragment') {
    state.issues.add(txIssue('UNKNOWN_CODE_IN_FRAGMENT', [c.code, ws, cs.version], { path: addToPath(path, 'code') }));
  } else {
    const issue = txIssue(cs.version ? 'Unknown_Code_in_Version' : 'Unknown_Code_in', [c.code, ws, cs.version], {
      path: addToPath(path, 'code'),
    });
    note(issue.text);
    state.issues.add(issue);
  }
}

/** The newest version of a system the value set's includes name, for looking a code up outside it. */
export function versionInValueSet(checker: ValueSetChecker, system: string | undefined): string | undefined {
  let best: string | undefined;
  for (const include of checker.valueSet.compose?.include ?? []) {
    if (include.system === system && include.version && (!best || include.version > best)) best = include.version;
  }
  return best;
}

/**
 * In a CodeableConcept, a coding whose code system is unknown does not veto another coding
 * that is valid: its error becomes a warning that says the coding was not checked.
 */
export function softenUnknownSystems(
  issues: IssueList,
  codings: Coding[],
  matched: Set<number>,
  messages: string[],
  note: (t: string) => void,
): void {
  const unknownIds = ['UNKNOWN_CODESYSTEM', 'UNKNOWN_CODESYSTEM_VERSION', 'UNKNOWN_CODESYSTEM_VERSION_NONE'];
  codings.forEach((c, j) => {
    if (matched.has(j)) return;
    const at = `CodeableConcept.coding[${j}].system`;
    for (const issue of issues.issues) {
      if (issue.severity === 'error' && issue.messageId && unknownIds.includes(issue.messageId) && issue.path === at) {
        const was = issue.text;
        issue.severity = 'warning';
        issue.messageId = 'UNKNOWN_CODESYSTEM_CODING_NOT_CHECKED';
        issue.text = message(
          'UNKNOWN_CODESYSTEM_CODING_NOT_CHECKED',
          c.version ? `${c.system}|${c.version}` : c.system,
        );
        const k = messages.indexOf(was);
        if (k >= 0) messages.splice(k, 1);
        note(issue.text);
      }
    }
  });
}

export function isAbsoluteUrl(url: string): boolean {
  return /^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(url);
}
