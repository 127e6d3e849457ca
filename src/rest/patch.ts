import jsonPatch, { type Operation } from 'fast-json-patch';
import type { Parameters, ParametersParameter, Resource } from 'fhir/r4';
import { fhirError } from '../fhir/errors';
import type { ElementModel } from '../search/model/model';

/**
 * PATCH (R4 http.html#patch): JSON Patch (RFC 6902, `application/json-patch+json`) and FHIRPath
 * Patch (a Parameters body, R4 fhirpatch.html). The result must still be the same resource (type
 * and id) and pass the same checks as any write, which the caller applies.
 */

export function applyPatch(resource: Resource, body: unknown, contentType: string | undefined, model: ElementModel): Resource {
  const copy = structuredClone(resource) as Resource;
  let patched: Resource;
  if (Array.isArray(body)) patched = applyJsonPatch(copy, body);
  else if (isParameters(body)) patched = applyFhirPathPatch(copy, body, model);
  else throw fhirError('ERR_PATCH_FORMAT', { contentType: (contentType ?? '(none)').slice(0, 100) });
  if (patched.resourceType !== resource.resourceType || patched.id !== resource.id) {
    throw fhirError('ERR_PATCH_FAILED', { reason: 'a patch may not change the resource type or id' });
  }
  return patched;
}

function isParameters(body: unknown): body is Parameters {
  return typeof body === 'object' && body !== null && (body as { resourceType?: unknown }).resourceType === 'Parameters';
}

function applyJsonPatch(resource: Resource, operations: unknown[]): Resource {
  const problem = jsonPatch.validate(operations as Operation[], resource);
  if (problem) {
    const status = problem.name === 'TEST_OPERATION_FAILED' || problem.name === 'OPERATION_PATH_UNRESOLVABLE' ? 'ERR_PATCH_FAILED' : 'ERR_PATCH_INVALID';
    throw fhirError(status, { reason: `${problem.name}${problem.index !== undefined ? ` at operation ${problem.index}` : ''}` });
  }
  try {
    return jsonPatch.applyPatch(resource, operations as Operation[], false, true).newDocument as Resource;
  } catch (err) {
    throw fhirError('ERR_PATCH_FAILED', { reason: (err as Error).message.split('\n')[0].slice(0, 200) });
  }
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

function applyFhirPathPatch(resource: Resource, body: Parameters, model: ElementModel): Resource {
  const holder: Record<string, unknown> = { resource };
  (body.parameter ?? []).forEach((operation, i) => {
    if (operation.name !== 'operation') throw fhirError('ERR_PATCH_INVALID', { reason: `parameter[${i}] is not an operation` });
    const part = (name: string) => operation.part?.find((p) => p.name === name);
    const text = (name: string): string | undefined => {
      const p = part(name);
      return p?.valueCode ?? p?.valueString ?? p?.valueUri;
    };
    const integer = (name: string): number | undefined => part(name)?.valueInteger;
    const type = text('type');
    const path = text('path');
    if (!type || !path) throw fhirError('ERR_PATCH_INVALID', { reason: `operation ${i} needs a type and a path` });
    const located = locate(holder, path, resource.resourceType, model);
    const one = (what: string): Location => {
      if (located.length !== 1) throw fhirError('ERR_PATCH_FAILED', { reason: `operation ${i} (${type}): '${path}' matches ${located.length} elements, not one ${what}` });
      return located[0];
    };
    switch (type) {
      case 'add': {
        const name = text('name');
        if (!name) throw fhirError('ERR_PATCH_INVALID', { reason: `operation ${i} (add) needs a name` });
        const at = one('element');
        const target = read(at);
        if (typeof target !== 'object' || target === null || Array.isArray(target)) throw fhirError('ERR_PATCH_FAILED', { reason: `'${path}' is not an element that can have children` });
        const value = valueOf(part('value'), i);
        const childPath = at.path ? `${at.path}.${name}` : name;
        const repeats = Array.isArray((target as Record<string, unknown>)[name]) || model.element(at.root, childPath)?.array === true;
        const element = target as Record<string, unknown>;
        if (repeats) element[name] = [...((element[name] as unknown[] | undefined) ?? []), value];
        else if (element[name] !== undefined) throw fhirError('ERR_PATCH_FAILED', { reason: `'${path}.${name}' has a value already; use replace` });
        else element[name] = value;
        return;
      }
      case 'insert': {
        const list = listAt(holder, path, resource.resourceType, model);
        const index = integer('index');
        if (index === undefined || index < 0 || index > list.length) throw fhirError('ERR_PATCH_FAILED', { reason: `operation ${i} (insert): index ${index} is outside the list` });
        list.splice(index, 0, valueOf(part('value'), i));
        return;
      }
      case 'delete':
        // Deleting what is not there is not an error (fhirpatch.html).
        if (located.length > 1) one('element');
        if (located.length === 1) remove(located[0]);
        return;
      case 'replace': {
        const at = one('element');
        write(at, valueOf(part('value'), i));
        return;
      }
      case 'move': {
        const list = listAt(holder, path, resource.resourceType, model);
        const source = integer('source');
        const destination = integer('destination');
        if (source === undefined || destination === undefined || source < 0 || source >= list.length || destination < 0 || destination >= list.length) {
          throw fhirError('ERR_PATCH_FAILED', { reason: `operation ${i} (move): source or destination is outside the list` });
        }
        const [moved] = list.splice(source, 1);
        list.splice(destination, 0, moved);
        return;
      }
      default:
        throw fhirError('ERR_PATCH_INVALID', { reason: `operation ${i} has an unknown type '${type.slice(0, 50)}'` });
    }
  });
  return holder.resource as Resource;
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
  if (parents.length !== 1 || !/^[a-z][A-Za-z0-9]*$/.test(name)) throw fhirError('ERR_PATCH_FAILED', { reason: `'${path}' does not name one list` });
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
  if (steps[0] !== type) throw fhirError('ERR_PATCH_FAILED', { reason: `the path '${path.slice(0, 100)}' does not start at ${type}` });
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
    if (!member) throw fhirError('ERR_PATCH_FAILED', { reason: `the path step '${step.slice(0, 60)}' is not supported (paths, [n], where(x='y'), first(), last())` });
    const [, name, index] = member;
    const next: Location[] = [];
    for (const at of current) {
      const value = read(at);
      if (typeof value !== 'object' || value === null || Array.isArray(value)) continue;
      const element = value as Record<string, unknown>;
      const key = name in element ? name : Object.keys(element).find((k) => k.startsWith(name) && /^[A-Z]/.test(k.slice(name.length)));
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
