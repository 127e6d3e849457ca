import type { CodeableConcept, Coding, ConceptMap, Resource } from 'fhir/r4';
import { fhirError } from '../../fhir/errors';
import { TypedValue } from '../../fhir/parameters';
import type { Resolver } from '../../terminology/service';
import type { AppServices } from '../../services';
import { defineOperation, targetOf, type OperationContext } from '../operation';
import { terminologySession, terminologyAnswerToken, withTerminologyErrors } from '../terminology-support';

/** ConceptMap/$translate, under its R4 names and the R5 names the HL7 ecosystem sends. */
export interface ConceptMapTranslateInput {
  url?: string;
  conceptMap?: ConceptMap;
  conceptMapVersion?: string;
  code?: string;
  system?: string;
  version?: string;
  source?: string;
  coding?: Coding;
  codeableConcept?: CodeableConcept;
  target?: string;
  targetsystem?: string;
  dependency?: { element?: string; concept?: CodeableConcept }[];
  reverse?: boolean;
  sourceCode?: string;
  sourceSystem?: string;
  sourceVersion?: string;
  sourceCoding?: Coding;
  sourceCodeableConcept?: CodeableConcept;
  sourceScope?: string;
  targetScope?: string;
  targetSystem?: string;
  targetCode?: string;
  targetCoding?: Coding;
  targetCodeableConcept?: CodeableConcept;
  'tx-resource'?: Resource[];
}

interface MatchOutput {
  equivalence: string;
  concept: Coding;
  source?: TypedValue;
  originMap?: string;
  product?: { element?: string; concept: Coding }[];
}

export const conceptMapTranslate = defineOperation<
  AppServices,
  ConceptMapTranslateInput,
  { result: boolean; message?: string; match: MatchOutput[] }
>({
  definition: 'http://hl7.org/fhir/OperationDefinition/ConceptMap-translate',
  answerToken: terminologyAnswerToken,
  handle: (input, ctx) =>
    withTerminologyErrors(async () => {
      const terminology = await terminologySession(input, ctx, 'translate');
      const reverseR5 =
        input.targetCode !== undefined || input.targetCoding !== undefined || input.targetCodeableConcept !== undefined;
      const reverse = reverseR5 || input.reverse === true;
      const codings = reverseR5 ? targetCodings(input) : sourceCodings(input);
      if (codings.length === 0)
        throw fhirError('ERR_PARAM_MISSING', {
          name: 'code and system (or coding, codeableConcept, sourceCode, targetCode)',
        });
      // Forwards the answer is in the target system; in reverse, R5 names the source system to answer in.
      const resultSystem = reverseR5 ? input.sourceSystem : (input.targetSystem ?? input.targetsystem);
      const answer = terminology.translate({
        codings,
        reverse,
        maps: chosenMaps(input, ctx, terminology.resolver),
        resultSystem,
        dependencies: input.dependency ?? [],
        sourceScope: input.sourceScope ?? input.source,
        targetScope: input.targetScope ?? input.target,
      });
      return {
        result: answer.result,
        message: answer.message,
        match: answer.matches.map((m) => ({
          equivalence: m.equivalence,
          concept: m.concept,
          source: m.source ? new TypedValue('Coding', m.source) : undefined,
          originMap: m.originMap,
          product: m.product,
        })),
      };
    }),
});

function sourceCodings(input: ConceptMapTranslateInput): Coding[] {
  const concept = input.codeableConcept ?? input.sourceCodeableConcept;
  if (concept) return concept.coding ?? [];
  const coding = input.coding ?? input.sourceCoding;
  if (coding) return [coding];
  const code = input.code ?? input.sourceCode;
  if (code === undefined) return [];
  const system = input.system ?? input.sourceSystem;
  const version = input.version ?? input.sourceVersion;
  return [{ system, code, ...(version ? { version } : {}) }];
}

function targetCodings(input: ConceptMapTranslateInput): Coding[] {
  if (input.targetCodeableConcept) return input.targetCodeableConcept.coding ?? [];
  if (input.targetCoding) return [input.targetCoding];
  return [{ system: input.targetSystem, code: input.targetCode }];
}

/** The map named (inline, by url, or the instance), or undefined for "every map that fits". */
function chosenMaps(
  input: ConceptMapTranslateInput,
  ctx: OperationContext<AppServices>,
  resolver: Resolver,
): ConceptMap[] | undefined {
  if (input.conceptMap) return [input.conceptMap];
  if (input.url) {
    const [url, pinned] = input.url.split('|');
    const version = input.conceptMapVersion ?? pinned;
    const found = resolver.conceptMap(url, version);
    if (!found) throw fhirError('ERR_TX_CONCEPTMAP_UNKNOWN', { url: version ? `${url}|${version}` : url });
    return [found];
  }
  const target = targetOf<ConceptMap>(ctx, 'ConceptMap');
  return target ? [target] : undefined;
}
