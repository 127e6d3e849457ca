import { contentTarget } from './compile';
import type { ChildSlot, ElementNode, TypeRef } from './model';
import { isPrimitive } from './primitives';

/**
 * What the JSON properties of an element mean, worked out once per element: each property name
 * (`valueQuantity`, `given`) to its child and type, and the children the cardinality pass must
 * look at (required ones, bounded ones, choices), so checking an object is one loop over its keys.
 */
export interface ChildIndex {
  keys: Map<string, ChildSlot>;
  /** Children with min > 0. */
  required: ElementNode[];
  /** Children whose max is below what their JSON form allows (max 0, or a bounded array). */
  bounded: ElementNode[];
  /** Choice children (`value[x]`): at most one of their names may appear. */
  choices: ElementNode[];
  /** Children with a slice that is required: absent, they still miss that slice. */
  slicesRequired: ElementNode[];
  /** The property names of each child. */
  names: Map<ElementNode, string[]>;
}

const indexes = new WeakMap<ElementNode, ChildIndex>();

export function childIndex(parent: ElementNode): ChildIndex {
  let index = indexes.get(parent);
  if (index) return index;
  index = { keys: new Map(), required: [], bounded: [], choices: [], slicesRequired: [], names: new Map() };
  for (const child of parent.children) {
    const names: string[] = [];
    const types = child.contentReference ? contentTypes(child) : child.types;
    if (child.choice) {
      for (const type of types) {
        const name = child.name + type.code[0].toUpperCase() + type.code.slice(1);
        index.keys.set(name, { node: child, type, primitive: isPrimitive(type.code) });
        names.push(name);
      }
      index.choices.push(child);
    } else {
      const type = types[0] ?? { code: 'BackboneElement', profiles: [], targetProfiles: [] };
      index.keys.set(child.name, { node: child, type, primitive: isPrimitive(type.code) });
      names.push(child.name);
    }
    index.names.set(child, names);
    if (child.min > 0) index.required.push(child);
    if (child.slices.some((s) => s.min > 0)) index.slicesRequired.push(child);
    if (child.max === 0 || (child.isArray && child.max < Infinity)) index.bounded.push(child);
  }
  indexes.set(parent, index);
  return index;
}

function contentTypes(node: ElementNode): TypeRef[] {
  const target = contentTarget(node);
  return target.types.length > 0 ? target.types : [{ code: 'BackboneElement', profiles: [], targetProfiles: [] }];
}

/** `_name` of each property name, made once. */
const twins = new Map<string, string>();

export function twin(name: string): string {
  let t = twins.get(name);
  if (t === undefined) {
    t = `_${name}`;
    twins.set(name, t);
  }
  return t;
}

/** How many values a child has in this object (a primitive counts its `_name` twin too). */
export function countOf(obj: Record<string, unknown>, names: string[]): number {
  let count = 0;
  for (const name of names) count += Math.max(size(obj[name]), size(obj[twin(name)]));
  return count;
}

function size(value: unknown): number {
  if (value === undefined) return 0;
  return Array.isArray(value) ? value.length : 1;
}
