import type { CodeableConcept, CodeSystem, Coding, Resource } from 'fhir/r4';
import { fhirError } from '../../fhir/errors';
import type { TxParamsInput, ValidationResult } from '../../terminology/service';
import type { AppServices } from '../../services';
import { defineOperation, targetOf } from '../operation';
import { terminologySession, terminologyAnswerToken, withTerminologyErrors } from '../terminology-support';

/** CodeSystem/$validate-code: is this code (Coding, CodeableConcept) defined by this code system? */
export interface CodeSystemValidateCodeInput extends TxParamsInput {
  url?: string;
  codeSystem?: CodeSystem;
  code?: string;
  version?: string;
  display?: string;
  coding?: Coding;
  codeableConcept?: CodeableConcept;
  date?: string;
  'tx-resource'?: Resource[];
}

export const codeSystemValidateCode = defineOperation<AppServices, CodeSystemValidateCodeInput, ValidationResult>({
  definition: 'http://hl7.org/fhir/OperationDefinition/CodeSystem-validate-code',
  answerToken: terminologyAnswerToken,
  handle: (input, ctx) =>
    withTerminologyErrors(async () => {
      // A code system given inline is used like a tx-resource: for this request only.
      const inline = input.codeSystem ? [input.codeSystem] : [];
      const terminology = await terminologySession(
        { ...input, 'tx-resource': [...inline, ...(input['tx-resource'] ?? [])] },
        ctx,
        'validate-code',
      );
      const target = targetOf<CodeSystem>(ctx, 'CodeSystem');
      const named = input.url ?? input.codeSystem?.url ?? target?.url;
      const [namedUrl, namedVersion] = named?.split('|') ?? [];
      const coded = terminology.codedValue({
        code: input.code,
        system: namedUrl,
        version: input.version ?? namedVersion,
        display: input.display,
        coding: input.coding,
        codeableConcept: input.codeableConcept,
      });
      if (!coded) throw fhirError('ERR_TX_NOTHING_TO_VALIDATE', {});
      const first = coded.concept.coding?.find((c) => c.system) ?? {};
      const system = namedUrl ?? first.system;
      if (!system) return terminology.codingWithoutSystem(coded);
      const version =
        input.version ??
        namedVersion ??
        (namedUrl ? undefined : first.version) ??
        (target && !input.url ? target.version : undefined);
      return terminology.validateInCodeSystem(system, version, coded);
    }),
});
