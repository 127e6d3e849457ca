import {
  Kind,
  visit,
  type DocumentNode,
  type DirectiveNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type SelectionSetNode,
  type ValueNode,
} from 'graphql';
import type { Budget } from '../context/budget';

/**
 * The FHIR directives of graphql.html, applied to the result: `@first` (the first item of a list,
 * or null), `@singleton` (a list known to hold one item, as that item; more than one is an error,
 * and under a flattened parent the value stays single instead of joining a list), `@flatten` (the
 * field's own object disappears: its fields go to the parent, as lists of every item's values when
 * the field repeats, absent values left out), and `@slice(path: ...)` (a list becomes one field per
 * item, named `field.<the item's path value>`, `$index` naming them by position; with `@flatten`
 * the suffix goes on each flattened child, cumulatively when nested). `@skip`/`@include` are
 * GraphQL's own and already applied (`conditionVariables` lets their variable be declared `Boolean`).
 */

type Data = Record<string, unknown>;

/** Where a slice's name is read in each item: a field added to the selection (the client need not select it). */
const SLICE_KEY = '__slice';

/**
 * Adds the element `@slice(path: ...)` names to the sliced field's selection, under an alias of
 * ours, so each item's value is in the result even when the query does not ask for it.
 */
export function prepareDirectives(document: DocumentNode): DocumentNode {
  // A walk of the whole document for a directive few queries use: not when its name is not in the text.
  if (document.loc && !document.loc.source.body.includes('slice')) return document;
  return visit(document, {
    Field(node) {
      const slice = node.directives?.find((d) => d.name.value === 'slice');
      const path = slice?.arguments?.find((a) => a.name.value === 'path')?.value;
      if (!node.selectionSet || path?.kind !== Kind.STRING || !/^[A-Za-z][A-Za-z0-9]*$/.test(path.value))
        return undefined;
      const added = {
        kind: Kind.FIELD,
        alias: { kind: Kind.NAME, value: SLICE_KEY },
        name: { kind: Kind.NAME, value: path.value },
      } as const;
      return { ...node, selectionSet: { ...node.selectionSet, selections: [...node.selectionSet.selections, added] } };
    },
  });
}

/**
 * `@skip(if:)` and `@include(if:)` take a `Boolean!`, and GraphQL's validation (All Variable Usages
 * Are Allowed) refuses a variable declared nullable `Boolean` there unless it has a default; FHIR's
 * GraphQL test cases declare `query ($flag: Boolean)`. Such a variable is declared `Boolean!` in
 * the document validated and run (a non-null variable also fits every nullable use elsewhere), so a
 * null or absent value is refused as GraphQL refuses one for `Boolean!`. Answers the document and
 * the names of the variables conditions use (which must then be true or false).
 */
export function conditionVariables(document: DocumentNode): { document: DocumentNode; names: Set<string> } {
  const names = new Set<string>();
  // A walk of the whole document for directives few queries use: not when neither is in the text.
  if (document.loc && !/@\s*(skip|include)\b/.test(document.loc.source.body)) return { document, names };
  visit(document, {
    Directive(node) {
      if (node.name.value !== 'skip' && node.name.value !== 'include') return;
      const condition = node.arguments?.find((a) => a.name.value === 'if')?.value;
      if (condition?.kind === Kind.VARIABLE) names.add(condition.name.value);
    },
  });
  if (names.size === 0) return { document, names };
  const rewritten = visit(document, {
    VariableDefinition(node) {
      const type = node.type;
      if (
        !names.has(node.variable.name.value) ||
        node.defaultValue ||
        type.kind !== Kind.NAMED_TYPE ||
        type.name.value !== 'Boolean'
      )
        return undefined;
      return { ...node, type: { kind: Kind.NON_NULL_TYPE, type } };
    },
  });
  return { document: rewritten, names };
}

type Variables = Record<string, unknown> | undefined;

interface DirectivesInput {
  /** The operation's selection set, which the data answers. */
  set: SelectionSetNode;
  fragments: Map<string, FragmentDefinitionNode>;
  variables: Variables;
  /** The request's: each field of the data is a step, and the event loop is given back between slices. */
  budget: Budget;
}

interface Pass extends Omit<DirectivesInput, 'set'> {
  /** The fields of each selection set, fragments spread in, worked out once (not once per object of the data). */
  fields: WeakMap<SelectionSetNode, FieldNode[]>;
  /** Lists made here by flattening, which may grow in place (the others belong to the data). */
  own: WeakSet<unknown[]>;
  /** Keys of an object that hold one value by `@singleton` (flattening keeps them single). */
  singles: WeakMap<Data, Set<string>>;
  errors: string[];
}

/**
 * Applies the directives to the executed data (in place). Returns the errors the page requires
 * (`@singleton` over more than one value); the field in question is then null.
 */
export async function applyDirectives(data: Data, input: DirectivesInput): Promise<{ data: Data; errors: string[] }> {
  const { set, ...rest } = input;
  const pass: Pass = { ...rest, fields: new WeakMap(), own: new WeakSet(), singles: new WeakMap(), errors: [] };
  await transformObject(data, set, pass);
  return { data, errors: pass.errors };
}

async function transformObject(data: Data, set: SelectionSetNode, pass: Pass): Promise<void> {
  let fields = pass.fields.get(set);
  if (!fields) {
    fields = fieldsOf(set, pass.fragments);
    pass.fields.set(set, fields);
  }
  for (const field of fields) {
    const key = field.alias?.value ?? field.name.value;
    if (!(key in data)) continue;
    await pass.budget.step();
    let value = data[key];
    if (field.selectionSet) {
      for (const item of Array.isArray(value) ? value : [value])
        if (isObject(item)) await transformObject(item, field.selectionSet, pass);
    }
    const directives = field.directives ?? [];
    const single = has(directives, 'singleton');
    if (has(directives, 'first') && Array.isArray(value)) value = value[0] ?? null;
    if (single && Array.isArray(value)) {
      if (value.length > 1) pass.errors.push(`@singleton: '${key}' has ${value.length} values`);
      value = value.length === 1 ? value[0] : null;
    }
    data[key] = value;
    if (single) marks(pass, data).add(key);
    const slice = directives.find((d) => d.name.value === 'slice');
    const path = slice ? (stringArgument(slice, 'path', pass.variables) ?? '$index') : undefined;
    if (has(directives, 'flatten')) {
      delete data[key];
      flatten(data, value, path, pass);
    } else if (path !== undefined && Array.isArray(value)) {
      delete data[key];
      value.forEach((item, index) => {
        data[`${key}.${suffix(item, path, index)}`] = item;
      });
    }
  }
}

/**
 * `@flatten`: the items' fields go to `data` (with the slice's suffix when sliced). A repeating
 * field's children become lists of every item's values, absent values left out, except those marked
 * `@singleton`, which stay single (two values are an error).
 */
function flatten(data: Data, value: unknown, path: string | undefined, pass: Pass): void {
  const repeats = Array.isArray(value);
  const items = repeats ? value : value === null || value === undefined ? [] : [value];
  const parentSingles = marks(pass, data);
  items.forEach((item, index) => {
    if (!isObject(item)) return;
    const tail = path === undefined ? '' : `.${suffix(item, path, index)}`;
    const singles = pass.singles.get(item);
    for (const [name, child] of Object.entries(item)) {
      if (name === SLICE_KEY || child === null || child === undefined) continue;
      const target = name + tail;
      if (singles?.has(name)) {
        if (target in data) {
          pass.errors.push(`@singleton: '${target}' has more than one value`);
          data[target] = null;
        } else data[target] = child;
        parentSingles.add(target);
      } else if (repeats || target in data) {
        // Grown in place once made here: copying the list for each item is quadratic in the items.
        const existing = data[target];
        const list = Array.isArray(existing) && pass.own.has(existing) ? existing : ownList(pass, existing);
        for (const v of Array.isArray(child) ? child : [child]) if (v !== null && v !== undefined) list.push(v);
        data[target] = list;
      } else {
        data[target] = child;
      }
    }
  });
}

/** The name a sliced item is given: its value at the slice's path, or its position (`$index`, or no value). */
function suffix(item: unknown, path: string, index: number): string {
  if (path === '$index' || !isObject(item)) return String(index);
  const named = item[SLICE_KEY] ?? item[path];
  delete item[SLICE_KEY];
  return named === undefined || named === null ? String(index) : String(named);
}

function ownList(pass: Pass, existing: unknown): unknown[] {
  const list = Array.isArray(existing) ? [...existing] : existing === undefined || existing === null ? [] : [existing];
  pass.own.add(list);
  return list;
}

function marks(pass: Pass, data: Data): Set<string> {
  let found = pass.singles.get(data);
  if (!found) {
    found = new Set();
    pass.singles.set(data, found);
  }
  return found;
}

function isObject(value: unknown): value is Data {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The fields of a selection set, fragments spread in. */
function fieldsOf(
  set: SelectionSetNode,
  fragments: Map<string, FragmentDefinitionNode>,
  seen = new Set<string>(),
): FieldNode[] {
  const out: FieldNode[] = [];
  for (const selection of set.selections) {
    if (selection.kind === Kind.FIELD) out.push(selection);
    else if (selection.kind === Kind.INLINE_FRAGMENT) out.push(...fieldsOf(selection.selectionSet, fragments, seen));
    else if (!seen.has(selection.name.value)) {
      const fragment = fragments.get(selection.name.value);
      seen.add(selection.name.value);
      if (fragment) out.push(...fieldsOf(fragment.selectionSet, fragments, seen));
    }
  }
  return out;
}

function has(directives: readonly DirectiveNode[], name: string): boolean {
  return directives.some((d) => d.name.value === name);
}

function stringArgument(directive: DirectiveNode, name: string, variables: Variables): string | undefined {
  const value: ValueNode | undefined = directive.arguments?.find((a) => a.name.value === name)?.value;
  if (!value) return undefined;
  if (value.kind === Kind.STRING || value.kind === Kind.ENUM) return value.value;
  if (value.kind === Kind.VARIABLE) {
    const given = variables?.[value.name.value];
    return typeof given === 'string' ? given : undefined;
  }
  return undefined;
}
