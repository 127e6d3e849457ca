import { Kind, visit, type DocumentNode, type DirectiveNode, type FieldNode, type FragmentDefinitionNode, type SelectionSetNode, type ValueNode } from 'graphql';

/**
 * The FHIR directives of graphql.html, applied to the result: `@first` (the first item of a list,
 * or null), `@singleton` (a list known to hold one item, as that item), `@flatten` (the field's
 * own object disappears: its fields go to the parent, as lists when the field repeats), and
 * `@slice(path: ...)` (a list becomes one field per item, named `field.<the item's path value>`;
 * `$index` names them by position). `@skip`/`@include` are GraphQL's own and already applied.
 */

type Data = Record<string, unknown>;

/** Where a slice's name is read in each item: a field added to the selection (the client need not select it). */
const SLICE_KEY = '__slice';

/**
 * Adds the element `@slice(path: ...)` names to the sliced field's selection, under an alias of
 * ours, so each item's value is in the result even when the query does not ask for it.
 */
export function prepareDirectives(document: DocumentNode): DocumentNode {
  return visit(document, {
    Field(node) {
      const slice = node.directives?.find((d) => d.name.value === 'slice');
      const path = slice?.arguments?.find((a) => a.name.value === 'path')?.value;
      if (!node.selectionSet || path?.kind !== Kind.STRING || !/^[A-Za-z][A-Za-z0-9]*$/.test(path.value)) return undefined;
      const added = { kind: Kind.FIELD, alias: { kind: Kind.NAME, value: SLICE_KEY }, name: { kind: Kind.NAME, value: path.value } } as const;
      return { ...node, selectionSet: { ...node.selectionSet, selections: [...node.selectionSet.selections, added] } };
    },
  });
}
type Variables = Record<string, unknown> | undefined;

export function applyDirectives(data: Data, set: SelectionSetNode, fragments: Map<string, FragmentDefinitionNode>, variables: Variables): Data {
  transformObject(data, set, fragments, variables);
  return data;
}

function transformObject(data: Data, set: SelectionSetNode, fragments: Map<string, FragmentDefinitionNode>, variables: Variables): void {
  for (const field of fieldsOf(set, fragments)) {
    const key = field.alias?.value ?? field.name.value;
    if (!(key in data)) continue;
    let value = data[key];
    if (field.selectionSet) {
      const children = field.selectionSet;
      const visit = (item: unknown) => {
        if (item && typeof item === 'object' && !Array.isArray(item)) transformObject(item as Data, children, fragments, variables);
      };
      if (Array.isArray(value)) value.forEach(visit);
      else visit(value);
    }
    const directives = field.directives ?? [];
    if (has(directives, 'first') || has(directives, 'singleton')) {
      value = Array.isArray(value) ? (value[0] ?? null) : value;
      data[key] = value;
    }
    const slice = directives.find((d) => d.name.value === 'slice');
    if (slice && Array.isArray(value)) {
      const path = stringArgument(slice, 'path', variables) ?? '$index';
      delete data[key];
      value.forEach((item, index) => {
        const record = item as Data | null;
        const named = record?.[SLICE_KEY] ?? record?.[path];
        if (record) delete record[SLICE_KEY];
        data[`${key}.${path === '$index' || named === undefined || named === null ? index : String(named)}`] = item;
      });
      continue;
    }
    if (has(directives, 'flatten')) {
      delete data[key];
      const items = Array.isArray(value) ? value : value === null || value === undefined ? [] : [value];
      const repeats = Array.isArray(value);
      for (const item of items) {
        if (!item || typeof item !== 'object') continue;
        for (const [name, child] of Object.entries(item as Data)) {
          if (repeats || name in data) {
            const existing = data[name];
            const list = Array.isArray(existing) ? existing : existing === undefined ? [] : [existing];
            data[name] = [...list, ...(Array.isArray(child) ? child : [child])];
          } else {
            data[name] = child;
          }
        }
      }
    }
  }
}

/** The fields of a selection set, fragments spread in. */
function fieldsOf(set: SelectionSetNode, fragments: Map<string, FragmentDefinitionNode>, seen = new Set<string>()): FieldNode[] {
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
