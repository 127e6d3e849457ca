import { codeSystemProvider } from './providers/select';
import { TerminologyError, txIssue } from './issues';
import type { EngineContext } from './validate-code';

/** CodeSystem/$subsumes as the engine sees it: how two codes of one code system relate. */

export type SubsumptionOutcome = 'equivalent' | 'subsumes' | 'subsumed-by' | 'not-subsumed';

export function subsumes(
  system: string,
  version: string | undefined,
  codeA: string,
  codeB: string,
  ctx: EngineContext,
): SubsumptionOutcome {
  const cs = codeSystemProvider(system, version, ctx, 'subsumes');
  const locate = (code: string, name: string) => {
    const found = cs.locate(code);
    if (found) return found;
    const id = cs.version ? 'Unknown_Code_in_Version' : 'Unknown_Code_in';
    throw new TerminologyError(txIssue(id, [code, cs.url, cs.version], { path: name, code: 'not-found' }), 404);
  };
  const a = locate(codeA, 'codeA');
  const b = locate(codeB, 'codeB');
  if (a === b) return 'equivalent';
  if (cs.subsumes(a, b)) return 'subsumes';
  if (cs.subsumes(b, a)) return 'subsumed-by';
  return 'not-subsumed';
}
