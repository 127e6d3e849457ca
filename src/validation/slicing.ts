import { contentTarget } from './compile';
import type { Report } from './issues';
import type { DiscriminatorType, ElementNode, Slicing, TypedValue, TypeRef } from './model';
import { containsPattern, deepEqual } from './values';

/**
 * Which slice an item of a sliced element belongs to. Each slice's discriminators are turned once
 * into tests (the fixed or pattern values, types, profiles or presence the slice prescribes at
 * the discriminator's path); an item is in the first slice whose tests all pass.
 */

export interface SliceItem {
  value: unknown;
  /** The item's type (for a choice element, the one its property name chose). */
  type: TypeRef;
}

export interface SliceDeps {
  /** Whether a value conforms to a profile (a `profile` discriminator): validated on the side. */
  conforms(value: unknown, profileUrl: string, type: TypeRef): boolean;
}

type Test =
  | { kind: 'value'; path: string[]; expected: { mode: 'fixed' | 'pattern'; value: TypedValue }[] }
  | { kind: 'exists'; path: string[]; present: boolean }
  | { kind: 'type'; path: string[]; types: string[] }
  | { kind: 'profile'; path: string[]; profiles: string[] }
  /** The slice gives nothing to test at that path: no item can be told to belong to it. */
  | { kind: 'never'; reason: string };

export type SliceTester = (item: SliceItem, deps: SliceDeps) => boolean;

const testers = new WeakMap<ElementNode, SliceTester>();

/** The test for one slice; `typeRoot` finds the definition of a type the path goes into. */
export function sliceTester(
  slice: ElementNode,
  slicing: Slicing,
  typeRoot: (type: string) => ElementNode | undefined,
): SliceTester {
  let tester = testers.get(slice);
  if (tester) return tester;
  const tests = slicing.discriminators.map((d) => compileTest(slice, d.type, d.path, typeRoot));
  tester = (item, deps) => tests.every((test) => passes(test, item, deps));
  testers.set(slice, tester);
  return tester;
}

function compileTest(
  slice: ElementNode,
  type: DiscriminatorType,
  path: string,
  typeRoot: (type: string) => ElementNode | undefined,
): Test {
  const segments = splitPath(path);
  if (segments.some((s) => s.startsWith('resolve(')))
    return { kind: 'never', reason: `discriminator path '${path}' needs resolve()` };
  const nodes = navigate(slice, segments, typeRoot);
  switch (type) {
    case 'value':
    case 'pattern': {
      const expected: { mode: 'fixed' | 'pattern'; value: TypedValue }[] = [];
      for (const node of nodes) {
        if (node.fixed) expected.push({ mode: 'fixed', value: node.fixed });
        else if (node.pattern) expected.push({ mode: 'pattern', value: node.pattern });
      }
      // An extension slice known only by its type profile: the profile's url is the url to match.
      if (expected.length === 0 && segments.length === 1 && segments[0] === 'url') {
        for (const t of slice.types)
          for (const p of t.profiles) expected.push({ mode: 'fixed', value: { type: 'uri', value: p.split('|')[0] } });
      }
      if (expected.length === 0)
        return { kind: 'never', reason: `slice '${slice.sliceName}' has no fixed or pattern value at '${path}'` };
      return { kind: 'value', path: segments, expected };
    }
    case 'exists': {
      const node = nodes[0];
      if (!node) return { kind: 'never', reason: `slice '${slice.sliceName}' has no element at '${path}'` };
      return { kind: 'exists', path: segments, present: node.min > 0 };
    }
    case 'type': {
      const types = [...new Set(nodes.flatMap((n) => n.types.map((t) => t.code)))];
      return { kind: 'type', path: segments, types };
    }
    case 'profile': {
      const profiles = [...new Set(nodes.flatMap((n) => n.types.flatMap((t) => t.profiles)))];
      if (profiles.length === 0)
        return { kind: 'never', reason: `slice '${slice.sliceName}' names no profile at '${path}'` };
      return { kind: 'profile', path: segments, profiles };
    }
    default:
      return { kind: 'never', reason: `discriminator type '${String(type)}' is not supported` };
  }
}

/** `code.coding.code`, `extension('http://x').value`, `$this`, `ofType(Quantity)` into segments. */
function splitPath(path: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let current = '';
  for (const c of path) {
    if (c === '(') depth++;
    if (c === ')') depth--;
    if (c === '.' && depth === 0) {
      out.push(current);
      current = '';
    } else current += c;
  }
  out.push(current);
  return out.filter((s) => s !== '$this' && s !== '');
}

/**
 * The element nodes at a path below a slice. Where an element on the way is itself sliced, its
 * slices are followed too: a re-slice (`code.coding:systolic`) is where the values often are.
 */
function navigate(
  start: ElementNode,
  segments: string[],
  typeRoot: (type: string) => ElementNode | undefined,
): ElementNode[] {
  let current = [start];
  for (const segment of segments) {
    const next: ElementNode[] = [];
    for (const node of current) {
      const ext = /^extension\(['"](.+)['"]\)$/.exec(segment);
      if (ext) {
        const extension = childrenOf(node, typeRoot).find((c) => c.name === 'extension');
        for (const s of extension?.slices ?? [])
          if (s.types.some((t) => t.profiles.some((p) => p.split('|')[0] === ext[1]))) next.push(s);
        continue;
      }
      const ofType = /^ofType\((.+)\)$/.exec(segment);
      if (ofType) {
        next.push(node);
        continue;
      }
      for (const child of childrenOf(node, typeRoot)) {
        if (child.name !== segment) continue;
        next.push(child, ...child.slices);
      }
    }
    current = next;
  }
  return current;
}

function childrenOf(node: ElementNode, typeRoot: (type: string) => ElementNode | undefined): ElementNode[] {
  const target = node.contentReference ? contentTarget(node) : node;
  if (target.children.length > 0) return target.children;
  const type = target.types[0];
  if (!type) return [];
  return typeRoot(type.profiles[0] ?? type.code)?.children ?? [];
}

function passes(test: Test, item: SliceItem, deps: SliceDeps): boolean {
  switch (test.kind) {
    case 'never':
      return false;
    case 'exists':
      return valuesAt(item.value, test.path).length > 0 === test.present;
    case 'value': {
      const values = valuesAt(item.value, test.path);
      return test.expected.some((e) =>
        values.some((v) => (e.mode === 'fixed' ? deepEqual(v, e.value.value) : containsPattern(v, e.value.value))),
      );
    }
    case 'type': {
      if (test.path.length === 0) return test.types.includes(item.type.code) || test.types.length === 0;
      return valuesAt(item.value, test.path).some((v) => test.types.includes(typeOfValue(v)));
    }
    case 'profile': {
      const values = test.path.length === 0 ? [item.value] : valuesAt(item.value, test.path);
      return values.some((v) => test.profiles.some((p) => deps.conforms(v, p, item.type)));
    }
  }
}

function typeOfValue(value: unknown): string {
  if (value && typeof value === 'object' && typeof (value as { resourceType?: unknown }).resourceType === 'string') {
    return (value as { resourceType: string }).resourceType;
  }
  return '';
}

/** The values at a path in an instance, arrays flattened, choice names (`value` -> `valueQuantity`) found. */
function valuesAt(value: unknown, path: string[]): unknown[] {
  let current: unknown[] = [value];
  for (const segment of path) {
    const next: unknown[] = [];
    const ext = /^extension\(['"](.+)['"]\)$/.exec(segment);
    for (const v of current) {
      if (!v || typeof v !== 'object' || Array.isArray(v)) continue;
      const obj = v as Record<string, unknown>;
      if (ext) {
        for (const e of asArray(obj.extension)) if ((e as { url?: unknown })?.url === ext[1]) next.push(e);
        continue;
      }
      if (/^ofType\(/.test(segment)) {
        next.push(v);
        continue;
      }
      if (obj[segment] !== undefined) {
        next.push(...asArray(obj[segment]));
        continue;
      }
      for (const key in obj) {
        if (key.length > segment.length && key.startsWith(segment) && /[A-Z]/.test(key[segment.length]))
          next.push(...asArray(obj[key]));
      }
    }
    current = next;
  }
  return current.filter((v) => v !== null && v !== undefined);
}

function asArray(value: unknown): unknown[] {
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

/** An item of a sliced element, placed: the slice it belongs to (or the sliced element when none), and its type there. */
export interface Placed<I> {
  item: I;
  at: ElementNode;
  itemType: TypeRef;
}

export interface PlaceOptions {
  report: Report;
  deps: SliceDeps;
  typeRoot(type: string): ElementNode | undefined;
}

/**
 * Places each item of a sliced element in its slice, checking the slicing's rules (closed,
 * openAtEnd, ordered) and each slice's cardinality on the way.
 */
export function placeInSlices<I extends { value: unknown; path: string }>(
  items: I[],
  node: ElementNode,
  type: TypeRef,
  options: PlaceOptions,
): Placed<I>[] {
  const { report } = options;
  const slicing = node.slicing as Slicing;
  const testers = node.slices.map((s) => sliceTester(s, slicing, options.typeRoot));
  const counts = node.slices.map(() => 0);
  const placed: Placed<I>[] = [];
  let last = -1;
  let unmatchedSeen = false;
  for (const item of items) {
    const hit = testers.findIndex((test) => test({ value: item.value, type }, options.deps));
    if (hit < 0) {
      unmatchedSeen = true;
      if (slicing.rules === 'closed')
        report.error(
          'structure',
          item.path,
          `does not match any slice of ${node.path} defined by ${node.profile.url}, and the slicing is closed`,
        );
      placed.push({ item, at: node, itemType: type });
      continue;
    }
    const slice = node.slices[hit];
    counts[hit]++;
    if (slicing.ordered && hit < last)
      report.error(
        'structure',
        item.path,
        `is in slice '${slice.sliceName}', out of the order ${node.profile.url} requires`,
      );
    if (slicing.rules === 'openAtEnd' && unmatchedSeen)
      report.error(
        'structure',
        item.path,
        `is in slice '${slice.sliceName}' after an item in no slice; the slicing is open at the end only`,
      );
    last = Math.max(last, hit);
    placed.push({ item, at: slice, itemType: slice.types.find((t) => t.code === type.code) ?? type });
  }
  const at = items[0]?.path.replace(/\[\d+\]$/, '') ?? node.path;
  node.slices.forEach((slice, i) => {
    if (counts[i] < slice.min) reportSliceMinimum(report, node, slice, counts[i], at);
    if (counts[i] > slice.max)
      report.error(
        'structure',
        at,
        `${node.path}:${slice.sliceName}: maximum allowed = ${slice.max}, but found ${counts[i]} (from ${node.profile.url})`,
      );
  });
  return placed;
}

export function reportSliceMinimum(
  report: Report,
  node: ElementNode,
  slice: ElementNode,
  count: number,
  at: string,
): void {
  report.error(
    'required',
    at,
    `${node.path}:${slice.sliceName}: minimum required = ${slice.min}, but only found ${count} (from ${node.profile.url})`,
  );
}
