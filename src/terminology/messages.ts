/**
 * The one catalogue of terminology message texts (English), keyed by the message ids the HL7
 * terminology ecosystem uses (tx.fhir.org and the Java validator report the same ids in an
 * `operationoutcome-message-id` extension) and, for this server's own messages, ids in the same
 * style. `{0}`, `{1}`... are replaced by the arguments; an entry with `one` and `other` forms
 * chooses by its first argument (a count). Every id here is used, and every id used is here:
 * test/terminology/messages.test.ts scans the source both ways.
 */
export const MESSAGES = {
  ABSTRACT_CODE_NOT_ALLOWED: "Code '{0}#{1}' is abstract, and not allowed in this context",
  CODE_CASE_DIFFERENCE:
    "The code '{0}' differs from the correct code '{1}' by case. Although the code system '{2}' is case insensitive, implementers are strongly encouraged to use the correct case anyway",
  CODESYSTEM_CONTENT_NOT_PRESENT:
    "The CodeSystem '{0}' is known, but this server does not hold its content (content = not-present), so its codes cannot be checked",
  CODESYSTEM_CONTENT_NOT_PRESENT_LOOKUP:
    "The CodeSystem '{0}' is known, but this server does not hold its content (content = not-present), so its codes cannot be looked up",
  CODESYSTEM_CONTENT_NOT_PRESENT_SUBSUMES:
    "The CodeSystem '{0}' is known, but this server does not hold its content (content = not-present), so subsumption cannot be tested",
  CODESYSTEM_GRAMMAR_BASIS:
    "The code System '{0}' has a grammar and so has infinite members. This extension is based on {1}",
  CODESYSTEM_NOT_ENUMERABLE:
    "The code system '{0}' cannot be expanded because its codes cannot be iterated or enumerated in any meaningful sense",
  CODESYSTEM_NO_CONTENT_TO_EXPAND:
    'The code system definition for {0} has no content, so this expansion cannot be performed',
  CODESYSTEM_IS_SUPPLEMENT_EXPAND:
    'The code system definition for {0} defines a supplement, so this expansion cannot be performed',
  CODESYSTEM_CS_NO_SUPPLEMENT: "CodeSystem {0} is a supplement, so can't be used as a value in Coding.system",
  CODING_HAS_NO_CODE: 'Coding has no code and cannot be validated',
  CODING_HAS_NO_CODE_FOR_SYSTEM: 'Coding has no code for system {0} and cannot be validated',
  CODESYSTEM_CONTENT_EXAMPLE:
    'The system {0} was found but did not contain enough information to properly validate the code "{1}" ("{2}") (mode = {3})',
  Coding_has_no_system__cannot_validate:
    'Coding has no system. A code with no system has no defined meaning, and it cannot be validated. A system should be provided',
  CONCEPT_DEPRECATED_IN_VALUESET:
    "The presence of the concept '{1}' in the system '{0}' in the value set {3} is marked with a status of {2} and its use should be reviewed",
  DEPRECATED_CONCEPT_FOUND: "The concept '{1}' is {0} and its use should be reviewed",
  Display_Name_Not_Fixed_use_Supplement:
    "The display name '{0}' is not a known display name for {1}#{2}. Known display is {3} (for the language(s) '{4}'). Use a supplement to define displays for user assigned codes",
  Display_Name_for__should_be_one_of__instead_of: {
    one: "Wrong Display Name '{4}' for {1}#{2}. Valid display is {3} (for the language(s) '{5}')",
    other: "Wrong Display Name '{4}' for {1}#{2}. Valid display is one of {0} choices: {3} (for the language(s) '{5}')",
  },
  Display_Name_WS_for__should_be_one_of__instead_of: {
    one: "Wrong whitespace in Display Name '{4}' for {1}#{2}. Valid display is {3} (for the language(s) '{5}')",
    other:
      "Wrong whitespace in Display Name '{4}' for {1}#{2}. Valid display is one of {0} choices: {3} (for the language(s) '{5}')",
  },
  INACTIVE_CONCEPT_FOUND: "The concept '{1}' has a status of {0} and its use should be reviewed",
  INACTIVE_CONCEPT_FOUND_ADD: "The concept '{1}' has a status of {0} and {2} and its use should be reviewed",
  INACTIVE_DISPLAY_FOUND:
    "'{0}' is no longer considered a correct display for code '{1}' (status = {3}). The correct display is one of \"{2}\".",
  INVALID_DISPLAY_NAME: "Invalid displayLanguage: '{0}'",
  MSG_DEPRECATED: 'Reference to deprecated {2} {0}',
  MSG_DRAFT: 'Reference to draft {2} {0}',
  MSG_EXPERIMENTAL: 'Reference to experimental {2} {0}',
  MSG_RETIRED: 'Reference to retired {2} {0}',
  MSG_WITHDRAWN: 'Reference to withdrawn {2} {0}',
  NO_VALID_DISPLAY_AT_ALL: "Cannot validate display Name '{0}' for {1}#{2}: No displays are known",
  NO_VALID_DISPLAY_FOUND_NONE_FOR_LANG_ERR:
    "Wrong Display Name '{0}' for {1}#{2}. There are no valid display names found for language(s) '{3}'. Default display is '{4}'",
  NO_VALID_DISPLAY_FOUND_NONE_FOR_LANG_OK:
    "There are no valid display names found for the code {1}#{2} for language(s) '{3}'. The display is '{0}' which is a valid display for the default language",
  None_of_the_provided_codes_are_in_the_value_set_one: "The provided code {2} was not found in the value set '{1}'",
  STATUS_CODE_WARNING_CODE: "The concept '{1}' is valid but is {0}",
  Terminology_TX_System_Relative: 'Coding.system must be an absolute reference, not a local reference',
  Terminology_TX_System_ValueSet2: "The Coding references a value set, not a code system ('{0}')",
  TX_GENERAL_CC_ERROR_MESSAGE: "No valid coding was found for the value set '{0}'",
  UCUM_CANONICAL_MISMATCH: 'Code {0} has canonical form {1}, not {2} as required',
  UCUM_INVALID_EXPRESSION: "Error processing unit '{0}': {1}",
  UCUM_UNKNOWN_UNIT: "The unit '{0}' is unknown at character {1}",
  TRANSLATE_NO_MATCH: 'No translations found for {0}',
  TRANSLATE_TOO_COSTLY: 'The translation gives more than {0} matches; the request is too costly to answer',
  TRANSLATE_NO_MAP: 'No translations found for {0} (no concept map applies)',
  TRANSLATE_MAP_CHAIN_TOO_DEEP: 'Concept maps refer to each other more than {0} deep (at {1})',
  UNABLE_TO_HANDLE_SYSTEM_FILTER_WITH_NO_VALUE: 'The system {0} filter with property = {1}, op = {2} has no value',
  UNABLE_TO_INFER_CODESYSTEM: "The System URI could not be determined for the code '{0}' in the ValueSet '{1}'",
  Unable_to_resolve_system__value_set_has_multiple_matches:
    "The System URI could not be determined for the code '{0}' in the ValueSet '{1}': value set expansion has multiple matches: [{2}]",
  Unable_to_resolve_value_Set_: "A definition for the value Set '{0}' could not be found",
  LOOKUP_UNKNOWN_CODE: "Unable to find code '{0}' in {1}",
  Unknown_Code_in: "Unknown code '{0}' in the CodeSystem '{1}'",
  Unknown_Code_in_Version: "Unknown code '{0}' in the CodeSystem '{1}' version '{2}'",
  UNKNOWN_CODE_IN_FRAGMENT:
    "Unknown Code '{0}' in the CodeSystem '{1}' version '{2}' - note that the code system is labeled as a fragment, so the code may be valid in some other fragment",
  UNKNOWN_CODESYSTEM: "A definition for CodeSystem '{0}' could not be found, so the code cannot be validated",
  UNKNOWN_CODESYSTEM_LOOKUP: "A definition for CodeSystem '{0}' could not be found, so the code cannot be looked up",
  UNKNOWN_CODESYSTEM_SUBSUMES: "A definition for CodeSystem '{0}' could not be found, so subsumption cannot be tested",
  UNKNOWN_CODESYSTEM_EXP: "A definition for CodeSystem '{0}' could not be found, so the value set cannot be expanded",
  UNKNOWN_CODESYSTEM_VERSION:
    "A definition for CodeSystem '{0}' version '{1}' could not be found, so the code cannot be validated. Valid versions: {2}",
  UNKNOWN_CODESYSTEM_VERSION_EXP:
    "A definition for CodeSystem '{0}' version '{1}' could not be found, so the value set cannot be expanded. Valid versions: {2}",
  UNKNOWN_CODESYSTEM_VERSION_EXP_NONE:
    "A definition for CodeSystem '{0}' version '{1}' could not be found, so the value set cannot be expanded. No versions of this code system are known",
  UNKNOWN_CODESYSTEM_VERSION_LOOKUP:
    "A definition for CodeSystem '{0}' version '{1}' could not be found, so the code cannot be looked up. Valid versions: {2}",
  UNKNOWN_CODESYSTEM_VERSION_LOOKUP_NONE:
    "A definition for CodeSystem '{0}' version '{1}' could not be found, so the code cannot be looked up. No versions of this code system are known",
  UNKNOWN_CODESYSTEM_VERSION_SUBSUMES:
    "A definition for CodeSystem '{0}' version '{1}' could not be found, so subsumption cannot be tested. Valid versions: {2}",
  UNKNOWN_CODESYSTEM_VERSION_SUBSUMES_NONE:
    "A definition for CodeSystem '{0}' version '{1}' could not be found, so subsumption cannot be tested. No versions of this code system are known",
  UNKNOWN_CODESYSTEM_VERSION_NONE:
    "A definition for CodeSystem '{0}' version '{1}' could not be found, so the code cannot be validated. No versions of this code system are known",
  UNKNOWN_CODESYSTEM_CODING_NOT_CHECKED:
    "A definition for CodeSystem '{0}' could not be found, so the coding could not be checked; another coding in the CodeableConcept is valid",
  VALUESET_CIRCULAR_REFERENCE: 'Found a circularity pointing to {0} processing ValueSet with pathway [{1}]',
  VALUESET_SUPPLEMENT_MISSING: 'Required supplement not found: {0}',
  VALUESET_IMPORTS_TOO_DEEP:
    "The value set '{0}' imports value sets more than {1} deep; the request is too costly to answer",
  VALUESET_TOO_COSTLY: "The value set '{0}' expansion has too many codes to produce (>{1})",
  VALUESET_VALUE_MISMATCH:
    "The code system '{0}' version '{1}' in the ValueSet include is different to the one in the value ('{2}')",
  VALUESET_VALUE_MISMATCH_CHANGED:
    "The code system '{0}' version '{1}' resulting from the version '{2}' in the ValueSet include is different to the one in the value ('{3}')",
  VALUESET_VALUE_MISMATCH_DEFAULT:
    "The code system '{0}' version '{1}' for the versionless include in the ValueSet include is different to the one in the value ('{3}')",
  VALUESET_VERSION_CHECK:
    "The version '{1}' is not allowed for system '{0}': required to be '{2}' by a version-check parameter",
  VS_COMPARE_DISJOINT: 'No shared codes between the value sets {0} and {1}',
  VS_COMPARE_EMPTY: 'Both the value sets {0} and {1} are empty',
  VS_COMPARE_FAILED: 'Unable to compare {0} and {1}: This expansion failed: {2}',
  VS_COMPARE_OVERLAPPING: "Both value sets {0} and {1} contain the codes the other doesn't, but there is some overlap",
  VS_COMPARE_SAME: 'The value sets {0} and {1} contain the same codes',
  VS_COMPARE_SUBSET: 'The valueSet {0} is a sub-set of the valueSet {1}',
  VS_COMPARE_SUPERSET: 'The valueSet {0} is a super-set of the valueSet {1}',
  VS_EXP_IMPORT_UNK_PINNED: "Unable to find included value set '{0}' version '{1}'",
  FILTER_NOT_UNDERSTOOD: 'The filter "{0} {1} {2}" from the value set {3} was not understood in the context of {4}',
  LOCKED_DATE_NOT_SUPPORTED: 'Cannot process ValueSet {0} due to the presence of a lockedDate on the compose',
} as const;

export type MessageId = keyof typeof MESSAGES;

type Entry = string | { one: string; other: string };

export function message(id: MessageId, ...args: (string | number | undefined)[]): string {
  const entry: Entry = MESSAGES[id];
  const template = typeof entry === 'string' ? entry : Number(args[0]) === 1 ? entry.one : entry.other;
  let text = '';
  for (const part of partsOf(template)) text += typeof part === 'string' ? part : String(args[part] ?? '');
  return text;
}

/** A template split once into its text and the argument numbers between (messages are written on every miss). */
const templateParts = new Map<string, (string | number)[]>();

function partsOf(template: string): (string | number)[] {
  let parts = templateParts.get(template);
  if (!parts) {
    parts = template.split(/\{(\d+)\}/).map((piece, i) => (i % 2 === 1 ? Number(piece) : piece));
    templateParts.set(template, parts);
  }
  return parts;
}
