import { RE2JS } from 're2js';
import { FilterNotSupportedError, type ConceptFilter, type PropertyValue } from './provider';
import type { ConceptNode, ResourceCodeSystemProvider } from './resource-provider';

/**
 * ValueSet compose filters over a CodeSystem resource. Each compiles to a membership test
 * (used by validate-code, never enumerating) and a member list (used by $expand).
 *
 * Regular expressions run on RE2 semantics (re2js): matching time is linear in the input, so a
 * pattern such as `(a+)+` from a stored ValueSet cannot stall the server.
 */

export interface FilterSpec {
  property: string;
  op: string;
  value: string;
}

type Node = ConceptNode;

const HIERARCHY_PROPERTIES = new Set(['concept', 'code']);

export function compileFilter(cs: ResourceCodeSystemProvider, spec: FilterSpec): ConceptFilter<Node> {
  const { property, op, value } = spec;
  if (HIERARCHY_PROPERTIES.has(property)) return conceptFilter(cs, spec);
  if ((property === 'child' || property === 'parent') && op === 'exists') {
    const wanted = value === 'true';
    const has = property === 'child' ? (n: Node) => n.children.length > 0 : (n: Node) => n.parents.length > 0;
    return scan(cs, (n) => has(n) === wanted);
  }
  if (property === 'display' && (op === '=' || op === 'regex')) {
    const test = op === '=' ? (s: string) => s === value : regexTest(spec);
    return scan(cs, (n) => test(cs.display(n) ?? ''));
  }
  return propertyFilter(cs, spec);
}

function conceptFilter(cs: ResourceCodeSystemProvider, spec: FilterSpec): ConceptFilter<Node> {
  const { op, value } = spec;
  switch (op) {
    case '=': {
      const target = cs.locate(value);
      return fixed(target ? [target] : []);
    }
    case 'in':
      return fixed(
        splitList(value)
          .map((c) => cs.locate(c))
          .filter((n): n is Node => n !== undefined),
      );
    case 'not-in': {
      const excluded = new Set(splitList(value).map((c) => cs.locate(c)));
      return scan(cs, (n) => !excluded.has(n));
    }
    case 'regex': {
      const test = regexTest(spec);
      return scan(cs, (n) => test(n.code));
    }
    case 'is-a':
    case 'descendent-of':
    case 'child-of':
    case 'descendent-leaf': {
      const root = cs.locate(value);
      if (!root) return fixed([]);
      return subtree(cs, root, op);
    }
    case 'is-not-a': {
      const root = cs.locate(value);
      if (!root) return scan(cs, () => true);
      // Listing: the subtree is found once (O(size)), not asked per concept (O(size x depth)).
      return {
        contains: (n) => !cs.subsumes(root, n),
        members: function* () {
          const below = subtreeOf(root);
          for (const n of cs.all()) if (!below.has(n)) yield n;
        },
      };
    }
    case 'generalizes': {
      const start = cs.locate(value);
      if (!start) return fixed([]);
      const ancestors = new Set<Node>([start]);
      const stack = [start];
      while (stack.length > 0) {
        for (const p of (stack.pop() as Node).parents) {
          if (ancestors.has(p)) continue;
          ancestors.add(p);
          stack.push(p);
        }
      }
      return { contains: (n) => ancestors.has(n), members: () => [...cs.all()].filter((n) => ancestors.has(n)) };
    }
    default:
      throw new FilterNotSupportedError(spec.property, op, value);
  }
}

/** is-a, descendent-of, child-of, descendent-leaf below one root: tested by walking up. */
function subtree(cs: ResourceCodeSystemProvider, root: Node, op: string): ConceptFilter<Node> {
  const test = (n: Node): boolean => {
    switch (op) {
      case 'is-a':
        return cs.subsumes(root, n);
      case 'descendent-of':
        return n !== root && cs.subsumes(root, n);
      case 'child-of':
        return n.parents.includes(root);
      default:
        return n !== root && n.children.length === 0 && cs.subsumes(root, n);
    }
  };
  // Listing walks down from the root, so every concept met is below it: no walk back up per concept.
  const belowRoot = (n: Node): boolean => {
    if (op === 'is-a') return true;
    if (op === 'descendent-of') return n !== root;
    return n !== root && n.children.length === 0;
  };
  const members = function* (): Iterable<Node> {
    if (op === 'child-of') {
      yield* root.children;
      return;
    }
    const seen = new Set<Node>();
    const stack: Node[] = [root];
    while (stack.length > 0) {
      const node = stack.pop() as Node;
      if (seen.has(node)) continue;
      seen.add(node);
      if (belowRoot(node)) yield node;
      for (let i = node.children.length - 1; i >= 0; i--) stack.push(node.children[i]);
    }
  };
  return { contains: test, members };
}

/** A concept and everything below it. */
function subtreeOf(root: Node): Set<Node> {
  const seen = new Set<Node>([root]);
  const stack: Node[] = [root];
  for (let node = stack.pop(); node; node = stack.pop()) {
    for (const child of node.children) {
      if (seen.has(child)) continue;
      seen.add(child);
      stack.push(child);
    }
  }
  return seen;
}

function propertyFilter(cs: ResourceCodeSystemProvider, spec: FilterSpec): ConceptFilter<Node> {
  const { property, op, value } = spec;
  // A filter the code system declares (CodeSystem.filter) is a valid filter even when its meaning
  // is given only in words: it is read as selecting the concepts whose property of that code has
  // the value, which for a filter no concept carries as a property selects none.
  const declared =
    cs.propertyType(property) !== undefined ||
    cs.propertyCodeFor(property) !== undefined ||
    cs.declaresFilter(property, op);
  const special = ['notSelectable', 'status', 'inactive', 'deprecated'].includes(property);
  if (!declared && !special) throw new FilterNotSupportedError(property, op, value);
  const valuesOf = (n: Node): string[] => {
    const found = cs
      .properties(n)
      .filter((p) => p.code === property)
      .map(asText);
    if (found.length > 0 || declared) return found;
    // Undeclared standard properties: read them through their meaning.
    if (property === 'inactive') return [String(cs.isInactive(n))];
    const status = cs.status(n);
    return property === 'status' && status ? [status] : [];
  };
  switch (op) {
    case '=':
      return scan(cs, (n) => valuesOf(n).includes(value));
    case 'in': {
      const wanted = new Set(splitList(value));
      return scan(cs, (n) => valuesOf(n).some((v) => wanted.has(v)));
    }
    case 'not-in': {
      const unwanted = new Set(splitList(value));
      return scan(cs, (n) => !valuesOf(n).some((v) => unwanted.has(v)));
    }
    case 'regex': {
      const test = regexTest(spec);
      return scan(cs, (n) => valuesOf(n).some(test));
    }
    case 'exists': {
      const wanted = value === 'true';
      return scan(cs, (n) => valuesOf(n).length > 0 === wanted);
    }
    default:
      throw new FilterNotSupportedError(property, op, value);
  }
}

function asText(p: PropertyValue): string {
  if (typeof p.value === 'object') return p.value.code ?? '';
  return String(p.value);
}

function splitList(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** Full-match test on RE2; an expression RE2 cannot compile is a filter this server does not support. */
function regexTest(spec: FilterSpec): (text: string) => boolean {
  let compiled: RE2JS;
  try {
    compiled = RE2JS.compile(spec.value);
  } catch {
    throw new FilterNotSupportedError(spec.property, spec.op, spec.value);
  }
  return (text) => compiled.matches(text);
}

function scan(cs: ResourceCodeSystemProvider, test: (n: Node) => boolean): ConceptFilter<Node> {
  return {
    scansAll: true,
    contains: test,
    members: function* () {
      for (const n of cs.all()) if (test(n)) yield n;
    },
  };
}

function fixed(nodes: Node[]): ConceptFilter<Node> {
  const set = new Set(nodes);
  return { contains: (n) => set.has(n), members: () => nodes };
}
