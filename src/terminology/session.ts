import type { Coding, ValueSet, ValueSetExpansionContains } from 'fhir/r4';
import { compareValueSets, type CompareResult } from './compare';
import { expandValueSet } from './expand';
import { INTERNAL_LIMIT, type ExpandOptions } from './expansion/options';
import { TerminologyError } from './issues';
import { lookupCode, type LookupRequest, type LookupResult } from './lookup';
import { isEnumeration } from './membership/checker';
import type { ValidationResult } from './membership/state';
import {
  systemsDrawnOn,
  undecidableSystems,
  type DrawnOnMemo,
  type MembershipVerdict,
  type UndecidableQuestion,
} from './membership/undecidable';
import { TxParams, type TxParamsInput } from './params';
import type { Resolver } from './resolver';
import { subsumes, type SubsumptionOutcome } from './subsumes';
import { translate, type TranslateRequest, type TranslateResult } from './translate';
import {
  codedValue,
  codingWithoutSystem,
  validateInCodeSystem,
  validateInValueSet,
  type CodedInputs,
  type CodedValue,
  type EngineContext,
} from './validate-code';

/**
 * One caller's use of the engine: the resolver over what it may see, the terminology parameters
 * of its request and its time budget, built here once (TerminologyService.session) so no caller
 * assembles the engine's context itself. Each method is one engine call.
 */
export class TerminologySession {
  private readonly engine: EngineContext;

  constructor(
    readonly resolver: Resolver,
    params: TxParams,
    private readonly checkBudget: () => void,
  ) {
    this.engine = { resolver, params, checkBudget };
  }

  /** The same content and budget under other parameters (a binding check's inferSystem, say). */
  withParams(input: TxParamsInput): TerminologySession {
    return new TerminologySession(this.resolver, TxParams.from(input), this.checkBudget);
  }

  /** The value to validate from an operation's inputs, in the order the operation defines (undefined: none). */
  codedValue(input: CodedInputs): CodedValue | undefined {
    return codedValue(input, this.engine.params);
  }

  validateInValueSet(valueSet: ValueSet, coded: CodedValue): ValidationResult {
    return validateInValueSet(valueSet, coded, this.engine);
  }

  validateInCodeSystem(system: string, version: string | undefined, coded: CodedValue): ValidationResult {
    return validateInCodeSystem(system, version, coded, this.engine);
  }

  /** The answer for a coded value that names no code system at all. */
  codingWithoutSystem(coded: CodedValue): ValidationResult {
    return codingWithoutSystem(coded);
  }

  expand(valueSet: ValueSet, options: ExpandOptions): Promise<ValueSet> {
    return expandValueSet(valueSet, options, this.engine);
  }

  lookup(request: LookupRequest): LookupResult {
    return lookupCode(request, this.engine);
  }

  subsumes(system: string, version: string | undefined, codeA: string, codeB: string): SubsumptionOutcome {
    return subsumes(system, version, codeA, codeB, this.engine);
  }

  translate(request: TranslateRequest): TranslateResult {
    return translate(request, this.resolver);
  }

  compare(first: ValueSet, second: ValueSet, limit: number): Promise<CompareResult> {
    return compareValueSets(first, second, this.engine, limit);
  }

  /** The one rule for undecidable membership (membership/undecidable.ts), for this session's content. */
  undecidableSystems(valueSet: ValueSet, question: UndecidableQuestion, memo?: DrawnOnMemo): string[] {
    return undecidableSystems(valueSet, question, this.resolver, memo);
  }

  /** The systems a value set draws on (through its imports; `*` when an import cannot be found). */
  systemsDrawnOn(valueSet: ValueSet, memo?: DrawnOnMemo): Set<string> {
    return systemsDrawnOn(valueSet, this.resolver, memo);
  }

  /**
   * Whether a coding is in the value set, as $validate-code decides it under this session's
   * parameters, with "not a member" turned into "undecidable" by the one rule.
   */
  membership(valueSet: ValueSet, coding: Coding): MembershipVerdict {
    const coded: CodedValue = { concept: { coding: [coding] }, mode: 'coding', issuePath: 'Coding' };
    const result = this.validateInValueSet(valueSet, coded);
    if (result.result) return 'member';
    const membershipOnly = this.engine.params.membershipOnly;
    const reported = membershipOnly
      ? []
      : [...(result['x-unknown-system'] ?? []), ...(result['x-caused-by-unknown-system'] ?? [])];
    const undecidable = this.undecidableSystems(valueSet, { systems: [coding.system], reported, membershipOnly });
    return undecidable.length > 0 ? 'undecidable' : 'not-member';
  }

  /**
   * The codes of a value set as cql-execution wants them: its expansion (abstract codes left out);
   * or, when it cannot be expanded here, the codes it lists by hand, which by the one rule need no
   * content to decide membership; otherwise why membership is undecidable.
   */
  async memberCodes(valueSet: ValueSet): Promise<{ codes: Coding[] } | { undecidable: string }> {
    let expanded: ValueSet;
    try {
      expanded = await this.expand(valueSet, { designations: [], properties: [], limit: INTERNAL_LIMIT });
    } catch (err) {
      if (!(err instanceof TerminologyError)) throw err;
      const listed = listedCodes(valueSet);
      return listed ? { codes: listed } : { undecidable: err.issue.text };
    }
    const codes: Coding[] = [];
    const walk = (items: ValueSetExpansionContains[] | undefined) => {
      for (const item of items ?? []) {
        if (item.code !== undefined && !item.abstract)
          codes.push({ code: item.code, system: item.system, version: item.version, display: item.display });
        walk(item.contains);
      }
    };
    walk(expanded.expansion?.contains);
    return { codes };
  }

  /**
   * Search's :below/:above: a test of whether a code is under (or over) `code` in the system's
   * hierarchy; undefined when the system's content is not held here.
   */
  hierarchy(system: string, code: string, direction: 'below' | 'above'): ((candidate: string) => boolean) | undefined {
    const cs = this.resolver.codeSystem(system);
    if (!cs || cs.content === 'not-present') return undefined;
    const provider = this.resolver.provider(cs);
    const root = provider.locate(code);
    if (!root) return () => false;
    return (candidate) => {
      const node = provider.locate(candidate);
      if (!node) return false;
      return direction === 'below' ? provider.subsumes(root, node) : provider.subsumes(node, root);
    };
  }
}

/** The codes a value set lists by hand (`include.concept` only: no filters, imports or excludes). */
function listedCodes(valueSet: ValueSet): Coding[] | undefined {
  const compose = valueSet.compose;
  if (!compose?.include.length || compose.exclude?.length) return undefined;
  if (!compose.include.every((i) => i.system && isEnumeration(i))) return undefined;
  return compose.include.flatMap((i) =>
    (i.concept ?? []).map((c) => ({ code: c.code, system: i.system, version: i.version, display: c.display })),
  );
}
