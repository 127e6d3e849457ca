import type { CodeSystem, Coding, Resource } from 'fhir/r4';
import { fhirError } from '../../fhir/errors';
import { TypedValue } from '../../fhir/parameters';
import type { LookupResult, TxParamsInput } from '../../terminology/service';
import type { AppServices } from '../../services';
import { defineOperation, targetOf } from '../operation';
import { terminologySession, terminologyAnswerToken, withTerminologyErrors } from '../terminology-support';

/** CodeSystem/$lookup: what a code system says about one of its codes. */
export interface CodeSystemLookupInput extends TxParamsInput {
  code?: string;
  system?: string;
  version?: string;
  coding?: Coding;
  date?: string;
  property?: string[];
  'tx-resource'?: Resource[];
}

export type CodeSystemLookupOutput = Omit<LookupResult, 'property' | 'usedSupplements'> & {
  property: { code: string; value: TypedValue; description?: string }[];
  'used-supplement': string[];
};

export const codeSystemLookup = defineOperation<AppServices, CodeSystemLookupInput, CodeSystemLookupOutput>({
  definition: 'http://hl7.org/fhir/OperationDefinition/CodeSystem-lookup',
  answerToken: terminologyAnswerToken,
  handle: (input, ctx) =>
    withTerminologyErrors(async () => {
      const terminology = await terminologySession(input, ctx, 'lookup');
      const target = targetOf<CodeSystem>(ctx, 'CodeSystem');
      const code = input.coding?.code ?? input.code;
      const system = input.coding?.system ?? input.system ?? target?.url;
      const version = input.coding?.version ?? input.version ?? (input.system ? undefined : target?.version);
      if (code === undefined) throw fhirError('ERR_PARAM_MISSING', { name: 'code (or coding)' });
      if (!system) throw fhirError('ERR_PARAM_MISSING', { name: 'system (or coding.system)' });
      const found = terminology.lookup({ system, version, code, properties: input.property ?? [] });
      const { property, usedSupplements, ...rest } = found;
      return {
        ...rest,
        property: property.map((p) => ({
          code: p.code,
          value: new TypedValue(p.type, p.value),
          description: p.description,
        })),
        'used-supplement': usedSupplements,
      };
    }),
});
