import type { Coding } from 'fhir/r4';
import { addToPath, txIssue, type IssueList, type Severity } from '../issues';
import type { Language } from '../languages';
import type { IssueId } from '../issue-kinds';
import type { TxParams } from '../params';
import type { DisplayList } from './display-list';

interface DisplayCheck {
  coding: Coding;
  displays: DisplayList;
  defLang?: Language;
  params: TxParams;
  issues: IssueList;
  /** Adds a text to the answer's message. */
  note: (text: string) => void;
  path: string;
  /** The code's display is its users' to choose: a display not known is only a note. */
  ownDisplay?: boolean;
}

/**
 * Checks the display a client sent against the concept's displays in the languages asked for,
 * falling back to the code system's default language. A wrong display is an error (a warning
 * under lenient-display-validation); a display only valid in the default language is noted.
 */
export function checkDisplay(check: DisplayCheck): void {
  const { coding, displays, params, issues, note, path } = check;
  const display = coding.display as string;
  const langs = params.workingLanguages();
  const found = displays.hasDisplay(langs, undefined, display, false);
  const at = addToPath(path, 'display');
  if (found.found) {
    if (!displays.hasDisplay(langs, undefined, display, true).found) {
      const allowed = displays.allowedDisplays();
      const status = displays.statusOf(display);
      issues.add(
        txIssue(
          'INACTIVE_DISPLAY_FOUND',
          [display, coding.code, allowed.join('", "'), status === 'withdrawn' ? 'deprecated' : status],
          { path: at },
        ),
      );
    }
    return;
  }
  if (check.ownDisplay) {
    const issue = txIssue(
      'Display_Name_Not_Fixed_use_Supplement',
      [display, coding.system, coding.code, displays.present(langs, true), params.langSummary()],
      { path: at },
    );
    note(issue.text);
    issues.add(issue);
    return;
  }
  let severity: Severity = params.displayWarning ? 'warning' : 'error';
  const base =
    found.difference === 'normalized'
      ? 'Display_Name_WS_for__should_be_one_of__instead_of'
      : 'Display_Name_for__should_be_one_of__instead_of';
  let count = displays.displayCount(langs, undefined, true);
  if (count === 0) {
    severity = 'warning';
    count = displays.displayCount(langs, undefined, false);
  }
  let id: IssueId;
  let args: (string | number | undefined)[];
  if (count === 0) {
    const fallback = displays.preferredDisplay(undefined);
    if (!fallback) {
      id = 'NO_VALID_DISPLAY_AT_ALL';
      args = [display, coding.system, coding.code];
    } else if (displays.hasDisplay(langs, check.defLang, display, false).found) {
      id = 'NO_VALID_DISPLAY_FOUND_NONE_FOR_LANG_OK';
      args = [display, coding.system, coding.code, params.langSummary(), fallback];
      severity = 'information';
    } else {
      id = 'NO_VALID_DISPLAY_FOUND_NONE_FOR_LANG_ERR';
      args = [display, coding.system, coding.code, params.langSummary(), fallback];
      severity = params.displayWarning ? 'warning' : 'error';
    }
  } else {
    id = base;
    args = [String(count), coding.system, coding.code, displays.present(langs, true), display, params.langSummary()];
  }
  const issue = txIssue(id, args, { severity, path: at });
  note(issue.text);
  issues.add(issue);
}
