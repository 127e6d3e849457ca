import type { OperationOutcome, OperationOutcomeIssue } from 'fhir/r4';
import { fhirError, isFhirError, type FhirError } from './errors';

export const FHIR_JSON = 'application/fhir+json; charset=utf-8';

export function outcomeOf(issues: OperationOutcomeIssue[]): OperationOutcome {
  return { resourceType: 'OperationOutcome', issue: issues };
}

export function informational(text: string): OperationOutcome {
  return outcomeOf([{ severity: 'information', code: 'informational', details: { text } }]);
}

/** Any thrown value as a FhirError; what is not one already becomes the catalogue's 500. */
export function asFhirError(err: unknown): FhirError {
  return isFhirError(err) ? err : fhirError('ERR_SERVER_INTERNAL', {});
}
