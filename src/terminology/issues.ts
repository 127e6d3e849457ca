import type { OperationOutcome, OperationOutcomeIssue } from 'fhir/r4';
import { ISSUE_KINDS, type IssueCode, type IssueId, type IssueKind, type Severity } from './issue-kinds';
import { message, type MessageId } from './messages';

/**
 * Issues as the HL7 terminology ecosystem reports them: an OperationOutcome issue with the
 * message id extension, a tx-issue-type coding, the text, and where in the request it applies.
 */

export const TX_ISSUE_TYPE = 'http://hl7.org/fhir/tools/CodeSystem/tx-issue-type';
export const MESSAGE_ID_EXT = 'http://hl7.org/fhir/StructureDefinition/operationoutcome-message-id';

export type { Severity } from './issue-kinds';

export interface TxIssue {
  severity: Severity;
  code: IssueCode;
  /** The tx-issue-type code (not-in-vs, invalid-code, invalid-display, ...). */
  type?: string;
  /** The catalogue id, reported in the message-id extension (absent for plain notes). */
  messageId?: MessageId;
  text: string;
  /** FHIRPath into the request: `code`, `Coding.display`, `CodeableConcept.coding[0].code`. */
  path?: string;
}

export interface IssueOptions {
  /** FHIRPath into the request: `code`, `Coding.display`, `CodeableConcept.coding[0].code`. */
  path?: string;
  /** Where this place reports the message otherwise than the catalogue says (as the ecosystem does). */
  severity?: Severity;
  code?: IssueCode;
  type?: string;
}

/** The issue for a catalogued message: severity, code and type from issue-kinds.ts, the text from messages.ts. */
export function txIssue(id: IssueId, args: (string | number | undefined)[], options: IssueOptions = {}): TxIssue {
  const kind: IssueKind = ISSUE_KINDS[id];
  return {
    severity: options.severity ?? kind.severity,
    code: options.code ?? kind.code,
    type: options.type ?? kind.type,
    messageId: id,
    text: message(id, ...args),
    path: options.path,
  };
}

/** An issue whose text comes from the catalogue but that the ecosystem reports without its id. */
export function plainIssue(...args: Parameters<typeof txIssue>): TxIssue {
  const { messageId: _reportedWithoutId, ...issue } = txIssue(...args);
  return issue;
}

/** A terminology problem that ends the operation; the handler turns it into an answer. */
export class TerminologyError extends Error {
  constructor(
    readonly issue: TxIssue,
    /** Answer as an OperationOutcome with this status (rather than a result=false Parameters). */
    readonly status?: number,
    readonly unknownSystem?: string,
  ) {
    super(issue.text);
  }
}

export class IssueList {
  readonly issues: TxIssue[] = [];

  /** Adds the issue unless an identical one is there already; says whether it was added. */
  add(issue: TxIssue): boolean {
    const same = this.issues.some(
      (i) => i.severity === issue.severity && i.code === issue.code && i.text === issue.text && i.path === issue.path,
    );
    if (same) return false;
    this.issues.push(issue);
    return true;
  }

  hasErrors(): boolean {
    return this.issues.some((i) => i.severity === 'error' || i.severity === 'fatal');
  }

  get isEmpty(): boolean {
    return this.issues.length === 0;
  }

  toOutcome(): OperationOutcome {
    return outcomeOf(this.issues);
  }
}

export function outcomeOf(issues: TxIssue[]): OperationOutcome {
  return { resourceType: 'OperationOutcome', issue: issues.map(toFhirIssue) };
}

export function toFhirIssue(issue: TxIssue): OperationOutcomeIssue {
  // Built in FHIR element order: extension, severity, code, details, expression. R4's
  // `location` is deprecated in favour of `expression` and is never written (HL7's reference
  // servers write only `expression`; an expected answer may allow `location`, never require it).
  const out: Record<string, unknown> = {};
  if (issue.messageId) out.extension = [{ url: MESSAGE_ID_EXT, valueString: issue.messageId }];
  out.severity = issue.severity;
  out.code = issue.code;
  out.details = issue.type
    ? { coding: [{ system: TX_ISSUE_TYPE, code: issue.type }], text: issue.text }
    : { text: issue.text };
  if (issue.path) out.expression = [issue.path];
  return out as unknown as OperationOutcomeIssue;
}

export function addToPath(path: string | undefined, name: string): string {
  return path ? `${path}.${name}` : name;
}
