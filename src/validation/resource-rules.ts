import type { Report } from './issues';
import type { TypeRef } from './model';
import { clip } from './primitives';
import { referencedType, RESOURCE_TYPES, restfulParts, typeNameOf, type BundleIndex } from './references';

/**
 * The rules of references and resources within resources: what a reference may point to, local
 * references and the contained resources they must find (ref-1, dom-2 to dom-5), and a Bundle
 * entry's fullUrl.
 */

/** What one resource (with its contained resources) shares while it is walked. */
export interface Scope {
  root: Record<string, unknown>;
  /** `#id` (and `#`) references found anywhere in it: each contained resource must be one of them. */
  localRefs: Set<string>;
  bundle?: BundleIndex;
}

export interface ReferenceCheck {
  report: Report;
  /** Check targets and local references (off for the structural check of writes). */
  targets: boolean;
  /** The resource type a target profile stands for; undefined when it cannot be told. */
  profileType(url: string): string | undefined;
}

/** A Reference: its local target found, its `type` agreeing, its target of an allowed type. */
export function checkReference(
  value: Record<string, unknown>,
  type: TypeRef,
  path: string,
  scope: Scope,
  check: ReferenceCheck,
): void {
  const ref = value.reference;
  if (typeof ref !== 'string') return;
  const { report } = check;
  let target: string | undefined;
  if (ref.charCodeAt(0) === 35) {
    scope.localRefs.add(ref);
    if (ref === '#') target = scope.root.resourceType as string;
    else {
      const contained = Array.isArray(scope.root.contained) ? scope.root.contained : [];
      const found = contained.find((c) => isObject(c) && c.id === ref.slice(1)) as Record<string, unknown> | undefined;
      if (!found) {
        if (check.targets) {
          report.error(
            'invariant',
            `${path}.reference`,
            `Constraint failed: ref-1: 'SHALL have a contained resource if a local reference is provided' ('${clip(ref)}' is not the id of a contained resource)`,
            'ref-1',
          );
        }
        return;
      }
      target = found.resourceType as string;
    }
  } else {
    target = referencedType(ref, scope.bundle);
    if (target !== undefined && !RESOURCE_TYPES.has(target)) {
      if (check.targets && !/^[a-z]+:/.test(ref))
        report.error(
          'structure',
          `${path}.reference`,
          `'${clip(ref)}' names '${clip(target)}', which is not a resource type`,
        );
      return;
    }
  }
  if (!check.targets || !target) return;
  if (typeof value.type === 'string') {
    const stated = typeNameOf(value.type);
    if (RESOURCE_TYPES.has(stated) && stated !== target)
      report.error('structure', `${path}.type`, `says ${stated} but the reference points to a ${target}`);
  }
  if (type.targetProfiles.length === 0) return;
  const allowed = type.targetProfiles.map((p) => profileTypeOf(p, check));
  if (allowed.some((a) => a === undefined || a === 'Resource' || a === target)) return;
  report.error(
    'structure',
    `${path}.reference`,
    `points to a ${target}, but only ${[...new Set(allowed)].join(', ')} may be referenced here`,
  );
}

function profileTypeOf(url: string, check: ReferenceCheck): string | undefined {
  const name = typeNameOf(url);
  if (RESOURCE_TYPES.has(name) || name === 'Resource') return name;
  return check.profileType(url);
}

/** A Bundle entry: a RESTful fullUrl must name the resource it holds. */
export function checkBundleEntry(entry: Record<string, unknown>, path: string, report: Report): void {
  const fullUrl = entry.fullUrl;
  const resource = entry.resource;
  if (typeof fullUrl !== 'string' || !isObject(resource) || fullUrl.startsWith('urn:')) return;
  const parts = restfulParts(fullUrl);
  if (!parts || typeof resource.resourceType !== 'string') return;
  if (parts.type !== resource.resourceType || (resource.id !== undefined && parts.id !== resource.id)) {
    report.error(
      'invalid',
      `${path}.fullUrl`,
      `The fullUrl '${clip(fullUrl, 120)}' does not match the resource it holds (${resource.resourceType}/${String(resource.id ?? '(no id)')})`,
    );
  }
}

/** dom-2, dom-4, dom-5 for one contained resource. */
export function checkContained(value: Record<string, unknown>, path: string, report: Report): void {
  if (value.contained !== undefined)
    report.error(
      'invariant',
      path,
      "Constraint failed: dom-2: 'If the resource is contained in another resource, it SHALL NOT contain nested Resources'",
      'dom-2',
    );
  const meta = isObject(value.meta) ? value.meta : undefined;
  if (meta && (meta.versionId !== undefined || meta.lastUpdated !== undefined)) {
    report.error(
      'invariant',
      path,
      "Constraint failed: dom-4: 'If a resource is contained in another resource, it SHALL NOT have a meta.versionId or a meta.lastUpdated'",
      'dom-4',
    );
  }
  if (meta && meta.security !== undefined) {
    report.error(
      'invariant',
      path,
      "Constraint failed: dom-5: 'If a resource is contained in another resource, it SHALL NOT have a security label'",
      'dom-5',
    );
  }
}

/** dom-3: each contained resource is referred to from elsewhere in the resource (or refers to it with `#`). */
export function checkContainedAreReferenced(
  json: Record<string, unknown>,
  scope: Scope,
  path: string,
  report: Report,
): void {
  if (!Array.isArray(json.contained)) return;
  json.contained.forEach((c, i) => {
    if (!isObject(c) || typeof c.id !== 'string') return;
    if (scope.localRefs.has(`#${c.id}`) || refersToContainer(c)) return;
    report.error(
      'invariant',
      `${path}.contained[${i}]`,
      `Constraint failed: dom-3: 'If the resource is contained in another resource, it SHALL be referred to from elsewhere in the resource or SHALL refer to the containing resource' (nothing refers to '#${clip(c.id)}')`,
      'dom-3',
    );
  });
}

function refersToContainer(value: unknown): boolean {
  if (Array.isArray(value)) return value.some(refersToContainer);
  if (!isObject(value)) return false;
  for (const key in value) {
    const v = value[key];
    if (v === '#' && (key === 'reference' || key.startsWith('value'))) return true;
    if (typeof v === 'object' && refersToContainer(v)) return true;
  }
  return false;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
