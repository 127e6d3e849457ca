import type { Parameters, ParametersParameter, Resource } from 'fhir/r4';
import { fhirError } from '../fhir/errors';
import type { ElementModel } from '../fhir/model/model';
import { applyJsonPatch } from './json-patch';
import { byteSize, refuseTooMany, SizeBound, type PatchBounds } from './patch-bounds';

/**
 * PATCH (R4 http.html#patch): JSON Patch (RFC 6902, `application/json-patch+json`) and FHIRPath
 * Patch (a Parameters body, R4 fhirpatch.html). The result must still be the same resource (type
 * and id) and pass the same checks as any write, which the caller applies. Both kinds are applied
 * under `bounds` (see patch-bounds.ts): a small patch cannot make a huge resource.
 */

export interface PatchOptions {
  model: ElementModel;
  bounds: PatchBounds;
}

export async function applyPatch(
  resource: Resource,
  body: unknown,
  contentType: string | undefined,
  options: PatchOptions,
): Promise<Resource> {
  const copy = structuredClone(resource) as Resource;
  let patched: Resource;
  if (Array.isArray(body))
    patched = (await applyJsonPatch(
      copy as unknown as Record<string, unknown>,
      body,
      options.bounds,
    )) as unknown as Resource;
  else if (isParameters(body)) patched = await applyFhirPathPatch(copy, body, options);
  else throw fhirError('ERR_PATCH_FORMAT', { contentType: (contentType ?? '(none)').slice(0, 100) });
  if (patched.resourceType !== resource.resourceType || patched.id !== resource.id) {
    throw fhirError('ERR_PATCH_FAILED', { reason: 'a patch may not change the resource type or id' });
  }
  return patched;
}

function isParameters(body: unknown): body is Parameters {
  return (
    typeof body === 'object' && body !== null && (body as { resourceType?: unknown }).resourceType === 'Parameters'
  );
}

// ---------------------------------------------------------------------------------------------
// FHIRPath Patch

/** Where a value sits: its container and key (an index for an array element). */
interface Location {
  container: Record<string, unknown> | unknown[];
  key: string | number;
  /** The type that defines the element, and its path there (for children's cardinality). */
  root: string;
  path: string;
}

/** The resource an operation of a FHIRPath Patch acts on, and what bounds it. */
interface PatchTarget {
  holder: Record<string, unknown>;
  resource: Resource;
  model: ElementModel;
  size: SizeBound;
}

async function applyFhirPathPatch(resource: Resource, body: Parameters, options: PatchOptions): Promise<Resource> {
  const holder: Record<string, unknown> = { resource };
  const operations = operationsOf(body);
  refuseTooMany(operations.length, options.bounds);
  const on: PatchTarget = {
    holder,
    resource,
    model: options.model,
    size: new SizeBound(resource, options.bounds.maxBytes),
  };
  for (const [i, operation] of operations.entries()) {
    applyOperation(operation, i, on);
    await options.bounds.budget.step();
  }
  return holder.resource as Resource;
}

/** The operations of a FHIRPath Patch, each an object whose parts are objects (the body is not checked as a stored resource is). */
function operationsOf(body: Parameters): ParametersParameter[] {
  const operations: unknown = body.parameter ?? [];
  if (!Array.isArray(operations))
    throw fhirError('ERR_PATCH_INVALID', { reason: 'Parameters.parameter is not a list' });
  operations.forEach((operation: unknown, i) => {
    const parts = isRecord(operation) ? (operation.part ?? []) : undefined;
    if (!Array.isArray(parts) || !parts.every(isRecord))
      throw fhirError('ERR_PATCH_INVALID', { reason: `parameter[${i}] is not an operation with parts` });
  });
  return operations as ParametersParameter[];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function applyOperation(operation: ParametersParameter, i: number, on: PatchTarget): void {
  const { holder, resource, model, size } = on;
  if (operation.name !== 'operation')
    throw fhirError('ERR_PATCH_INVALID', { reason: `parameter[${i}] is not an operation` });
  const part = (name: string) => operation.part?.find((p) => p.name === name);
  const text = (name: string): string | undefined => {
    const p = part(name);
    const value: unknown = p?.valueCode ?? p?.valueString ?? p?.valueUri;
    return typeof value === 'string' ? value : undefined;
  };
  const integer = (name: string): number | undefined => {
    const value: unknown = part(name)?.valueInteger;
    return Number.isInteger(value) ? (value as number) : undefined;
  };
  const type = text('type');
  const path = text('path');
  if (!type || !path) throw fhirError('ERR_PATCH_INVALID', { reason: `operation ${i} needs a type and a path` });
  const located = locate(holder, path, resource.resourceType, model);
  const one = (what: string): Location => {
    if (located.length !== 1)
      throw fhirError('ERR_PATCH_FAILED', {
        reason: `operation ${i} (${type}): '${path}' matches ${located.length} elements, not one ${what}`,
      });
    return located[0];
  };
  switch (type) {
    case 'add': {
      const name = text('name');
      if (!name) throw fhirError('ERR_PATCH_INVALID', { reason: `operation ${i} (add) needs a name` });
      // An element's name, never a member of every object's prototype (`__proto__`, `constructor`).
      if (!ELEMENT_NAME.test(name) || name === 'constructor')
        throw fhirError('ERR_PATCH_INVALID', {
          reason: `operation ${i} (add): '${name.slice(0, 60)}' is not an element name`,
        });
      const at = one('element');
      const target = read(at);
      if (typeof target !== 'object' || target === null || Array.isArray(target))
        throw fhirError('ERR_PATCH_FAILED', { reason: `'${path}' is not an element that can have children` });
      const value = valueOf(part('value'), i);
      const childPath = at.path ? `${at.path}.${name}` : name;
      const element = target as Record<string, unknown>;
      const existing = Object.hasOwn(element, name) ? element[name] : undefined;
      const repeats = Array.isArray(existing) || model.element(at.root, childPath)?.array === true;
      size.grow(byteSize(value) + name.length + 4, i);
      if (repeats) element[name] = [...((existing as unknown[] | undefined) ?? []), value];
      else if (existing !== undefined)
        throw fhirError('ERR_PATCH_FAILED', { reason: `'${path}.${name}' has a value already; use replace` });
      else element[name] = value;
      return;
    }
    case 'insert': {
      const list = listAt(holder, path, resource.resourceType, model);
      const index = integer('index');
      if (index === undefined || index < 0 || index > list.length)
        throw fhirError('ERR_PATCH_FAILED', { reason: `operation ${i} (insert): index ${index} is outside the list` });
      const value = valueOf(part('value'), i);
      size.grow(byteSize(value) + 1, i);
      list.splice(index, 0, value);
      return;
    }
    case 'delete':
      // Deleting what is not there is not an error (fhirpatch.html).
      if (located.length > 1) one('element');
      if (located.length === 1) remove(notWhole(located[0], holder, i));
      return;
    case 'replace': {
      const at = notWhole(one('element'), holder, i);
      const value = valueOf(part('value'), i);
      size.grow(byteSize(value) - byteSize(read(at)), i);
      write(at, value);
      return;
    }
    case 'move': {
      const list = listAt(holder, path, resource.resourceType, model);
      const source = integer('source');
      const destination = integer('destination');
      if (
        source === undefined ||
        destination === undefined ||
        source < 0 ||
        source >= list.length ||
        destination < 0 ||
        destination >= list.length
      ) {
        throw fhirError('ERR_PATCH_FAILED', {
          reason: `operation ${i} (move): source or destination is outside the list`,
        });
      }
      const [moved] = list.splice(source, 1);
      list.splice(destination, 0, moved);
      return;
    }
    default:
      throw fhirError('ERR_PATCH_INVALID', { reason: `operation ${i} has an unknown type '${type.slice(0, 50)}'` });
  }
}

/** FHIR element names (`birthDate`, `valueString`); what a FHIRPath Patch `add` may name. */
const ELEMENT_NAME = /^[a-z][A-Za-z0-9]*$/;

/** The resource itself is never deleted or replaced by a patch (that is DELETE or PUT). */
function notWhole(at: Location, holder: Record<string, unknown>, i: number): Location {
  if (at.container === holder) {
    throw fhirError('ERR_PATCH_FAILED', {
      reason: `operation ${i} would delete or replace the whole resource; use DELETE or PUT for that`,
    });
  }
  return at;
}

function valueOf(part: ParametersParameter | undefined, i: number): unknown {
  if (!part) throw fhirError('ERR_PATCH_INVALID', { reason: `operation ${i} needs a value` });
  if (part.resource) return part.resource;
  const key = Object.keys(part).find((k) => k.startsWith('value'));
  if (!key) throw fhirError('ERR_PATCH_INVALID', { reason: `operation ${i}: the value has no value[x]` });
  return (part as unknown as Record<string, unknown>)[key];
}

function read(at: Location): unknown {
  return (at.container as Record<string | number, unknown>)[at.key];
}

function write(at: Location, value: unknown): void {
  (at.container as Record<string | number, unknown>)[at.key] = value;
}

function remove(at: Location): void {
  if (Array.isArray(at.container)) at.container.splice(at.key as number, 1);
  else delete at.container[at.key as string];
}

/** The list a path names (insert, move): the array itself, created empty when absent. */
function listAt(holder: Record<string, unknown>, path: string, type: string, model: ElementModel): unknown[] {
  const dot = path.lastIndexOf('.');
  const parents = locate(holder, path.slice(0, dot), type, model);
  const name = path.slice(dot + 1);
  if (parents.length !== 1 || !/^[a-z][A-Za-z0-9]*$/.test(name))
    throw fhirError('ERR_PATCH_FAILED', { reason: `'${path}' does not name one list` });
  const parent = read(parents[0]) as Record<string, unknown>;
  if (parent[name] === undefined) parent[name] = [];
  if (!Array.isArray(parent[name])) throw fhirError('ERR_PATCH_FAILED', { reason: `'${path}' is not a list` });
  return parent[name] as unknown[];
}

/**
 * The elements a patch path selects: `Type.a.b[0].c`, `.where(name='value')`, `.first()`,
 * `.last()`. Other FHIRPath is refused with a clear 422 rather than guessed at.
 */
function locate(holder: Record<string, unknown>, path: string, type: string, model: ElementModel): Location[] {
  const steps = path.split(/\.(?![^(]*\))/);
  if (steps[0] !== type)
    throw fhirError('ERR_PATCH_FAILED', { reason: `the path '${path.slice(0, 100)}' does not start at ${type}` });
  let current: Location[] = [{ container: holder, key: 'resource', root: type, path: '' }];
  for (const step of steps.slice(1)) {
    const where = /^where\(([a-z][A-Za-z0-9]*)\s*=\s*'([^']*)'\)$/.exec(step);
    if (where) {
      current = current.filter((at) => {
        const v = read(at);
        return typeof v === 'object' && v !== null && (v as Record<string, unknown>)[where[1]] === where[2];
      });
      continue;
    }
    if (step === 'first()') {
      current = current.slice(0, 1);
      continue;
    }
    if (step === 'last()') {
      current = current.slice(-1);
      continue;
    }
    const member = /^([a-z][A-Za-z0-9]*)(?:\[(\d+)\])?$/.exec(step);
    if (!member)
      throw fhirError('ERR_PATCH_FAILED', {
        reason: `the path step '${step.slice(0, 60)}' is not supported (paths, [n], where(x='y'), first(), last())`,
      });
    const [, name, index] = member;
    const next: Location[] = [];
    for (const at of current) {
      const value = read(at);
      if (typeof value !== 'object' || value === null || Array.isArray(value)) continue;
      const element = value as Record<string, unknown>;
      const key =
        name in element
          ? name
          : Object.keys(element).find((k) => k.startsWith(name) && /^[A-Z]/.test(k.slice(name.length)));
      if (key === undefined) continue;
      const { root, path: childPath } = childContext(at, key, model);
      const child = element[key];
      if (Array.isArray(child)) child.forEach((_, i) => next.push({ container: child, key: i, root, path: childPath }));
      else next.push({ container: element, key, root, path: childPath });
    }
    current = index === undefined ? next : next.slice(Number(index), Number(index) + 1);
  }
  return current;
}

/** Where a child's own children are defined: in its data type, or inline (backbone) below the parent. */
function childContext(parent: Location, key: string, model: ElementModel): { root: string; path: string } {
  const path = parent.path ? `${parent.path}.${key}` : key;
  const info = model.element(parent.root, path);
  const type = info?.types[0];
  if (!type || type === 'BackboneElement' || type === 'Element') return { root: parent.root, path };
  if (type.startsWith('#')) return { root: parent.root, path: type.slice(1) };
  return model.isComplexType(type) ? { root: type, path: '' } : { root: parent.root, path };
}
