import type { CodeSystem, CodeSystemConcept, ValueSet } from 'fhir/r4';

/**
 * A synthetic hierarchical code system for benchmarks, generated from a fixed seed (so every run
 * measures the same content) and never committed: 100,000 concepts under 10 roots, 3 to 5
 * children per concept, which makes the tree 9 levels deep.
 */

export const SYNTHETIC_URL = 'http://example.org/bench/CodeSystem/synthetic';
export const SYNTHETIC_VS_URL = 'http://example.org/bench/ValueSet/synthetic-branch';
export const SYNTHETIC_EXPAND_VS_URL = 'http://example.org/bench/ValueSet/synthetic-10k';

/** mulberry32: small, fast, and the same sequence on every machine. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface SyntheticContent {
  codeSystem: CodeSystem;
  /** is-a one root, minus one of its sub-branches: the value set validate-code is measured on. */
  branchValueSet: ValueSet;
  /** Exactly 10,000 codes (the first ones in breadth-first order), for $expand paging. */
  expandValueSet: ValueSet;
  /** A code in the branch value set, one excluded from it, and one in another root. */
  hit: string;
  excluded: string;
  outside: string;
  depth: number;
}

export function syntheticContent(size = 100_000, seed = 20261122): SyntheticContent {
  const next = random(seed);
  const code = (n: number) => `S${String(n).padStart(6, '0')}`;
  const roots: CodeSystemConcept[] = [];
  const queue: { concept: CodeSystemConcept; depth: number }[] = [];
  const parentOf = new Map<string, string>();
  const depthOf = new Map<string, number>();
  let made = 0;
  const make = (): CodeSystemConcept => {
    made++;
    return {
      code: code(made),
      display: `Synthetic concept ${made}`,
      definition: `Concept number ${made} of the benchmark hierarchy`,
    };
  };
  for (let i = 0; i < 10; i++) {
    const root = make();
    roots.push(root);
    queue.push({ concept: root, depth: 1 });
    depthOf.set(root.code, 1);
  }
  // Breadth first, so codes are numbered level by level and the tree stays balanced.
  for (let head = 0; head < queue.length && made < size; head++) {
    const { concept, depth } = queue[head];
    const children = 3 + Math.floor(next() * 3);
    for (let c = 0; c < children && made < size; c++) {
      const child = make();
      (concept.concept ??= []).push(child);
      parentOf.set(child.code, concept.code);
      depthOf.set(child.code, depth + 1);
      queue.push({ concept: child, depth: depth + 1 });
    }
  }
  const depth = Math.max(...depthOf.values());
  const ancestors = (c: string): string[] => {
    const out: string[] = [];
    for (let p = parentOf.get(c); p; p = parentOf.get(p)) out.push(p);
    return out;
  };
  const branchRoot = code(1);
  const excludedBranch = roots[0].concept?.[0].code as string;
  // The deepest codes: one under the kept part of root 1, one under the excluded branch, one elsewhere.
  const deepest = [...depthOf.entries()].filter(([, d]) => d === depth).map(([c]) => c);
  const under = (c: string, a: string) => ancestors(c).includes(a);
  const hit = deepest.find((c) => under(c, branchRoot) && !under(c, excludedBranch)) as string;
  const excluded = deepest.find((c) => under(c, excludedBranch)) as string;
  const outside = deepest.find((c) => !under(c, branchRoot)) as string;

  const codeSystem: CodeSystem = {
    resourceType: 'CodeSystem',
    id: 'bench-synthetic',
    url: SYNTHETIC_URL,
    version: '1.0.0',
    name: 'BenchSynthetic',
    status: 'active',
    content: 'complete',
    hierarchyMeaning: 'is-a',
    caseSensitive: true,
    count: made,
    concept: roots,
  };
  const branchValueSet: ValueSet = {
    resourceType: 'ValueSet',
    id: 'bench-synthetic-branch',
    url: SYNTHETIC_VS_URL,
    status: 'active',
    compose: {
      include: [{ system: SYNTHETIC_URL, filter: [{ property: 'concept', op: 'is-a', value: branchRoot }] }],
      exclude: [{ system: SYNTHETIC_URL, filter: [{ property: 'concept', op: 'is-a', value: excludedBranch }] }],
    },
  };
  const expandValueSet: ValueSet = {
    resourceType: 'ValueSet',
    id: 'bench-synthetic-10k',
    url: SYNTHETIC_EXPAND_VS_URL,
    status: 'active',
    compose: {
      include: [{ system: SYNTHETIC_URL, concept: Array.from({ length: 10_000 }, (_, i) => ({ code: code(i + 1) })) }],
    },
  };
  return { codeSystem, branchValueSet, expandValueSet, hit, excluded, outside, depth };
}
