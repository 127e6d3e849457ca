import type { CodeableConcept, Coding, Resource, ValueSet } from 'fhir/r4';
import { fhirError } from '../../fhir/errors';
import { message, type Resolver, type TxParamsInput, type ValidationResult } from '../../terminology/service';
import type { AppServices } from '../../services';
import { defineOperation, targetOf, type OperationContext } from '../operation';
import { terminologySession, terminologyAnswerToken, withTerminologyErrors } from '../terminology-support';

/** ValueSet/$validate-code: is this code (Coding, CodeableConcept) in this value set? */
export interface ValueSetValidateCodeInput extends TxParamsInput {
  url?: string;
  context?: string;
  valueSet?: ValueSet;
  valueSetVersion?: string;
  code?: string;
  system?: string;
  systemVersion?: string;
  display?: string;
  coding?: Coding;
  codeableConcept?: CodeableConcept;
  date?: string;
  'tx-resource'?: Resource[];
}

export const valueSetValidateCode = defineOperation<AppServices, ValueSetValidateCodeInput, ValidationResult>({
  definition: 'http://hl7.org/fhir/OperationDefinition/ValueSet-validate-code',
  answerToken: terminologyAnswerToken,
  handle: (input, ctx) =>
    withTerminologyErrors(async () => {
      const terminology = await terminologySession(input, ctx, 'validate-code');
      const valueSet = targetValueSet(input, ctx, terminology.resolver, 'validate-code');
      const coded = terminology.codedValue({
        code: input.code,
        system: input.system,
        version: input.systemVersion,
        display: input.display,
        coding: input.coding,
        codeableConcept: input.codeableConcept,
      });
      if (!coded) throw fhirError('ERR_TX_NOTHING_TO_VALIDATE', {});
      return terminology.validateInValueSet(valueSet, coded);
    }),
});

/**
 * The value set: given inline, named by url (url|version, valueSetVersion, or a
 * default-valueset-version rule), or the instance the operation was invoked on.
 */
export function targetValueSet(
  input: { url?: string; valueSet?: ValueSet; valueSetVersion?: string; 'default-valueset-version'?: string[] },
  ctx: OperationContext<AppServices>,
  resolver: Resolver,
  /** The operation asking, for the message when there is no value set. */
  operation: string,
): ValueSet {
  if (input.valueSet) return input.valueSet;
  if (input.url) {
    const [url, pinned] = input.url.split('|');
    const stated = input.valueSetVersion ?? pinned;
    const rule = (input['default-valueset-version'] ?? []).map((c) => c.split('|')).find(([u]) => u === url)?.[1];
    const version = stated ?? rule;
    const found = resolver.valueSet(url, version);
    if (found) return found;
    const named = version ? `${url}|${version}` : url;
    if (resolver.valueSet(url)) throw txNotFound('ERR_TX_VALUESET_VERSION_UNKNOWN', named);
    throw txNotFound('ERR_TX_VALUESET_UNKNOWN', named);
  }
  const target = targetOf<ValueSet>(ctx, 'ValueSet');
  if (target) return target;
  throw fhirError('ERR_TX_NO_VALUESET', { code: operation });
}

/** The not-found answers, with the tx-issue-type coding and message id the ecosystem expects. */
function txNotFound(code: 'ERR_TX_VALUESET_UNKNOWN' | 'ERR_TX_VALUESET_VERSION_UNKNOWN', url: string) {
  const text = message('Unable_to_resolve_value_Set_', url);
  return fhirError(
    code,
    { url },
    {
      issues: [
        {
          extension: [
            {
              url: 'http://hl7.org/fhir/StructureDefinition/operationoutcome-message-id',
              valueString: 'Unable_to_resolve_value_Set_',
            },
          ],
          severity: 'error',
          code: code === 'ERR_TX_VALUESET_UNKNOWN' ? 'invalid' : 'not-found',
          details: {
            coding: [{ system: 'http://hl7.org/fhir/tools/CodeSystem/tx-issue-type', code: 'not-found' }],
            text,
          },
        },
      ],
    },
  );
}
