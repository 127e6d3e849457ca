import type { ValueSet } from 'fhir/r4';
import type { Resolver } from '../resolver';
import { isEnumeration } from './checker';

/**
 * The one rule for "membership cannot be decided here", for every in-process caller (search's
 * :in/:not-in, validation's bindings, measures' value sets):
 *
 *   A code found not to be a member is undecidable when the system it would be judged in is one
 *   the value set needs the content of, and this server lacks that content (no such code system,
 *   or one with content not-present).
 *
 * A value set needs the content of the systems it draws on: its includes and excludes, through
 * their imports (an import that cannot be found could need any system: `*`), and the codes of
 * its own expansion. The one option is `membershipOnly`: when only membership is asked,
 * codes a value set lists by hand (`include.concept`) are in it by its definition, so a listed
 * system needs no content (search's :in on a LOINC list); a full validation judges displays and
 * status too, so it needs the content of every system drawn on, and the engine itself names the
 * systems it looked for and could not find (`reported`).
 */

export type MembershipVerdict = 'member' | 'not-member' | 'undecidable';

export interface UndecidableQuestion {
  /** The systems of the codes asked about (a code without a system is never undecidable). */
  systems: readonly (string | undefined)[];
  /** Systems the engine reported it could not find while answering (full validation). */
  reported?: readonly string[];
  membershipOnly: boolean;
}

/** Drawn-on systems per value set (url|version), kept by a caller while the content is unchanged. */
export type DrawnOnMemo = Map<string, Set<string>>;

/** The systems that make a "not a member" answer undecidable (none: the answer stands). */
export function undecidableSystems(
  valueSet: ValueSet,
  question: UndecidableQuestion,
  resolver: Resolver,
  memo: DrawnOnMemo = new Map(),
): string[] {
  const needed = systemsNeeded(valueSet, resolver, { memo, membershipOnly: question.membershipOnly, depth: 0 });
  const asked = question.systems.filter((s): s is string => !!s && lacksContent(s, resolver, question.membershipOnly));
  const candidates = [...(question.reported ?? []), ...asked];
  return [...new Set(candidates.filter((s) => needed.has(s) || needed.has('*')))];
}

/**
 * The systems a value set draws on (through its imports too; `*` for an import that cannot be
 * found): a code of a system it does not draw on is simply not in it.
 */
export function systemsDrawnOn(valueSet: ValueSet, resolver: Resolver, memo: DrawnOnMemo = new Map()): Set<string> {
  return systemsNeeded(valueSet, resolver, { memo, membershipOnly: false, depth: 0 });
}

/**
 * Without content here: in a full validation the engine reports the systems it cannot find, so
 * only a system present without its content is added; membership alone asks the resolver.
 */
function lacksContent(system: string, resolver: Resolver, membershipOnly: boolean): boolean {
  const cs = resolver.codeSystem(system);
  return membershipOnly ? !cs || cs.content === 'not-present' : cs?.content === 'not-present';
}

interface Walk {
  memo: DrawnOnMemo;
  membershipOnly: boolean;
  depth: number;
}

/** The systems whose content the value set needs to judge a code (see above); `*` for "cannot tell". */
function systemsNeeded(valueSet: ValueSet, resolver: Resolver, walk: Walk): Set<string> {
  const key = `${walk.membershipOnly ? 'm' : 'v'}|${valueSet.url}|${valueSet.version ?? ''}`;
  const known = walk.memo.get(key);
  if (known) return known;
  const found = new Set<string>();
  walk.memo.set(key, found);
  const includes = valueSet.compose?.include ?? [];
  for (const set of [...includes, ...(valueSet.compose?.exclude ?? [])]) {
    const listed = walk.membershipOnly && includes.includes(set) && isEnumeration(set);
    if (set.system && !listed) found.add(set.system);
    for (const imported of set.valueSet ?? []) {
      const [url, version] = imported.split('|');
      const other = walk.depth < 8 ? resolver.valueSet(url, version) : undefined;
      if (!other) found.add('*');
      else for (const s of systemsNeeded(other, resolver, { ...walk, depth: walk.depth + 1 })) found.add(s);
    }
  }
  if (!walk.membershipOnly) for (const c of valueSet.expansion?.contains ?? []) if (c.system) found.add(c.system);
  return found;
}
