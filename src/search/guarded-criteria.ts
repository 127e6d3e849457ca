import type { Grant } from '../auth/guard';
import type { Criterion } from './query/criteria';

/**
 * A search reads the types its criteria reach into, not only the type it returns: a chain tests
 * the resources its reference points at (each link of a multi-level chain), `_has` the resources
 * that point back. Answering whether such a resource matched (even as a count) tells what it holds,
 * so each of those types must be one the principal may search, with its grant's limits (a patient's
 * compartment, its own ids) applied to the rows reached, or the search is refused (403) before any
 * row is read. A chain without a type names every type its parameter may point at; it reaches only
 * those the principal may search, and is refused when that leaves none.
 */

interface Reach {
  /** The grant to search a type; throws (403) when the principal may not. */
  allow(type: string): Grant;
  /** The criteria that keep rows of the type within its grant (none when it is not limited). */
  limits(type: string, grant: Grant): Criterion[];
}

/** The criteria, with every type they reach checked and limited; throws the first refusal. */
export function guardCriteria(criteria: Criterion[], reach: Reach): Criterion[] {
  return criteria.map((c) => guarded(c, reach));
}

function guarded(c: Criterion, reach: Reach): Criterion {
  switch (c.kind) {
    case 'chain':
      return guardedChain(c, reach);
    case 'has': {
      const grant = reach.allow(c.type);
      return { ...c, next: both(c.next && guarded(c.next, reach), reach.limits(c.type, grant)) };
    }
    case 'any':
    case 'all':
      return { ...c, of: c.of.map((sub) => guarded(sub, reach)) };
    default:
      return c;
  }
}

function guardedChain(c: Extract<Criterion, { kind: 'chain' }>, reach: Reach): Criterion {
  const allowed: [string, Grant][] = [];
  let refusal: unknown;
  for (const type of c.targetTypes) {
    try {
      allowed.push([type, reach.allow(type)]);
    } catch (err) {
      refusal ??= err;
    }
  }
  if (allowed.length === 0) throw refusal;
  const next = guarded(c.next, reach);
  const limited = allowed.map(([type, grant]) => ({ type, limits: reach.limits(type, grant) }));
  if (limited.every((t) => t.limits.length === 0)) return { ...c, targetTypes: allowed.map(([type]) => type), next };
  // Each type's own limits: one chain per type reached, any of which may match.
  const chains: Criterion[] = limited.map((t) => ({
    ...c,
    targetTypes: [t.type],
    next: both(next, t.limits) as Criterion,
  }));
  return chains.length === 1 ? chains[0] : { kind: 'any', index: c.index, of: chains };
}

/** The criterion and the limits, all of which must hold (undefined: nothing to hold). */
function both(next: Criterion | undefined, limits: Criterion[]): Criterion | undefined {
  const all = next ? [next, ...limits] : limits;
  return all.length <= 1 ? all[0] : { kind: 'all', index: '', of: all };
}
