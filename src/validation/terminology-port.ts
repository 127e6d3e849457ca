import type { Coding, ValueSet } from 'fhir/r4';
import { TxParams } from '../terminology/params';
import type { Resolver } from '../terminology/resolver';
import type { TerminologyService } from '../terminology/service';
import { codedValue, validateInValueSet } from '../terminology/validate-code';

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
  const memos = new Map<string, { token: string; verdicts: Map<string, BindingVerdict>; systems: Map<string, Set<string>> }>();
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
      let resolver: Resolver | undefined;
      const out: BindingVerdict[] = [];
      for (const check of checks) {
        const key = verdictKey(check);
        let verdict = verdicts.get(key);
        if (!verdict) {
          resolver ??= await service.resolver(project);
          verdict = checkOne(check, resolver, systems, options.deadline);
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

function checkOne(check: BindingCheck, resolver: Resolver, systems: Map<string, Set<string>>, deadline: number): BindingVerdict {
  const [url, version] = check.valueSet.split('|');
  const valueSet = resolver.valueSet(url, version) ?? (version ? resolver.valueSet(url) : undefined);
  if (!valueSet) return { status: 'unchecked', message: `The value set '${check.valueSet}' is not known to this server, so the code could not be checked` };
  const drawnOn = systemsOf(valueSet, resolver, systems);
  // A bare code takes the system of a value set drawn from one system (the engine can only infer
  // a system it holds); displays are not sent, so only membership is judged.
  const only = drawnOn.size === 1 && !drawnOn.has('*') ? [...drawnOn][0] : undefined;
  const bare = check.kind === 'code' && !only;
  const params = TxParams.from({ inferSystem: bare });
  const first = check.codings[0] ?? {};
  const coded = codedValue(
    check.kind === 'CodeableConcept'
      ? { codeableConcept: { coding: check.codings } }
      : check.kind === 'Coding'
        ? { coding: first }
        : { code: first.code, system: only },
    params,
  );
  if (!coded) return { status: 'unchecked', message: 'There is no code to check' };
  const ctx = {
    resolver,
    params,
    checkBudget: () => {
      if (Date.now() > deadline) throw new Error('the time budget of the validation is spent');
    },
  };
  try {
    const result = validateInValueSet(valueSet, coded, ctx);
    if (result.result) return { status: 'valid' };
    const unknown = [...(result['x-unknown-system'] ?? []), ...(result['x-caused-by-unknown-system'] ?? [])];
    const uncheckable = unknown.filter((s) => drawnOn.has(s) || drawnOn.has('*'));
    const systemsUsed = check.kind === 'code' ? [only] : check.codings.map((c) => c.system);
    const notPresent = systemsUsed.filter((s): s is string => !!s && contentNotPresent(s, resolver) && (drawnOn.has(s) || drawnOn.has('*')));
    const cannot = [...new Set([...uncheckable, ...notPresent])];
    if (cannot.length > 0) {
      return { status: 'unchecked', message: `The code system ${cannot.map((s) => `'${s}'`).join(', ')} is not held by this server, so the code could not be checked against '${check.valueSet}'` };
    }
    return { status: 'invalid', message: result.message ?? `The code is not in the value set '${check.valueSet}'` };
  } catch (err) {
    return { status: 'unchecked', message: `The value set '${check.valueSet}' could not be evaluated: ${(err as Error).message}` };
  }
}

function contentNotPresent(system: string, resolver: Resolver): boolean {
  return resolver.codeSystem(system)?.content === 'not-present';
}

/**
 * The code systems a value set draws on (through its imports too): a code of a system it does
 * not draw on is simply not in it, even when this server does not hold that system. `*` stands
 * for "cannot tell" (an import that cannot be found).
 */
function systemsOf(valueSet: ValueSet, resolver: Resolver, memo: Map<string, Set<string>>, depth = 0): Set<string> {
  const key = `${valueSet.url}|${valueSet.version ?? ''}`;
  const known = memo.get(key);
  if (known) return known;
  const found = new Set<string>();
  memo.set(key, found);
  for (const set of [...(valueSet.compose?.include ?? []), ...(valueSet.compose?.exclude ?? [])]) {
    if (set.system) found.add(set.system);
    for (const imported of set.valueSet ?? []) {
      const [url, version] = imported.split('|');
      const other = depth < 8 ? resolver.valueSet(url, version) : undefined;
      if (!other) found.add('*');
      else for (const s of systemsOf(other, resolver, memo, depth + 1)) found.add(s);
    }
  }
  for (const c of valueSet.expansion?.contains ?? []) if (c.system) found.add(c.system);
  return found;
}
