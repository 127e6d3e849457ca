import type { Parameters, Resource } from 'fhir/r4';
import { asFhirError } from '../../fhir/outcome';
import type { OperationInput } from '../../fhir/parameters';
import type { AppServices } from '../../services';
import { defineOperation } from '../operation';
import { terminologyAnswerToken } from '../terminology-support';

/**
 * ValueSet/$batch-validate-code: several $validate-code calls in one request. Each validation
 * is run through ValueSet/$validate-code itself (same checks, same answers), with the outer
 * parameters as defaults; one that cannot be performed answers its OperationOutcome in its place
 * and the others still run.
 */
export interface BatchValidateInput extends OperationInput {
  validation: Parameters[];
}

export const valueSetBatchValidateCode = defineOperation<AppServices, BatchValidateInput, { validation: Resource[] }>({
  definition: 'urn:fhir-tx-server:OperationDefinition:ValueSet-batch-validate-code',
  answerToken: terminologyAnswerToken,
  handle: async (input, ctx) => {
    const { validation, ...shared } = input;
    const answers: Resource[] = [];
    for (const body of validation) {
      try {
        answers.push(await ctx.invoke('validate-code', body, shared));
      } catch (err) {
        answers.push(asFhirError(err).outcome);
      }
    }
    return { validation: answers };
  },
});
