import type { ValueSet, ValueSetComposeInclude } from 'fhir/r4';
import { filterOp } from './compose';
import { TerminologyError } from './issues';
import { message, type MessageId } from './messages';
import { ValueSetExpander } from './expansion/expander';
import type { Member } from './expansion/members';
import { canonicalOf } from './membership/state';
import { valueSetEnv, type EngineContext } from './validate-code';

/**
 * ValueSet/$compare (the tx ecosystem's operation): how the codes of two value sets relate.
 * The definitions are compared first, code system by code system; only when that cannot tell
 * are both value sets expanded and their members compared by system and code.
 */

export type CompareOutcome = 'same' | 'subset' | 'superset' | 'overlapping' | 'disjoint' | 'empty' | 'indeterminate';

export interface CompareResult {
  result: CompareOutcome;
  message: string;
  'performed-expansion': boolean;
  /** Codes in both, codes only in the other value set, codes only in this one (comma-separated). */
  'common-codes'?: string;
  'extra-codes'?: string;
  'missing-codes'?: string;
}

/** What the comparison found so far: codes only on this side, only on the other, on both. */
interface Findings {
  left: boolean;
  right: boolean;
  common: boolean;
  /** The definitions cannot tell: the expansions must. */
  undecided: boolean;
  codes?: CodeLists;
}

interface CodeLists {
  common: string[];
  extra: string[];
  missing: string[];
}

interface SystemIncludes {
  this: ValueSetComposeInclude[];
  other: ValueSetComposeInclude[];
  excluded: boolean;
}

/** `limit`: the largest expansion either value set may need (too-costly beyond: indeterminate). */
export async function compareValueSets(
  thisVs: ValueSet,
  otherVs: ValueSet,
  ctx: EngineContext,
  limit: number,
): Promise<CompareResult> {
  const names = [name(thisVs), name(otherVs)];
  const found = compareDefinitions(thisVs, otherVs, ctx);
  if (!found.undecided) return outcome(found, names, false);
  let expanded: Findings;
  try {
    expanded = await compareExpansions(thisVs, otherVs, ctx, limit);
  } catch (err) {
    if (!(err instanceof TerminologyError)) throw err;
    return {
      result: 'indeterminate',
      message: message('VS_COMPARE_FAILED', names[0], names[1], err.issue.text),
      'performed-expansion': true,
    };
  }
  return outcome(expanded, names, true);
}

function name(vs: ValueSet): string {
  return vs.url ? canonicalOf(vs) : '(unidentified)';
}

const MESSAGE_OF: Record<Exclude<CompareOutcome, 'indeterminate'>, MessageId> = {
  same: 'VS_COMPARE_SAME',
  subset: 'VS_COMPARE_SUBSET',
  superset: 'VS_COMPARE_SUPERSET',
  overlapping: 'VS_COMPARE_OVERLAPPING',
  disjoint: 'VS_COMPARE_DISJOINT',
  empty: 'VS_COMPARE_EMPTY',
};

function outcome(found: Findings, names: string[], expanded: boolean): CompareResult {
  let result: Exclude<CompareOutcome, 'indeterminate'>;
  if (expanded && !found.common && !found.left && !found.right) result = 'empty';
  else if (!found.common) result = 'disjoint';
  else if (!found.left && !found.right) result = 'same';
  else if (found.left && found.right) result = 'overlapping';
  else result = found.left ? 'superset' : 'subset';
  const answer: CompareResult = {
    result,
    message: message(MESSAGE_OF[result], names[0], names[1]),
    'performed-expansion': expanded,
  };
  // Expansions that agree need no lists; lists of concepts are shown whatever they found.
  const codes = found.codes;
  if (codes && !(expanded && result === 'same')) {
    if (codes.common.length > 0) answer['common-codes'] = codes.common.join(',');
    if (codes.extra.length > 0) answer['extra-codes'] = codes.extra.join(',');
    if (codes.missing.length > 0) answer['missing-codes'] = codes.missing.join(',');
  }
  return answer;
}

// ---------------------------------------------------------------------------------------------
// definitions

function compareDefinitions(thisVs: ValueSet, otherVs: ValueSet, ctx: EngineContext): Findings {
  const found: Findings = { left: false, right: false, common: false, undecided: false };
  const a = thisVs.compose;
  const b = otherVs.compose;
  if (!a || !b || a.inactive !== b.inactive) return { ...found, undecided: true };
  const bySystem = new Map<string, SystemIncludes>();
  const entry = (system: string) => {
    let e = bySystem.get(system);
    if (!e) {
      e = { this: [], other: [], excluded: false };
      bySystem.set(system, e);
    }
    return e;
  };
  for (const inc of a.include) entry(inc.system ?? '').this.push(inc);
  for (const inc of b.include) entry(inc.system ?? '').other.push(inc);
  for (const exc of [...(a.exclude ?? []), ...(b.exclude ?? [])]) entry(exc.system ?? '').excluded = true;
  for (const [system, includes] of bySystem) {
    compareSystem(system, includes, found, ctx);
    if (found.undecided) break;
  }
  return found;
}

function compareSystem(system: string, includes: SystemIncludes, found: Findings, ctx: EngineContext): void {
  const { this: mine, other: theirs } = includes;
  if (!system || includes.excluded || [...mine, ...theirs].some((i) => (i.valueSet ?? []).length > 0)) {
    found.undecided = true;
    return;
  }
  if (theirs.length === 0) {
    found.left = true;
    return;
  }
  if (mine.length === 0) {
    found.right = true;
    return;
  }
  const whole = (list: ValueSetComposeInclude[]) => list.some((i) => !i.concept && !i.filter);
  if (whole(mine) || whole(theirs)) {
    // A whole code system holds whatever the other side selects from it.
    found.common = true;
    if (!whole(theirs)) found.left = true;
    else if (!whole(mine)) found.right = true;
    return;
  }
  const listsOnly = (list: ValueSetComposeInclude[]) => list.every((i) => i.concept && !i.filter);
  if (listsOnly(mine) && listsOnly(theirs)) {
    compareLists(mine, theirs, found);
    return;
  }
  const keys = (list: ValueSetComposeInclude[]) => list.map(includeKey).sort();
  if (JSON.stringify(keys(mine)) === JSON.stringify(keys(theirs))) {
    found.common = true;
    return;
  }
  if (!compareBranches(system, mine, theirs, found, ctx)) found.undecided = true;
}

/** Two lists of codes: the sets decide. The lists shown are those of the last system compared so. */
function compareLists(mine: ValueSetComposeInclude[], theirs: ValueSetComposeInclude[], found: Findings): void {
  const codes = (list: ValueSetComposeInclude[]) => new Set(list.flatMap((i) => (i.concept ?? []).map((c) => c.code)));
  const a = codes(mine);
  const b = codes(theirs);
  const sorted = (set: Iterable<string>) => [...set].sort((x, y) => x.localeCompare(y));
  const lists: CodeLists = {
    common: sorted([...a].filter((c) => b.has(c))),
    extra: sorted([...b].filter((c) => !a.has(c))),
    missing: sorted([...a].filter((c) => !b.has(c))),
  };
  if (lists.common.length > 0) found.common = true;
  if (lists.missing.length > 0) found.left = true;
  if (lists.extra.length > 0) found.right = true;
  found.codes = lists;
}

/**
 * One `concept is-a` filter on each side, at the same version: the roots' subsumption decides
 * (the same root, one under the other, or unrelated branches).
 */
function compareBranches(
  system: string,
  mine: ValueSetComposeInclude[],
  theirs: ValueSetComposeInclude[],
  found: Findings,
  ctx: EngineContext,
): boolean {
  const rootOf = (list: ValueSetComposeInclude[]) => {
    if (list.length !== 1 || list[0].concept || list[0].filter?.length !== 1) return undefined;
    const f = list[0].filter[0];
    return f.property === 'concept' && filterOp(f) === 'is-a' ? f.value : undefined;
  };
  const a = rootOf(mine);
  const b = rootOf(theirs);
  if (a === undefined || b === undefined || mine[0].version !== theirs[0].version) return false;
  const cs = ctx.resolver.codeSystem(system, ctx.params.versionFor(system, mine[0].version));
  if (!cs || cs.content === 'not-present') return false;
  const provider = ctx.resolver.provider(cs);
  const ra = provider.locate(a);
  const rb = provider.locate(b);
  if (!ra || !rb) return false;
  if (provider.subsumes(ra, rb)) {
    found.common = true;
    if (ra !== rb) found.left = true;
  } else if (provider.subsumes(rb, ra)) {
    found.common = true;
    found.right = true;
  }
  return true;
}

/** An include as a comparable key: its version, its codes and its filters, each in a fixed order. */
function includeKey(include: ValueSetComposeInclude): string {
  const codes = (include.concept ?? []).map((c) => c.code).sort();
  const filters = (include.filter ?? []).map((f) => `${f.property}\u0000${filterOp(f)}\u0000${f.value}`).sort();
  return JSON.stringify([include.version ?? '', codes, filters]);
}

// ---------------------------------------------------------------------------------------------
// expansions

async function compareExpansions(
  thisVs: ValueSet,
  otherVs: ValueSet,
  ctx: EngineContext,
  limit: number,
): Promise<Findings> {
  const mine = await members(thisVs, ctx, limit);
  const theirs = await members(otherVs, ctx, limit);
  const keyOf = (m: Member) => `${m.system}\u0000${m.code}`;
  const mineKeys = new Set(mine.map(keyOf));
  const theirKeys = new Set(theirs.map(keyOf));
  const lists: CodeLists = {
    common: mine.filter((m) => theirKeys.has(keyOf(m))).map((m) => m.code),
    missing: mine.filter((m) => !theirKeys.has(keyOf(m))).map((m) => m.code),
    extra: theirs.filter((m) => !mineKeys.has(keyOf(m))).map((m) => m.code),
  };
  return {
    common: lists.common.length > 0,
    left: lists.missing.length > 0,
    right: lists.extra.length > 0,
    undecided: false,
    codes: lists,
  };
}

/** The members of a value set, once each by system and code, in expansion order. */
async function members(vs: ValueSet, ctx: EngineContext, limit: number): Promise<Member[]> {
  const env = valueSetEnv(vs, ctx);
  const expander = new ValueSetExpander(env, { designations: [], properties: [], limit, excludeNested: true }, vs);
  const collected = await expander.collect();
  if (collected.members.length > limit) expander.tooCostly(limit);
  const seen = new Set<string>();
  return collected.members.filter((m) => {
    const key = `${m.system}\u0000${m.code}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
