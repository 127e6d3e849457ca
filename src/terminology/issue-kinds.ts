import type { OperationOutcomeIssue } from 'fhir/r4';
import type { MessageId } from './messages';

/**
 * How each terminology message is reported as an issue: its severity, its OperationOutcome code
 * and its tx-issue-type, per message id (the texts are in messages.ts). The engine names only the
 * id, its arguments and where the issue applies: txIssue(id, args, { path }). Where the HL7
 * ecosystem reports one message in two ways (an unknown code in $subsumes, say), the place that
 * does so states the difference; every id an issue is made of is here (the compiler holds
 * that), and every entry here is used (test/terminology/messages.test.ts).
 */

export type Severity = 'fatal' | 'error' | 'warning' | 'information';
export type IssueCode = OperationOutcomeIssue['code'];

export interface IssueKind {
  severity: Severity;
  code: IssueCode;
  /** The tx-issue-type code (not-in-vs, invalid-code, invalid-display, ...); none for a few. */
  type?: string;
}

function kind(severity: Severity, code: IssueCode, type?: string): IssueKind {
  return type ? { severity, code, type } : { severity, code };
}

export const ISSUE_KINDS = {
  ABSTRACT_CODE_NOT_ALLOWED: kind('error', 'business-rule', 'code-rule'),
  CODE_CASE_DIFFERENCE: kind('information', 'business-rule', 'code-rule'),
  CODESYSTEM_CONTENT_NOT_PRESENT: kind('error', 'not-found', 'not-found'),
  CODESYSTEM_CONTENT_NOT_PRESENT_LOOKUP: kind('error', 'not-found', 'not-found'),
  CODESYSTEM_CONTENT_NOT_PRESENT_SUBSUMES: kind('error', 'not-found', 'not-found'),
  CODESYSTEM_NOT_ENUMERABLE: kind('error', 'not-supported'),
  CODESYSTEM_NO_CONTENT_TO_EXPAND: kind('error', 'business-rule', 'invalid'),
  CODESYSTEM_IS_SUPPLEMENT_EXPAND: kind('error', 'business-rule', 'invalid'),
  CODESYSTEM_CS_NO_SUPPLEMENT: kind('error', 'invalid', 'invalid-data'),
  CODING_HAS_NO_CODE: kind('warning', 'invalid', 'invalid-data'),
  CODING_HAS_NO_CODE_FOR_SYSTEM: kind('warning', 'invalid', 'invalid-data'),
  CODESYSTEM_CONTENT_EXAMPLE: kind('warning', 'not-found', 'vs-invalid'),
  Coding_has_no_system__cannot_validate: kind('warning', 'invalid', 'invalid-data'),
  CONCEPT_DEPRECATED_IN_VALUESET: kind('warning', 'business-rule', 'code-comment'),
  DEPRECATED_CONCEPT_FOUND: kind('warning', 'business-rule', 'code-comment'),
  Display_Name_Not_Fixed_use_Supplement: kind('information', 'invalid', 'invalid-display'),
  Display_Name_for__should_be_one_of__instead_of: kind('error', 'invalid', 'invalid-display'),
  Display_Name_WS_for__should_be_one_of__instead_of: kind('error', 'invalid', 'invalid-display'),
  INACTIVE_CONCEPT_FOUND: kind('warning', 'business-rule', 'code-comment'),
  INACTIVE_CONCEPT_FOUND_ADD: kind('warning', 'business-rule', 'code-comment'),
  INACTIVE_DISPLAY_FOUND: kind('warning', 'invalid', 'display-comment'),
  INVALID_DISPLAY_NAME: kind('error', 'processing', 'invalid-display'),
  MSG_DEPRECATED: kind('information', 'business-rule', 'status-check'),
  MSG_DRAFT: kind('information', 'business-rule', 'status-check'),
  MSG_EXPERIMENTAL: kind('information', 'business-rule', 'status-check'),
  MSG_RETIRED: kind('information', 'business-rule', 'status-check'),
  MSG_WITHDRAWN: kind('information', 'business-rule', 'status-check'),
  NO_VALID_DISPLAY_AT_ALL: kind('error', 'invalid', 'invalid-display'),
  NO_VALID_DISPLAY_FOUND_NONE_FOR_LANG_ERR: kind('error', 'invalid', 'invalid-display'),
  NO_VALID_DISPLAY_FOUND_NONE_FOR_LANG_OK: kind('information', 'invalid', 'invalid-display'),
  None_of_the_provided_codes_are_in_the_value_set_one: kind('error', 'code-invalid', 'not-in-vs'),
  STATUS_CODE_WARNING_CODE: kind('error', 'business-rule', 'code-rule'),
  Terminology_TX_System_Relative: kind('error', 'invalid', 'invalid-data'),
  Terminology_TX_System_ValueSet2: kind('error', 'invalid', 'invalid-data'),
  TX_GENERAL_CC_ERROR_MESSAGE: kind('error', 'code-invalid', 'not-in-vs'),
  TRANSLATE_TOO_COSTLY: kind('error', 'too-costly'),
  TRANSLATE_MAP_CHAIN_TOO_DEEP: kind('error', 'processing'),
  UNABLE_TO_HANDLE_SYSTEM_FILTER_WITH_NO_VALUE: kind('error', 'invalid', 'vs-invalid'),
  UNABLE_TO_INFER_CODESYSTEM: kind('error', 'not-found', 'cannot-infer'),
  Unable_to_resolve_system__value_set_has_multiple_matches: kind('error', 'not-found', 'cannot-infer'),
  Unable_to_resolve_value_Set_: kind('error', 'not-found', 'not-found'),
  LOOKUP_UNKNOWN_CODE: kind('error', 'not-found', 'not-found'),
  Unknown_Code_in: kind('error', 'code-invalid', 'invalid-code'),
  Unknown_Code_in_Version: kind('error', 'code-invalid', 'invalid-code'),
  UNKNOWN_CODE_IN_FRAGMENT: kind('warning', 'code-invalid', 'invalid-code'),
  UNKNOWN_CODESYSTEM: kind('error', 'not-found', 'not-found'),
  UNKNOWN_CODESYSTEM_LOOKUP: kind('error', 'not-found', 'not-found'),
  UNKNOWN_CODESYSTEM_SUBSUMES: kind('error', 'not-found', 'not-found'),
  UNKNOWN_CODESYSTEM_EXP: kind('error', 'not-found', 'not-found'),
  UNKNOWN_CODESYSTEM_VERSION: kind('error', 'not-found', 'not-found'),
  UNKNOWN_CODESYSTEM_VERSION_EXP: kind('error', 'not-found', 'not-found'),
  UNKNOWN_CODESYSTEM_VERSION_EXP_NONE: kind('error', 'not-found', 'not-found'),
  UNKNOWN_CODESYSTEM_VERSION_LOOKUP: kind('error', 'not-found', 'not-found'),
  UNKNOWN_CODESYSTEM_VERSION_LOOKUP_NONE: kind('error', 'not-found', 'not-found'),
  UNKNOWN_CODESYSTEM_VERSION_SUBSUMES: kind('error', 'not-found', 'not-found'),
  UNKNOWN_CODESYSTEM_VERSION_SUBSUMES_NONE: kind('error', 'not-found', 'not-found'),
  UNKNOWN_CODESYSTEM_VERSION_NONE: kind('error', 'not-found', 'not-found'),
  VALUESET_CIRCULAR_REFERENCE: kind('error', 'processing', 'vs-invalid'),
  VALUESET_SUPPLEMENT_MISSING: kind('error', 'not-found', 'not-found'),
  VALUESET_IMPORTS_TOO_DEEP: kind('error', 'too-costly'),
  VALUESET_TOO_COSTLY: kind('error', 'too-costly'),
  VALUESET_VALUE_MISMATCH: kind('error', 'invalid', 'vs-invalid'),
  VALUESET_VALUE_MISMATCH_CHANGED: kind('error', 'invalid', 'vs-invalid'),
  VALUESET_VALUE_MISMATCH_DEFAULT: kind('warning', 'invalid', 'vs-invalid'),
  VALUESET_VERSION_CHECK: kind('error', 'exception', 'version-error'),
  VS_EXP_IMPORT_UNK_PINNED: kind('error', 'not-found', 'not-found'),
  FILTER_NOT_UNDERSTOOD: kind('error', 'not-supported', 'vs-invalid'),
  LOCKED_DATE_NOT_SUPPORTED: kind('error', 'not-supported', 'vs-invalid'),
} as const satisfies { [K in MessageId]?: IssueKind };

/** A message that is reported as an issue. */
export type IssueId = keyof typeof ISSUE_KINDS;
