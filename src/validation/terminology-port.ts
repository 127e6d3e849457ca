import type { Coding } from 'fhir/r4';
import type { DrawnOnMemo, TerminologyService, TerminologySession } from '../terminology/service';

/**
 * The one place validation calls the terminology engine: bindings of a resource, checked in one
 * batch, in-process. Each distinct (value set, coded value) is asked once; verdicts are kept
 * until the terminology content changes (the engine's state token), so the codes every
 * resource of a kind repeats (status, gender, units) are looked up once, not per resource.
 */

export interface BindingCheck {
  /** Canonical of the value set (`url|version` or `url`). */
  valueSet: string;
  /** A bare `code` takes its system from the value set; a Coding or CodeableConcept carries its own. */
  kind: 'code' | 'Coding' | 'CodeableConcept';
  codings: Coding[];
}

export type BindingVerdict =
  | { status: 'valid' }
  | { status: 'invalid'; message: string }
  /** The code could not be checked: a system or value set this server does not hold. */
  | { status: 'unchecked'; message: string };

export interface TerminologyPort {
  check(checks: readonly BindingCheck[], options: { deadline: number; project: string }): Promise<BindingVerdict[]>;
}

/** Verdicts kept at most; past that the memo starts again (the engine's own caches stay). */
const MAX_VERDICTS = 50_000;

export function terminologyPort(service: TerminologyService): TerminologyPort {
  // Per project: each sees its own terminology (and the system scope's).
  const memos = new Map<string, { token: string; verdicts: Map<string, BindingVerdict>; systems: DrawnOnMemo }>();
  return {
    async check(checks, options) {
      if (checks.length === 0) return [];
      const { project } = options;
      const now = await service.stateToken(project);
      let memo = memos.get(project);
      if (!memo || memo.token !== now || memo.verdicts.size > MAX_VERDICTS) {
        if (!memo && memos.size >= 100) memos.delete(memos.keys().next().value as string);
        memo = { token: now, verdicts: new Map(), systems: new Map() };
        memos.set(project, memo);
      }
      const { verdicts, systems } = memo;
      let session: TerminologySession | undefined;
      const out: BindingVerdict[] = [];
      for (const check of checks) {
        const key = verdictKey(check);
        let verdict = verdicts.get(key);
        if (!verdict) {
          session ??= await service.session({ project, checkBudget: budget(options.deadline) });
          verdict = checkOne(check, session, systems);
          verdicts.set(key, verdict);
        }
        out.push(verdict);
      }
      return out;
    },
  };
}

function verdictKey(check: BindingCheck): string {
  let key = `${check.valueSet}\u0001${check.kind}`;
  for (const c of check.codings) key += `\u0001${c.system ?? ''}\u0002${c.version ?? ''}\u0002${c.code ?? ''}`;
  return key;
}

function budget(deadline: number): () => void {
  return () => {
    if (Date.now() > deadline) throw new Error('the time budget of the validation is spent');
  };
}

function checkOne(check: BindingCheck, base: TerminologySession, systems: DrawnOnMemo): BindingVerdict {
  const [url, version] = check.valueSet.split('|');
  const valueSet = base.resolver.valueSet(url, version) ?? (version ? base.resolver.valueSet(url) : undefined);
  if (!valueSet)
    return {
      status: 'unchecked',
      message: `The value set '${check.valueSet}' is not known to this server, so the code could not be checked`,
    };
  // A bare code takes the system of a value set drawn from one system (the engine can only infer
  // a system it holds); displays are not sent, so only membership is judged.
  const drawnOn = base.systemsDrawnOn(valueSet, systems);
  const only = drawnOn.size === 1 && !drawnOn.has('*') ? [...drawnOn][0] : undefined;
  const bare = check.kind === 'code' && !only;
  const session = base.withParams({ inferSystem: bare });
  const first = check.codings[0] ?? {};
  const coded = session.codedValue(
    check.kind === 'CodeableConcept'
      ? { codeableConcept: { coding: check.codings } }
      : check.kind === 'Coding'
        ? { coding: first }
        : { code: first.code, system: only },
  );
  if (!coded) return { status: 'unchecked', message: 'There is no code to check' };
  try {
    const result = session.validateInValueSet(valueSet, coded);
    if (result.result) return { status: 'valid' };
    // The one rule for undecidable membership (the terminology service's), for a full validation.
    const cannot = session.undecidableSystems(
      valueSet,
      {
        systems: check.kind === 'code' ? [only] : check.codings.map((c) => c.system),
        reported: [...(result['x-unknown-system'] ?? []), ...(result['x-caused-by-unknown-system'] ?? [])],
        membershipOnly: false,
      },
      systems,
    );
    if (cannot.length > 0) {
      return {
        status: 'unchecked',
        message: `The code system ${cannot.map((s) => `'${s}'`).join(', ')} is not held by this server, so the code could not be checked against '${check.valueSet}'`,
      };
    }
    return { status: 'invalid', message: result.message ?? `The code is not in the value set '${check.valueSet}'` };
  } catch (err) {
    return {
      status: 'unchecked',
      message: `The value set '${check.valueSet}' could not be evaluated: ${(err as Error).message}`,
    };
  }
}
