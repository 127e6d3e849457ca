import type { CodeSystem, Coding, Resource } from 'fhir/r4';
import { fhirError } from '../../fhir/errors';
import type { SubsumptionOutcome } from '../../terminology/service';
import type { AppServices } from '../../services';
import { defineOperation, targetOf } from '../operation';
import { terminologySession, terminologyAnswerToken, withTerminologyErrors } from '../terminology-support';

/** CodeSystem/$subsumes: whether code A subsumes code B, in one code system. */
export interface CodeSystemSubsumesInput {
  codeA?: string;
  codeB?: string;
  system?: string;
  version?: string;
  codingA?: Coding;
  codingB?: Coding;
  'tx-resource'?: Resource[];
}

export const codeSystemSubsumes = defineOperation<
  AppServices,
  CodeSystemSubsumesInput,
  { outcome: SubsumptionOutcome }
>({
  definition: 'http://hl7.org/fhir/OperationDefinition/CodeSystem-subsumes',
  answerToken: terminologyAnswerToken,
  handle: (input, ctx) =>
    withTerminologyErrors(async () => {
      const terminology = await terminologySession(input, ctx, 'subsumes');
      const target = targetOf<CodeSystem>(ctx, 'CodeSystem');
      const codeA = input.codingA?.code ?? input.codeA;
      const codeB = input.codingB?.code ?? input.codeB;
      if (codeA === undefined) throw fhirError('ERR_PARAM_MISSING', { name: 'codeA (or codingA)' });
      if (codeB === undefined) throw fhirError('ERR_PARAM_MISSING', { name: 'codeB (or codingB)' });
      const systems = new Set(
        [input.codingA?.system, input.codingB?.system, input.system, target?.url].filter((s): s is string => !!s),
      );
      if (systems.size > 1) {
        throw fhirError('ERR_PARAM_RULE', {
          message: `codeA and codeB must be in one code system, not ${[...systems].join(' and ')}`,
        });
      }
      const [system] = systems;
      if (!system) throw fhirError('ERR_PARAM_MISSING', { name: 'system' });
      const version = input.version ?? input.codingA?.version ?? input.codingB?.version ?? target?.version;
      return { outcome: terminology.subsumes(system, version, codeA, codeB) };
    }),
});
