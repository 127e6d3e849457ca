import { Kind, type DocumentNode, type FieldNode, type FragmentDefinitionNode, type SelectionSetNode } from 'graphql';
import type { Budget } from '../context/budget';

/**
 * The measures a GraphQL document is refused by, taken before graphql-js validates it: nesting
 * depth, estimated cost, and the pairs of same-named fields graphql-js's OverlappingFieldsCanBeMerged
 * rule compares. Named fragments make a 2 KB document stand for 2^40 fields (40 fragments each
 * spreading the one below twice), so every walk here is memoised per selection set (a fragment is
 * measured once however often it is spread) and counts its work on the request's budget; the
 * pairs bound is what keeps validation itself (quadratic in same-named fields, and per nested
 * selection set) from holding the event loop.
 */

export interface DocumentLimits {
  maxDepth: number;
  /** The largest estimated cost: each field counts once per item of the lists above it. */
  maxCost: number;
  /** The most pairs of fields with one response name that validation may have to compare. */
  maxPairs: number;
}

interface DocumentRefusal {
  code: 'too-costly' | 'invalid';
  text: string;
}

/** How many items a list is counted as when the query does not say (`_count`). */
const ASSUMED_LIST_SIZE = 20;

/**
 * Selection sets (fields' and inline fragments') nested in the text: the walks below recurse,
 * so a document deeper than the stack is refused before them, by this loop without recursion.
 */
const MAX_NESTING = 32;

/** Thrown inside the walks; `checkDocument` turns it into its answer. */
class Refused extends Error {
  constructor(readonly refusal: DocumentRefusal) {
    super(refusal.text);
  }
}

/** The first limit the document breaks, or undefined when it may go on to validation. */
export function checkDocument(
  document: DocumentNode,
  limits: DocumentLimits,
  budget: Budget,
): DocumentRefusal | undefined {
  const { sets, nesting } = selectionSets(document, budget);
  if (nesting > MAX_NESTING)
    return {
      code: 'too-costly',
      text: `The document nests selections ${nesting} deep; at most ${MAX_NESTING} are allowed`,
    };
  try {
    const walk = new DocumentWalk(document, budget);
    for (const definition of document.definitions) {
      if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
      const depth = walk.depth(definition.selectionSet);
      if (depth > limits.maxDepth)
        return {
          code: 'too-costly',
          text: `The query is nested ${depth} levels deep; at most ${limits.maxDepth} are allowed`,
        };
      const cost = walk.cost(definition.selectionSet);
      if (cost > limits.maxCost)
        return {
          code: 'too-costly',
          text: `The query would cost about ${Math.round(cost)} (fields times list sizes); at most ${limits.maxCost} is allowed`,
        };
    }
    const pairs = walk.pairs(sets, limits.maxPairs);
    if (pairs > limits.maxPairs)
      return {
        code: 'too-costly',
        text: `The query repeats fields too often (more than ${limits.maxPairs} pairs of fields with one name to compare); use fewer aliases and fragment spreads`,
      };
    return undefined;
  } catch (err) {
    if (err instanceof Refused) return err.refusal;
    throw err;
  }
}

/** Fields reached from a selection set without entering a field: through inline and named fragments, each with how often. */
type Collected = Map<FieldNode, number>;

class DocumentWalk {
  private readonly fragments: Map<string, FragmentDefinitionNode>;
  private readonly depths = new WeakMap<SelectionSetNode, number>();
  private readonly costs = new WeakMap<SelectionSetNode, number>();
  private readonly collected = new WeakMap<SelectionSetNode, Collected>();
  /** Fragments being walked: one met again spreads itself (graphql-js refuses those, but only after walking them). */
  private readonly open = new Set<string>();

  constructor(
    document: DocumentNode,
    private readonly budget: Budget,
  ) {
    this.fragments = new Map(
      document.definitions
        .filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION)
        .map((f) => [f.name.value, f]),
    );
  }

  /** Selection sets nested in `set` (a field with a selection counts a level), fragments followed. */
  depth(set: SelectionSetNode): number {
    return this.memo(this.depths, set, () => {
      let deepest = 0;
      for (const selection of set.selections) {
        if (selection.kind === Kind.FIELD)
          deepest = Math.max(deepest, selection.selectionSet ? 1 + this.depth(selection.selectionSet) : 0);
        else if (selection.kind === Kind.INLINE_FRAGMENT)
          deepest = Math.max(deepest, this.depth(selection.selectionSet));
        else
          deepest = Math.max(
            deepest,
            this.spread(selection.name.value, (fragment) => this.depth(fragment), 0),
          );
      }
      return deepest;
    });
  }

  /** The estimated cost of `set` under one item: each field once, times the list sizes above it. */
  cost(set: SelectionSetNode): number {
    return this.memo(this.costs, set, () => {
      let cost = 0;
      // Type conditions are alternatives (an object has one type): only the costliest type counts.
      const byType = new Map<string, number>();
      for (const selection of set.selections) {
        if (selection.kind === Kind.FIELD)
          cost += 1 + (selection.selectionSet ? listSize(selection) * this.cost(selection.selectionSet) : 0);
        else if (selection.kind === Kind.INLINE_FRAGMENT) {
          const type = selection.typeCondition?.name.value;
          const own = this.cost(selection.selectionSet);
          if (type === undefined) cost += own;
          else byType.set(type, (byType.get(type) ?? 0) + own);
        } else cost += this.spread(selection.name.value, (fragment) => this.cost(fragment), 0);
      }
      return cost + Math.max(0, ...byType.values());
    });
  }

  /**
   * The pairs of same-named fields validation compares: for every selection set of the document
   * (validation visits each), the fields it collects and, level by level below, the fields that
   * merge under each response name; a response name met n times is n(n+1)/2 pairs (each field
   * with itself and every other: a field met once counts one). Like validation, the level below a
   * name is entered only when the name is met more than once (one field's own selection set is
   * measured as a selection set of its own). Stops past `max`.
   */
  pairs(sets: readonly SelectionSetNode[], max: number): number {
    let pairs = 0;
    for (const set of sets) {
      pairs += this.levelPairs(new Map([[set, 1]]), max - pairs);
      if (pairs > max) return pairs;
    }
    return pairs;
  }

  /** Pairs at one merged level (selection sets with how often each is there) and the levels below it. */
  private levelPairs(level: Map<SelectionSetNode, number>, max: number): number {
    const counts = new Map<string, number>();
    const below = new Map<string, Map<SelectionSetNode, number>>();
    for (const [set, times] of level) {
      const fields = this.collect(set);
      this.budget.spend(fields.size);
      for (const [field, often] of fields) {
        const name = field.alias?.value ?? field.name.value;
        counts.set(name, (counts.get(name) ?? 0) + times * often);
        if (!field.selectionSet) continue;
        const next = below.get(name) ?? new Map<SelectionSetNode, number>();
        next.set(field.selectionSet, (next.get(field.selectionSet) ?? 0) + times * often);
        below.set(name, next);
      }
    }
    let pairs = 0;
    for (const n of counts.values()) pairs += (n * (n + 1)) / 2;
    for (const [name, next] of below) {
      if (pairs > max) return pairs;
      if ((counts.get(name) ?? 0) > 1) pairs += this.levelPairs(next, max - pairs);
    }
    return pairs;
  }

  private collect(set: SelectionSetNode): Collected {
    return this.memo(this.collected, set, () => {
      const out: Collected = new Map();
      const add = (from: Collected) => {
        this.budget.spend(from.size);
        for (const [field, often] of from) out.set(field, (out.get(field) ?? 0) + often);
      };
      for (const selection of set.selections) {
        if (selection.kind === Kind.FIELD) out.set(selection, (out.get(selection) ?? 0) + 1);
        else if (selection.kind === Kind.INLINE_FRAGMENT) add(this.collect(selection.selectionSet));
        else add(this.spread(selection.name.value, (fragment) => this.collect(fragment), new Map()));
      }
      return out;
    });
  }

  /** A measure of the fragment a spread names (`unknown` when there is none: validation reports it). */
  private spread<T>(name: string, measure: (set: SelectionSetNode) => T, unknown: T): T {
    const fragment = this.fragments.get(name);
    if (!fragment) return unknown;
    if (this.open.has(name))
      throw new Refused({ code: 'invalid', text: `Cannot spread fragment "${name}" within itself` });
    this.open.add(name);
    try {
      return measure(fragment.selectionSet);
    } finally {
      this.open.delete(name);
    }
  }

  private memo<T>(cache: WeakMap<SelectionSetNode, T>, set: SelectionSetNode, compute: () => T): T {
    const known = cache.get(set);
    if (known !== undefined) return known;
    this.budget.spend();
    const value = compute();
    cache.set(set, value);
    return value;
  }
}

/**
 * Every selection set of the document as validation visits it (each place it is written), and
 * how deeply they nest, by a loop without recursion (graphql-js's visit() is several times slower).
 */
function selectionSets(document: DocumentNode, budget: Budget): { sets: SelectionSetNode[]; nesting: number } {
  const sets: SelectionSetNode[] = [];
  let nesting = 0;
  const stack: [SelectionSetNode, number][] = [];
  for (const definition of document.definitions) {
    if (definition.kind === Kind.OPERATION_DEFINITION || definition.kind === Kind.FRAGMENT_DEFINITION)
      stack.push([definition.selectionSet, 1]);
  }
  for (let next = stack.pop(); next; next = stack.pop()) {
    const [set, level] = next;
    sets.push(set);
    nesting = Math.max(nesting, level);
    budget.spend(set.selections.length);
    for (const selection of set.selections)
      if (selection.kind !== Kind.FRAGMENT_SPREAD && selection.selectionSet)
        stack.push([selection.selectionSet, level + 1]);
  }
  return { sets, nesting };
}

/** Searches count as the page they ask for; other lists as a typical size. */
function listSize(field: FieldNode): number {
  const name = field.name.value;
  if (!/(List|Connection)$/.test(name)) return 1;
  const count = field.arguments?.find((a) => a.name.value === '_count')?.value;
  if (count?.kind === Kind.INT) return Math.max(1, Number(count.value));
  return ASSUMED_LIST_SIZE;
}
