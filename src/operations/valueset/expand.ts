import type { Resource, ValueSet } from 'fhir/r4';
import { fhirError } from '../../fhir/errors';
import type { TxParamsInput } from '../../terminology/service';
import type { AppServices } from '../../services';
import { defineOperation } from '../operation';
import { terminologySession, terminologyAnswerToken, withTerminologyErrors } from '../terminology-support';
import { targetValueSet } from './validate-code';

/** ValueSet/$expand: the members of a value set, paged, as a ValueSet with an expansion. */
export interface ValueSetExpandInput extends TxParamsInput {
  url?: string;
  valueSet?: ValueSet;
  valueSetVersion?: string;
  context?: string;
  contextDirection?: string;
  filter?: string;
  date?: string;
  offset?: number;
  count?: number;
  includeDesignations?: boolean;
  designation?: string[];
  includeDefinition?: boolean;
  excludeNested?: boolean;
  excludeNotForUI?: boolean;
  excludePostCoordinated?: boolean;
  property?: string[];
  'exclude-system'?: string[];
  'tx-resource'?: Resource[];
}

export const valueSetExpand = defineOperation<AppServices, ValueSetExpandInput, { return: ValueSet }>({
  definition: 'http://hl7.org/fhir/OperationDefinition/ValueSet-expand',
  answerToken: terminologyAnswerToken,
  handle: (input, ctx) => {
    // The definition types both as integer; a negative page is no page at all.
    for (const name of ['count', 'offset'] as const) {
      const value = input[name];
      if (value !== undefined && value < 0)
        throw fhirError('ERR_PARAM_VALUE', { name, type: 'integer of 0 or more', value: String(value) });
    }
    return withTerminologyErrors(async () => {
      const terminology = await terminologySession(input, ctx, 'expand');
      const valueSet = targetValueSet(input, ctx, terminology.resolver, 'expand');
      const configured = ctx.services.config.expansionLimit;
      // The HL7 suite (and clients protecting themselves) may ask for a lower limit.
      const asked = Number(ctx.headers['x-too-costly-threshold']);
      const limit = Number.isInteger(asked) && asked > 0 ? Math.min(asked, configured) : configured;
      const expanded = await terminology.expand(valueSet, {
        filter: input.filter,
        count: input.count,
        offset: input.offset,
        includeDesignations: input.includeDesignations,
        designations: input.designation ?? [],
        includeDefinition: input.includeDefinition,
        excludeNested: input.excludeNested,
        excludeNotForUI: input.excludeNotForUI,
        excludePostCoordinated: input.excludePostCoordinated,
        properties: input.property ?? [],
        limit,
        displayLanguage: input.displayLanguage,
      });
      return { return: expanded };
    });
  },
});
