import { fhirError, type FhirError } from '../fhir/errors';
import { byteSize, depthOf, refuseTooMany, SizeBound, type PatchBounds } from './patch-bounds';

/**
 * JSON Patch (RFC 6902), applied here operation by operation so that each step is bounded: a
 * pointer follows only a document's own members (`__proto__`, `constructor` and `prototype` name
 * no FHIR element and reach an object's prototype, so they are refused), an operation that would
 * make the resource too large or too deep is refused before it copies anything, the whole resource
 * is never replaced or removed (that is PUT or DELETE), and the event loop is given back between
 * operations. A patch that is malformed is a 400; one that does not fit the resource, a 422.
 */

type Pointer = string[];
type Container = Record<string, unknown> | unknown[];

interface Operation {
  op: 'add' | 'remove' | 'replace' | 'move' | 'copy' | 'test';
  path: Pointer;
  from?: Pointer;
  value?: unknown;
}

/** Where an operation acts: its place in the patch, and the running size and depth of the result. */
interface Step {
  index: number;
  /** How a failure names the operation: its index, what it does and where. */
  label: string;
  size: SizeBound;
  depth: DepthBound;
  bounds: PatchBounds;
}

/**
 * An upper bound on the depth of the resource being patched, so that a value copied or moved within
 * it need not be walked to know how deep it is: it is no deeper than the resource below where it was.
 */
interface DepthBound {
  bound: number;
}

const OPS: ReadonlySet<string> = new Set(['add', 'remove', 'replace', 'move', 'copy', 'test']);
const FORBIDDEN: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);
const INDEX = /^(0|[1-9][0-9]{0,8})$/;

/** Applies `operations` to `document` in place (the caller's copy); answers the patched document. */
export async function applyJsonPatch(
  document: Record<string, unknown>,
  operations: unknown[],
  bounds: PatchBounds,
): Promise<Record<string, unknown>> {
  refuseTooMany(operations.length, bounds);
  // Every operation is read before any is applied: a malformed last one changes nothing.
  const parsed = operations.map((raw, i) => parseOperation(raw, i));
  const size = new SizeBound(document, bounds.maxBytes);
  const depth = { bound: depthOf(document) };
  for (const [index, operation] of parsed.entries()) {
    await apply(document, operation, { index, label: labelOf(index, operation), size, depth, bounds });
    await bounds.budget.step();
  }
  return document;
}

function parseOperation(raw: unknown, i: number): Operation {
  if (!isObject(raw)) throw invalid(i, 'is not an object');
  const { op } = raw;
  if (typeof op !== 'string' || !OPS.has(op)) throw invalid(i, 'has no op of add, remove, replace, move, copy or test');
  const operation: Operation = { op: op as Operation['op'], path: pointer(raw.path, i, 'path') };
  if (op === 'move' || op === 'copy') operation.from = pointer(raw.from, i, 'from');
  if (op === 'add' || op === 'replace' || op === 'test') {
    if (!Object.hasOwn(raw, 'value')) throw invalid(i, `has op '${op}' but no value`);
    operation.value = raw.value;
  }
  return operation;
}

function pointer(text: unknown, i: number, what: string): Pointer {
  if (typeof text !== 'string' || (text !== '' && !text.startsWith('/')))
    throw invalid(i, `has a '${what}' that is not a JSON Pointer`);
  if (text === '') return [];
  return text
    .slice(1)
    .split('/')
    .map((token) => {
      if (/~(?![01])/.test(token)) throw invalid(i, `has a '${what}' with a '~' that is not ~0 or ~1`);
      const name = token.replace(/~1/g, '/').replace(/~0/g, '~');
      if (FORBIDDEN.has(name)) throw invalid(i, `has a '${what}' naming '${name}', which is no element of a resource`);
      return name;
    });
}

async function apply(document: Record<string, unknown>, operation: Operation, at: Step): Promise<void> {
  const { op, path } = operation;
  if (path.length === 0 && op !== 'test')
    throw failed(at, 'it would replace or remove the whole resource; use PUT or DELETE for that');
  switch (op) {
    case 'add':
      return add(document, path, operation.value, at);
    case 'remove':
      remove(document, path, at);
      return;
    case 'replace':
      return replace(document, path, operation.value, at);
    case 'move':
      return move(document, operation.from as Pointer, path, at);
    case 'copy':
      return copy(document, operation.from as Pointer, path, at);
    case 'test':
      if (!equal(valueAt(document, path, at, 'path'), operation.value))
        throw failed(at, 'the value at the path is not the one the test names');
  }
}

/** What is known of a value before it is placed: its bytes, and where in the resource it comes from. */
interface Measured {
  bytes: number;
  from?: Pointer;
}

function add(document: Record<string, unknown>, path: Pointer, value: unknown, at: Step, measured?: Measured): void {
  const parent = parentOf(document, path, at, 'path');
  const key = path[path.length - 1];
  if (Array.isArray(parent)) {
    const index = key === '-' ? parent.length : INDEX.test(key) ? Number(key) : -1;
    if (index < 0 || index > parent.length) {
      throw failed(
        at,
        `the path does not exist: ${where(path.slice(0, -1))} has ${items(parent.length)}, so an item is added at 0 to ${parent.length}, or at -`,
      );
    }
    take(at, path, value, placeCost(parent, key), measured);
    parent.splice(index, 0, value);
    return;
  }
  take(at, path, value, placeCost(parent, key), measured);
  parent[key] = value;
}

/** The bytes placing a value adds beside its own: a comma in a list, `"key":` in an object, less what it replaces (RFC 6902 4.1). */
function placeCost(parent: Container, key: string): number {
  if (Array.isArray(parent)) return 1;
  return Object.hasOwn(parent, key) ? -byteSize(parent[key]) : memberBytes(key);
}

/**
 * A copy is measured and checked before it is made, and made from the JSON text that measured it;
 * the event loop is given back between the two, each as long as one pass over the value.
 */
async function copy(document: Record<string, unknown>, from: Pointer, path: Pointer, at: Step): Promise<void> {
  const text = JSON.stringify(valueAt(document, from, at, 'from'));
  const measured = { bytes: Buffer.byteLength(text), from };
  at.size.check(measured.bytes + placeCost(parentOf(document, path, at, 'path'), path[path.length - 1]), at.index);
  await at.bounds.budget.step(0);
  add(document, path, JSON.parse(text) as unknown, at, measured);
}

function remove(document: Record<string, unknown>, path: Pointer, at: Step, role: Role = 'path'): unknown {
  const parent = parentOf(document, path, at, role);
  const key = path[path.length - 1];
  if (Array.isArray(parent)) {
    const index = itemIndex(parent, path, at, role);
    at.size.grow(-(byteSize(parent[index]) + 1), at.index);
    return parent.splice(index, 1)[0];
  }
  if (!Object.hasOwn(parent, key)) throw absent(at, role, path, path.length - 1, parent);
  const removed = parent[key];
  at.size.grow(-(byteSize(removed) + memberBytes(key)), at.index);
  delete parent[key];
  return removed;
}

function replace(document: Record<string, unknown>, path: Pointer, value: unknown, at: Step): void {
  const parent = parentOf(document, path, at, 'path');
  const key = path[path.length - 1];
  if (Array.isArray(parent)) {
    const index = itemIndex(parent, path, at, 'path');
    take(at, path, value, -byteSize(parent[index]));
    parent[index] = value;
    return;
  }
  if (!Object.hasOwn(parent, key)) throw absent(at, 'path', path, path.length - 1, parent);
  take(at, path, value, -byteSize(parent[key]));
  parent[key] = value;
}

/** A move is a remove and an add of the same value; a value cannot be moved into its own members (RFC 6902 4.4). */
function move(document: Record<string, unknown>, from: Pointer, path: Pointer, at: Step): void {
  if (from.length === 0 || (from.length < path.length && from.every((token, k) => token === path[k]))) {
    throw failed(at, 'a value cannot be moved into itself');
  }
  if (from.length === path.length && from.every((token, k) => token === path[k])) {
    valueAt(document, from, at, 'from');
    return;
  }
  const value = remove(document, from, at, 'from');
  add(document, path, value, at, { bytes: byteSize(value), from });
}

/**
 * Counts the bytes and the depth a value placed at `path` adds (beside `extra`: separators, or what
 * it replaces), before it is placed. A value from the resource itself is bounded by the resource's
 * depth below where it was, and walked only when that bound is not enough.
 */
function take(at: Step, path: Pointer, value: unknown, extra: number, measured?: Measured): void {
  at.size.grow((measured?.bytes ?? byteSize(value)) + extra, at.index);
  const bounded = measured?.from ? path.length + Math.max(0, at.depth.bound - measured.from.length) : Infinity;
  const depth = bounded <= at.bounds.maxDepth ? bounded : path.length + depthOf(value);
  if (depth > at.bounds.maxDepth)
    throw failed(at, `it would nest the resource more than ${at.bounds.maxDepth} levels deep`);
  at.depth.bound = Math.max(at.depth.bound, depth);
}

/** Which pointer of an operation a failure is about. */
type Role = 'path' | 'from';

function parentOf(document: Record<string, unknown>, path: Pointer, at: Step, role: Role): Container {
  const parent = valueAt(document, path.slice(0, -1), at, role);
  if (!Array.isArray(parent) && !isObject(parent)) throw absent(at, role, path, path.length - 1, parent);
  return parent;
}

function itemIndex(list: unknown[], path: Pointer, at: Step, role: Role): number {
  const key = path[path.length - 1];
  if (!INDEX.test(key) || Number(key) >= list.length) throw absent(at, role, path, path.length - 1, list);
  return Number(key);
}

/** The value a pointer names, following own members only. */
function valueAt(document: unknown, path: Pointer, at: Step, role: Role): unknown {
  let value = document;
  for (const [depth, token] of path.entries()) {
    const next = Array.isArray(value)
      ? INDEX.test(token) && Number(token) < value.length
        ? value[Number(token)]
        : undefined
      : isObject(value) && Object.hasOwn(value, token)
        ? value[token]
        : undefined;
    // JSON has no undefined: undefined is absence.
    if (next === undefined) throw absent(at, role, path, depth, value);
    value = next;
  }
  return value;
}

/** The pointer stops at `path[step]`: says which of its steps is missing, in `container`, and why. */
function absent(at: Step, role: Role, path: Pointer, step: number, container: unknown): FhirError {
  const token = path[step];
  const above = where(path.slice(0, step));
  const why = Array.isArray(container)
    ? `${above} has ${items(container.length)}, and no item '${token}'`
    : isObject(container)
      ? `${above} has no member '${token}'`
      : `${above} is ${container === null ? 'null' : `a ${typeof container}`}, with no members`;
  return failed(at, `${role === 'path' ? 'the path' : "'from'"} does not exist: ${why}`);
}

/** JSON equality (RFC 6902 4.6): same type; lists item by item; objects member by member, in any order. */
function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((item, k) => equal(item, b[k]));
  if (!isObject(a) || !isObject(b)) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && equal(a[key], b[key]));
}

/** The bytes of `"key":` and its comma. */
function memberBytes(key: string): number {
  return Buffer.byteLength(JSON.stringify(key)) + 2;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function show(path: Pointer): string {
  const text = path.map((token) => `/${token.replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');
  return text.length > 100 ? `${text.slice(0, 100)}...` : text;
}

/** `where` a pointer leads, in words: the resource itself, or the pointer. */
function where(path: Pointer): string {
  return path.length === 0 ? 'the resource' : show(path);
}

function items(n: number): string {
  return n === 1 ? '1 item' : `${n} items`;
}

/**
 * Operations are numbered from 0, as the items of the JSON array that holds them (and as a JSON
 * Pointer into the patch would number them); the label says so, since a reader may count from 1.
 */
function labelOf(index: number, operation: Operation): string {
  const from = operation.from ? ` from ${show(operation.from) || "''"}` : '';
  return `operation ${index} (numbered from 0: ${operation.op} ${show(operation.path) || "''"}${from})`;
}

function invalid(i: number, reason: string): FhirError {
  return fhirError('ERR_PATCH_INVALID', { reason: `operation ${i} (numbered from 0) ${reason}` });
}

function failed(at: Step, reason: string): FhirError {
  return fhirError('ERR_PATCH_FAILED', { reason: `${at.label}: ${reason}` });
}
