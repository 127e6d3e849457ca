import { twin } from '../child-index';
import type { ChildSlot, ElementNode, TypeRef } from '../model';
import { primitiveProblem } from '../primitives';
import type { Report } from '../issues';
import type { Scope } from '../resource-rules';
import { placeInSlices } from '../slicing';
import { show } from '../values';
import type { Walk } from '../walker';
import { collectBinding, evaluateInvariant } from './constraints';
import type { Cursor } from './cursor';

/**
 * Primitive properties in the walk: a JSON value (`birthDate`) read together with its `_birthDate`
 * twin (an object that may carry only `id` and `extension`), as single values or as two arrays
 * of the same length.
 */

/** A value and where it is. */
export interface Item {
  value: unknown;
  path: string;
}

/** The primitive property `name` of `obj` (whose cursor is given), with its `_name` twin. */
export function primitiveProperty(
  walk: Walk,
  obj: Record<string, unknown>,
  name: string,
  slot: ChildSlot,
  cursor: Cursor,
): void {
  const { node, type } = slot;
  const value = obj[name];
  const ext = obj[twin(name)];
  const at = cursor.child(node.choice ? `${node.name}.ofType(${type.code})` : node.name);
  if (node.isArray) primitiveArray(walk, { name, value, ext }, slot, at, cursor.path);
  else {
    if (Array.isArray(value)) walk.error('structure', at.path, 'must be a single value, not a JSON array');
    else if (value === null) walk.error('structure', at.path, 'null is not allowed here');
    else if (value !== undefined) primitiveValues(walk, [{ value, path: at.path }], slot, cursor.scope);
    if (ext !== undefined) {
      if (Array.isArray(ext) || ext === null)
        walk.error('structure', `${cursor.path}._${name}`, 'must be a single JSON object');
      else elementExtensions(walk, ext, at);
    }
  }
  if (walk.options.invariants && node.constraints.length > 0 && value !== undefined) {
    // Evaluated on the parent: the engine types a primitive by where it is found.
    const base = node.path.slice(0, node.path.lastIndexOf('.')).replace(/\[x\]/g, '');
    for (const c of node.constraints)
      evaluateInvariant(walk, c, obj, { base, env: cursor.env, path: at.path, primitive: name });
  }
}

/** A repeating primitive: the values and their twins, paired by position. */
function primitiveArray(
  walk: Walk,
  property: { name: string; value: unknown; ext: unknown },
  slot: ChildSlot,
  at: Cursor,
  parentPath: string,
): void {
  const { name, value, ext } = property;
  const values = primitiveList(walk, value, at.path);
  const exts = primitiveList(walk, ext, `${parentPath}._${name}`);
  if (value !== undefined && ext !== undefined && values.length !== exts.length) {
    walk.error('structure', at.path, `'${name}' and '_${name}' must be arrays of the same length`);
  }
  if (values.length === 0 && exts.length === 0 && (value !== undefined || ext !== undefined)) {
    walk.error('structure', at.path, 'must not be an empty array (leave the property out instead)');
  }
  const n = Math.max(values.length, exts.length);
  const items: Item[] = [];
  for (let i = 0; i < n; i++) {
    const v = values[i] ?? null;
    const e = exts[i] ?? null;
    if (v === null && e === null) walk.error('structure', `${at.path}[${i}]`, 'null with no extension in its place');
    if (v !== null) items.push({ value: v, path: `${at.path}[${i}]` });
    if (e !== null) elementExtensions(walk, e, at.index(i));
  }
  primitiveValues(walk, items, slot, at.scope);
}

function primitiveList(report: Report, value: unknown, at: string): unknown[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    report.error('structure', at, 'must be a JSON array');
    return [value];
  }
  return value;
}

function primitiveValues(walk: Walk, items: Item[], { node, type }: ChildSlot, scope: Scope): void {
  if (node.slices.length > 0 && node.slicing) {
    for (const { item, at, itemType } of placeInSlices(items, node, type, walk.placing))
      primitiveValue(walk, item, at, itemType, scope);
  } else {
    for (const item of items) primitiveValue(walk, item, node, type, scope);
  }
}

function primitiveValue(walk: Walk, item: Item, node: ElementNode, type: TypeRef, scope: Scope): void {
  const { value, path: at } = item;
  const problem = primitiveProblem(type.code, value);
  if (problem) {
    walk.error(problem.code, at, problem.message);
    return;
  }
  if (node.fixed && node.fixed.value !== value)
    walk.error('value', at, `is '${show(value)}' but must be '${show(node.fixed.value)}'`);
  if (node.pattern && node.pattern.value !== value)
    walk.error('value', at, `is '${show(value)}' but must be '${show(node.pattern.value)}'`);
  if (node.maxLength !== undefined && typeof value === 'string' && value.length > node.maxLength) {
    walk.error('value', at, `is ${value.length} characters long; at most ${node.maxLength} are allowed`);
  }
  if (node.minValue && compare(value, node.minValue.value) < 0)
    walk.error('value', at, `is below the minimum ${show(node.minValue.value)}`);
  if (node.maxValue && compare(value, node.maxValue.value) > 0)
    walk.error('value', at, `is above the maximum ${show(node.maxValue.value)}`);
  if (
    typeof value === 'string' &&
    value.charCodeAt(0) === 35 &&
    (type.code === 'canonical' || type.code === 'uri' || type.code === 'url')
  ) {
    scope.localRefs.add(value);
  }
  if (type.code === 'code' && walk.options.terminology)
    collectBinding(walk, node, { kind: 'code', codings: [{ code: value as string }], path: at });
}

/** `_name`: an object that may carry only `id` and `extension`, walked one level below `at`. */
function elementExtensions(walk: Walk, value: unknown, at: Cursor): void {
  const element = walk.session.base('Element');
  if (!element) return;
  walk.complex(value, element.root, { code: 'Element', profiles: [], targetProfiles: [] }, at);
}

/** Numbers by value, dates and times by text (same precision compares correctly). */
function compare(a: unknown, b: unknown): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0;
}
