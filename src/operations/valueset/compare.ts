import type { Resource, ValueSet } from 'fhir/r4';
import type { CompareResult } from '../../terminology/service';
import type { AppServices } from '../../services';
import { defineOperation } from '../operation';
import { terminologySession, terminologyAnswerToken, withTerminologyErrors } from '../terminology-support';
import { targetValueSet } from './validate-code';

/** ValueSet/$compare (tx ecosystem): how the codes of two value sets relate. */
export interface ValueSetCompareInput {
  thisUrl?: string;
  thisVersion?: string;
  thisValueSet?: ValueSet;
  otherUrl?: string;
  otherVersion?: string;
  otherValueSet?: ValueSet;
  diagnostics?: boolean;
  'tx-resource'?: Resource[];
}

export const valueSetCompare = defineOperation<AppServices, ValueSetCompareInput, CompareResult>({
  definition: 'urn:fhir-tx-server:OperationDefinition:ValueSet-compare',
  answerToken: terminologyAnswerToken,
  handle: (input, ctx) =>
    withTerminologyErrors(async () => {
      const terminology = await terminologySession(input, ctx, 'compare');
      const first = targetValueSet(
        { url: input.thisUrl, valueSetVersion: input.thisVersion, valueSet: input.thisValueSet },
        ctx,
        terminology.resolver,
        'compare',
      );
      const second = targetValueSet(
        { url: input.otherUrl, valueSetVersion: input.otherVersion, valueSet: input.otherValueSet },
        ctx,
        terminology.resolver,
        'compare',
      );
      return terminology.compare(first, second, ctx.services.config.expansionLimit);
    }),
});
