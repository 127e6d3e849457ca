import { fhirError } from '../fhir/errors';
import { childIndex, countOf, type ChildIndex } from './child-index';
import { contentTarget, type ProfileError } from './compile';
import type { InvariantEnv, InvariantResult, Invariants } from './invariants';
import type { Report, ValidationIssue } from './issues';
import type { ProfileSession } from './library';
import type { CompiledProfile, Constraint, ElementNode, TypeRef } from './model';
import { clip } from './primitives';
import { bundleIndex, RESOURCE_TYPES, type BundleIndex } from './references';
import {
  checkContained,
  checkContainedAreReferenced,
  isObject,
  type ReferenceCheck,
  type Scope,
} from './resource-rules';
import { placeInSlices, reportSliceMinimum, type PlaceOptions } from './slicing';
import { containsPattern, deepEqual, show } from './values';
import {
  checkConstraints,
  checkTypeRules,
  invariantIssue,
  type PendingBinding,
  type PendingInvariant,
} from './walk/constraints';
import { Cursor } from './walk/cursor';
import { primitiveProperty, type Item } from './walk/primitives';
import { checkClaim, claimedProfiles, deferredExtension, typeDefinition, usable, type Claim } from './walk/profiles';

/**
 * One pass over a resource's JSON against compiled definitions. What it cannot settle alone is
 * collected for afterwards: bindings (checked in one batch by the terminology engine), and
 * extensions or profiles defined by stored StructureDefinitions not loaded yet. The walk goes down
 * with a `Cursor` (walk/cursor.ts); primitives, constraints and type rules, and the definitions met
 * on the way (claimed profiles, extensions) are checked by the modules of walk/.
 */

export interface WalkOptions {
  /** Evaluate constraint expressions (FHIRPath). */
  invariants: boolean;
  /** Collect coded values with required and extensible bindings. */
  terminology: boolean;
  /** Check that references point to allowed types, and local references to contained resources. */
  references: boolean;
  /** Validate extensions against their definitions; unknown ones get a warning. */
  extensions: boolean;
  /** Follow `meta.profile` (of the resource and of the resources inside it). */
  profiles: boolean;
  /** Epoch ms: past it the walk stops with too-costly. */
  deadline: number;
}

/** Work left for after the stored definitions it needs are loaded. */
export interface Deferred {
  kind: 'extension' | 'profile';
  url: string;
  value: Record<string, unknown>;
  cursor: Cursor;
}

/** JSON nested deeper than this is refused (the HTTP layer already stops at 64). */
const MAX_DEPTH = 128;

/** An item of a complex property, with its cursor. */
interface CursorItem extends Item {
  cursor: Cursor;
}

export class Walk implements Report {
  readonly issues: ValidationIssue[] = [];
  readonly bindings: PendingBinding[] = [];
  deferred: Deferred[] = [];
  /** Invariants of stored profiles met on the way, for the validator to evaluate bounded (the walk itself is synchronous). */
  readonly userInvariants: PendingInvariant[] = [];
  /** How sliced elements place their items (the walk reports, and checks `profile` discriminators on the side). */
  readonly placing: PlaceOptions;
  readonly referencing: ReferenceCheck;
  private steps = 0;

  constructor(
    readonly session: ProfileSession,
    readonly options: WalkOptions,
    readonly invariants?: Invariants,
  ) {
    this.placing = {
      report: this,
      deps: { conforms: (value, url, type) => this.conforms(value, url, type) },
      typeRoot: (code) =>
        usable(this.session, code.includes('/') ? code : `http://hl7.org/fhir/StructureDefinition/${code}`)?.root,
    };
    this.referencing = {
      report: this,
      targets: options.references,
      profileType: (url) => usable(this.session, url)?.type,
    };
  }

  /**
   * A resource: against its type's definition, then each profile it claims (`meta.profile`) and
   * each one asked for. `container` is the scope of the resource that contains this one.
   */
  resource(
    json: unknown,
    path: string,
    extra: { profiles?: CompiledProfile[]; container?: Scope; bundle?: BundleIndex; depth?: number } = {},
  ): void {
    if (!isObject(json)) {
      this.error('structure', path, `must be a resource (a JSON object with a resourceType), not ${kindOf(json)}`);
      return;
    }
    const type = json.resourceType;
    if (typeof type !== 'string') {
      this.error('structure', path, 'has no resourceType');
      return;
    }
    const base = RESOURCE_TYPES.has(type) ? this.session.base(type) : undefined;
    if (!base) {
      this.error('not-supported', path, `'${clip(type)}' is not a resource type of FHIR R4`);
      return;
    }
    const bundle = type === 'Bundle' ? bundleIndex(json) : extra.bundle;
    const scope: Scope = extra.container ?? { root: json, localRefs: new Set(), bundle };
    const env: InvariantEnv = { resource: json, rootResource: scope.root, bundle: bundle ?? scope.bundle };
    const own: Scope = type === 'Bundle' ? { ...scope, bundle } : scope;
    const cursor = new Cursor(path, env, own, extra.depth ?? 0);
    this.complex(json, base.root, { code: type, profiles: [], targetProfiles: [] }, cursor);
    if (this.options.profiles) claimedProfiles(this, json, type, cursor);
    for (const profile of extra.profiles ?? []) this.againstProfile(json, profile, cursor);
    if (!extra.container && this.options.references && this.options.invariants)
      checkContainedAreReferenced(json, scope, path, this);
  }

  /** A profile named in `meta.profile`, once resolved (now or after loading). */
  claimed(resolved: CompiledProfile | ProfileError | undefined, claim: Claim, cursor: Cursor): void {
    checkClaim(this, resolved, claim, cursor);
  }

  againstProfile(json: Record<string, unknown>, profile: CompiledProfile, cursor: Cursor): void {
    this.complex(json, profile.root, { code: profile.type, profiles: [], targetProfiles: [] }, cursor);
  }

  /** An extension whose definition was loaded after the walk. */
  extension(resolved: CompiledProfile | ProfileError | undefined, item: Deferred): void {
    deferredExtension(this, resolved, item);
  }

  // -------------------------------------------------------------------------------------------
  // Elements

  /** A complex value (an object) at `node`, of `type`. */
  complex(value: unknown, node: ElementNode, type: TypeRef, cursor: Cursor): void {
    const { path } = cursor;
    if ((++this.steps & 1023) === 0 && Date.now() > this.options.deadline) {
      throw fhirError('ERR_OP_TIMEOUT', { code: 'validate', ms: this.options.deadline });
    }
    if (cursor.depth > MAX_DEPTH) {
      this.error('structure', path, `is nested more than ${MAX_DEPTH} levels deep`);
      return;
    }
    if (!isObject(value)) {
      this.error('structure', path, `must be a JSON object (${type.code}), not ${kindOf(value)}`);
      return;
    }
    if (isEmpty(value)) {
      this.error('structure', path, 'must have a value or children: an empty object is not allowed (ele-1)', 'ele-1');
      return;
    }
    if (node.path.includes('.') && (type.code === 'Resource' || RESOURCE_TYPES.has(type.code))) {
      this.nestedResource(value, node, type, cursor);
      return;
    }
    let provider: ElementNode;
    if (node.contentReference) {
      provider = contentTarget(node);
    } else if (node.children.length > 0) {
      provider = node;
    } else {
      const typeRoot = typeDefinition(this, value, type, cursor);
      if (!typeRoot) {
        this.error('not-supported', path, `the type '${type.code}' is not known`);
        return;
      }
      provider = typeRoot.root;
    }
    this.children(value, provider, cursor);
    if (node.fixed && !deepEqual(value, node.fixed.value)) {
      this.error('value', path, `must be exactly ${show(node.fixed.value)}`);
    }
    if (node.pattern && !containsPattern(value, node.pattern.value)) {
      this.error('value', path, `must match the pattern ${show(node.pattern.value)}`);
    }
    if (this.options.invariants) checkConstraints(this, value, { node, provider, type }, cursor);
    checkTypeRules(this, value, node, type, cursor);
  }

  private nestedResource(value: Record<string, unknown>, node: ElementNode, type: TypeRef, cursor: Cursor): void {
    const { path, scope } = cursor;
    const contained = node.name === 'contained';
    const profiles: CompiledProfile[] = [];
    for (const url of type.profiles) {
      const resolved = usable(this.session, url);
      if (resolved) profiles.push(resolved);
    }
    if (type.code !== 'Resource' && typeof value.resourceType === 'string' && value.resourceType !== type.code) {
      this.error('structure', path, `must be a ${type.code}, not a ${clip(value.resourceType)}`);
    }
    this.resource(value, path, {
      profiles,
      container: contained ? scope : undefined,
      bundle: scope.bundle,
      depth: cursor.depth + 1,
    });
    if (contained && this.options.invariants) checkContained(value, path, this);
  }

  /** The properties of an object against the children of `provider`, then their cardinalities. */
  private children(obj: Record<string, unknown>, provider: ElementNode, cursor: Cursor): void {
    const index = childIndex(provider);
    const isResourceRoot = provider === provider.profile.root && provider.profile.kind === 'resource';
    // The choice element each property chose, to see two types of one choice (rare: kept lazily).
    let choice: ElementNode | undefined;
    let choices: ElementNode[] | undefined;
    for (const key in obj) {
      // A resource's type marker; below the root, only an element of that name (AccessPolicy.resource.resourceType).
      if (key === 'resourceType' && (isResourceRoot || !index.keys.has(key))) {
        if (!isResourceRoot)
          this.error(
            'structure',
            `${cursor.path}.resourceType`,
            `'resourceType' is not an element of ${provider.path}`,
          );
        continue;
      }
      const extension = key.charCodeAt(0) === 95;
      const name = extension ? key.slice(1) : key;
      const slot = index.keys.get(name);
      if (!slot || (extension && !slot.primitive)) {
        this.error(
          'structure',
          `${cursor.path}.${key}`,
          `Unrecognized property: '${clip(key)}' is not an element of ${provider.path}`,
        );
        continue;
      }
      if (slot.node.choice && !(extension && obj[name] !== undefined)) {
        if (choice === undefined) choice = slot.node;
        else (choices ??= [choice]).push(slot.node);
      }
      if (slot.primitive) {
        // A primitive and its `_name` twin are read together, once.
        if (extension && obj[name] !== undefined) continue;
        primitiveProperty(this, obj, name, slot, cursor);
      } else {
        this.complexProperty(obj[key], slot.node, slot.type, cursor);
      }
    }
    this.cardinalities(obj, index, cursor.path);
    if (choices) this.oneChoice(obj, index, choices, cursor.path);
  }

  /** The children's counts against their definitions (and their slices' minimums). */
  private cardinalities(obj: Record<string, unknown>, index: ChildIndex, path: string): void {
    for (const child of index.required) {
      if (countOf(obj, index.names.get(child) as string[]) === 0)
        this.error(
          'required',
          `${path}.${child.name}`,
          `minimum required = ${child.min}, but only found 0 (${child.path})`,
        );
    }
    for (const child of index.slicesRequired) {
      if (countOf(obj, index.names.get(child) as string[]) > 0) continue;
      for (const slice of child.slices)
        if (slice.min > 0) reportSliceMinimum(this, child, slice, 0, `${path}.${child.name}`);
    }
    for (const child of index.bounded) {
      const count = countOf(obj, index.names.get(child) as string[]);
      if (count > child.max)
        this.error(
          'structure',
          `${path}.${child.name}`,
          `${child.path}: maximum allowed = ${child.max}, but found ${count}`,
        );
    }
  }

  /** Two properties of one choice element (`valueString` and `valueInteger`). */
  private oneChoice(obj: Record<string, unknown>, index: ChildIndex, choices: ElementNode[], path: string): void {
    for (const node of new Set(choices)) {
      if (choices.filter((c) => c === node).length < 2) continue;
      const present = (index.names.get(node) as string[]).filter((n) => n in obj || `_${n}` in obj);
      this.error('structure', `${path}.${node.name}`, `only one of ${present.join(', ')} may be given`);
    }
  }

  private complexProperty(value: unknown, node: ElementNode, type: TypeRef, cursor: Cursor): void {
    const items = this.itemsOf(
      value,
      node,
      cursor.child(node.choice ? `${node.name}.ofType(${type.code})` : node.name),
    );
    if (!items) return;
    if (node.slices.length > 0 && node.slicing) {
      for (const { item, at, itemType } of placeInSlices(items, node, type, this.placing))
        this.complex(item.value, at, itemType, item.cursor);
    } else {
      for (const item of items) this.complex(item.value, node, type, item.cursor);
    }
  }

  /** The values of a property as a list, after checking array-ness against the definition. */
  private itemsOf(value: unknown, node: ElementNode, at: Cursor): CursorItem[] | undefined {
    if (node.isArray) {
      if (!Array.isArray(value)) {
        this.error('structure', at.path, 'must be a JSON array');
        return [{ value, path: at.path, cursor: at }];
      }
      if (value.length === 0)
        this.error('structure', at.path, 'must not be an empty array (leave the property out instead)');
      const items: CursorItem[] = [];
      for (let i = 0; i < value.length; i++) {
        const item = at.index(i);
        if (value[i] === null) this.error('structure', item.path, 'null is not allowed here');
        else items.push({ value: value[i], path: item.path, cursor: item });
      }
      return items;
    }
    if (Array.isArray(value)) {
      this.error('structure', at.path, 'must be a single value, not a JSON array');
      return undefined;
    }
    if (value === null) {
      this.error('structure', at.path, 'null is not allowed here');
      return undefined;
    }
    return [{ value, path: at.path, cursor: at }];
  }

  /** Whether a value conforms to a profile, for a `profile` discriminator: walked on the side, errors counted. */
  private conforms(value: unknown, url: string, type: TypeRef): boolean {
    const resolved = usable(this.session, url);
    if (!resolved) return false;
    const side = new Walk(this.session, { ...this.options, terminology: false, profiles: false }, this.invariants);
    if (isObject(value) && typeof value.resourceType === 'string') side.resource(value, 'x', { profiles: [resolved] });
    else
      side.complex(
        value,
        resolved.root,
        type,
        new Cursor('x', { resource: value, rootResource: value }, { root: {}, localRefs: new Set() }, 0),
      );
    return !side.issues.some((i) => i.severity === 'error');
  }

  /** The issue an invariant's result makes, if any. */
  invariantResult(constraint: Constraint, path: string, result: InvariantResult): void {
    const issue = invariantIssue(constraint, path, result);
    if (issue) this.issues.push(issue);
  }

  error(code: ValidationIssue['code'], expression: string, message: string, source?: string): void {
    this.issues.push({ severity: 'error', code, message, expression, source });
  }

  warning(code: ValidationIssue['code'], expression: string, message: string): void {
    this.issues.push({ severity: 'warning', code, message, expression });
  }
}

function isEmpty(value: Record<string, unknown>): boolean {
  for (const _key in value) return false;
  return true;
}

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'string'
    ? 'a string'
    : typeof value === 'number'
      ? 'a number'
      : typeof value === 'boolean'
        ? 'a boolean'
        : 'an object';
}
