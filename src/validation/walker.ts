import type { Coding } from 'fhir/r4';
import { fhirError } from '../fhir/errors';
import { childIndex, countOf, twin } from './child-index';
import { contentTarget, ProfileError } from './compile';
import type { InvariantEnv, InvariantResult, Invariants } from './invariants';
import type { Report, ValidationIssue } from './issues';
import type { ProfileSession } from './library';
import type { BoundConstraint, CompiledProfile, Constraint, ElementNode, TypeRef } from './model';
import { nativeInvariant } from './native-invariants';
import { clip, primitiveProblem } from './primitives';
import { bundleIndex, RESOURCE_TYPES, type BundleIndex } from './references';
import { checkBundleEntry, checkContained, checkContainedAreReferenced, checkReference, isObject, type ReferenceCheck, type Scope } from './resource-rules';
import { placeInSlices, reportSliceMinimum, type PlaceOptions } from './slicing';
import type { BindingCheck } from './terminology-port';
import { containsPattern, deepEqual, show } from './values';

/**
 * One pass over a resource's JSON against compiled definitions. What it cannot settle alone is
 * collected for afterwards: bindings (checked in one batch by the terminology engine), and
 * extensions or profiles defined by stored StructureDefinitions not loaded yet.
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

export interface PendingBinding extends BindingCheck {
  strength: 'required' | 'extensible';
  expression: string;
}

/** Work left for after the stored definitions it needs are loaded. */
export interface Deferred {
  kind: 'extension' | 'profile';
  url: string;
  value: Record<string, unknown>;
  path: string;
  env: InvariantEnv;
  scope: Scope;
  depth: number;
}


/** JSON nested deeper than this is refused (the HTTP layer already stops at 64). */
const MAX_DEPTH = 128;
const EXTENSION: TypeRef = { code: 'Extension', profiles: [], targetProfiles: [] };

interface Item {
  value: unknown;
  path: string;
}

/** A user's invariant to evaluate at one place: the expression as written for the engine. */
export interface PendingInvariant {
  constraint: Constraint;
  expression: string;
  focus: unknown;
  base: string;
  env: InvariantEnv;
  path: string;
}

/** `primitive`: the constraint is on a primitive property of the focus, evaluated on each of its values. */
function invariantExpression(constraint: Constraint, primitive: string | undefined): string {
  return primitive ? `\`${primitive}\`.all(${constraint.expression})` : constraint.expression;
}

export type { Scope };
export { isObject };

export class Walk implements Report {
  readonly issues: ValidationIssue[] = [];
  readonly bindings: PendingBinding[] = [];
  deferred: Deferred[] = [];
  /** Invariants of stored profiles met on the way, for the validator to evaluate bounded (the walk itself is synchronous). */
  readonly userInvariants: PendingInvariant[] = [];
  private steps = 0;
  private readonly placing: PlaceOptions;
  private readonly referencing: ReferenceCheck;

  constructor(
    readonly session: ProfileSession,
    readonly options: WalkOptions,
    private readonly invariants?: Invariants,
  ) {
    this.placing = {
      report: this,
      deps: { conforms: (value, url, type) => this.conforms(value, url, type) },
      typeRoot: (code) => this.usable(code.includes('/') ? code : `http://hl7.org/fhir/StructureDefinition/${code}`)?.root,
    };
    this.referencing = { report: this, targets: options.references, profileType: (url) => this.usable(url)?.type };
  }

  /**
   * A resource: against its type's definition, then each profile it claims (`meta.profile`) and
   * each one asked for. `container` is the scope of the resource that contains this one.
   */
  resource(json: unknown, path: string, extra: { profiles?: CompiledProfile[]; container?: Scope; bundle?: BundleIndex; depth?: number } = {}): void {
    const depth = extra.depth ?? 0;
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
    const typeRef: TypeRef = { code: type, profiles: [], targetProfiles: [] };
    this.complex(json, base.root, typeRef, path, env, own, depth);
    if (this.options.profiles) this.claimedProfiles(json, type, path, env, own, depth);
    for (const profile of extra.profiles ?? []) this.againstProfile(json, profile, path, env, own, depth);
    if (!extra.container && this.options.references && this.options.invariants) checkContainedAreReferenced(json, scope, path, this);
  }

  private claimedProfiles(json: Record<string, unknown>, type: string, path: string, env: InvariantEnv, scope: Scope, depth: number): void {
    const meta = json.meta;
    const urls = isObject(meta) && Array.isArray(meta.profile) ? meta.profile : [];
    urls.forEach((url, i) => {
      if (typeof url !== 'string') return;
      const resolved = this.session.profile(url);
      if (resolved === 'unloaded') {
        this.deferred.push({ kind: 'profile', url, value: json, path, env, scope, depth });
        return;
      }
      this.claimed(resolved, url, json, `${path}.meta.profile[${i}]`, path, env, scope, depth, type);
    });
  }

  /** A profile named in `meta.profile`, once resolved (now or after loading). */
  claimed(resolved: CompiledProfile | ProfileError | undefined, url: string, json: Record<string, unknown>, where: string, path: string, env: InvariantEnv, scope: Scope, depth: number, type: string): void {
    if (resolved === undefined) {
      this.warning('not-supported', where, `Profile '${url}' is not known to this server; the resource was not checked against it`);
    } else if (resolved instanceof ProfileError) {
      this.error('processing', where, resolved.message);
    } else if (resolved.type !== type) {
      this.error('invalid', where, `Profile '${url}' is for ${resolved.type}, not ${type}`);
    } else {
      this.againstProfile(json, resolved, path, env, scope, depth);
    }
  }

  againstProfile(json: Record<string, unknown>, profile: CompiledProfile, path: string, env: InvariantEnv, scope: Scope, depth: number): void {
    this.complex(json, profile.root, { code: profile.type, profiles: [], targetProfiles: [] }, path, env, scope, depth);
  }

  /** An extension whose definition was loaded after the walk. */
  extension(resolved: CompiledProfile | ProfileError | undefined, item: Deferred): void {
    if (resolved === undefined) this.unknownExtension(item.url, item.path);
    else if (resolved instanceof ProfileError) this.error('processing', item.path, resolved.message);
    else {
      this.modifierRule(resolved, item.path);
      this.complex(item.value, resolved.root, EXTENSION, item.path, item.env, item.scope, item.depth);
    }
  }

  // -------------------------------------------------------------------------------------------
  // Elements

  /** A complex value (an object) at `node`, of `type`. */
  complex(value: unknown, node: ElementNode, type: TypeRef, path: string, env: InvariantEnv, scope: Scope, depth: number): void {
    if ((++this.steps & 1023) === 0 && Date.now() > this.options.deadline) {
      throw fhirError('ERR_OP_TIMEOUT', { code: 'validate', ms: this.options.deadline });
    }
    if (depth > MAX_DEPTH) {
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
      this.nestedResource(value, node, type, path, scope, depth);
      return;
    }
    let provider: ElementNode;
    let typeRoot: CompiledProfile | undefined;
    if (node.contentReference) {
      provider = contentTarget(node);
    } else if (node.children.length > 0) {
      provider = node;
    } else {
      typeRoot = this.typeDefinition(value, type, path, env, scope, depth);
      if (!typeRoot) {
        this.error('not-supported', path, `the type '${type.code}' is not known`);
        return;
      }
      provider = typeRoot.root;
    }
    this.children(value, provider, path, env, scope, depth);
    if (node.fixed && !deepEqual(value, node.fixed.value)) {
      this.error('value', path, `must be exactly ${show(node.fixed.value)}`);
    }
    if (node.pattern && !containsPattern(value, node.pattern.value)) {
      this.error('value', path, `must match the pattern ${show(node.pattern.value)}`);
    }
    if (this.options.invariants) this.constraints(value, node, provider, type, path, env);
    this.typeRules(value, node, type, path, scope);
  }

  /** The definition that gives a value of this type its children: a type profile, an extension's own, or the base type. */
  private typeDefinition(value: Record<string, unknown>, type: TypeRef, path: string, env: InvariantEnv, scope: Scope, depth: number): CompiledProfile | undefined {
    for (const url of type.profiles) {
      const resolved = this.usable(url);
      if (resolved) return resolved;
    }
    if (type.code === 'Extension' && type.profiles.length === 0 && this.options.extensions && typeof value.url === 'string') {
      const resolved = this.session.profile(value.url);
      if (resolved === 'unloaded') this.deferred.push({ kind: 'extension', url: value.url, value, path, env, scope, depth });
      else if (resolved === undefined) this.unknownExtension(value.url, path);
      else if (resolved instanceof ProfileError) this.error('processing', path, resolved.message);
      else if (resolved.type === 'Extension') {
        this.modifierRule(resolved, path);
        return resolved;
      }
    }
    return this.session.base(type.code);
  }

  /**
   * An extension nobody here knows: a warning (its definition may live elsewhere), worded more
   * strongly for a modifier extension, which changes the meaning of what holds it.
   */
  private unknownExtension(url: string, path: string): void {
    if (isModifierPath(path)) this.warning('extension', path, `The modifier extension '${clip(url, 120)}' is not known to this server: its content was not checked, and a system that does not know it must not ignore it`);
    else this.warning('extension', path, `The extension '${clip(url, 120)}' is not known to this server, so its content was not checked`);
  }

  /** A modifier extension only in modifierExtension, and only a modifier extension there. */
  private modifierRule(definition: CompiledProfile, path: string): void {
    const modifierPlace = isModifierPath(path);
    if (definition.root.isModifier && !modifierPlace) this.error('extension', path, `The extension '${definition.url}' is a modifier extension: it belongs in modifierExtension`);
    if (!definition.root.isModifier && modifierPlace) this.error('extension', path, `The extension '${definition.url}' is not a modifier extension: it belongs in extension`);
  }

  private nestedResource(value: Record<string, unknown>, node: ElementNode, type: TypeRef, path: string, scope: Scope, depth: number): void {
    const contained = node.name === 'contained';
    const profiles: CompiledProfile[] = [];
    for (const url of type.profiles) {
      const resolved = this.usable(url);
      if (resolved) profiles.push(resolved);
    }
    if (type.code !== 'Resource' && typeof value.resourceType === 'string' && value.resourceType !== type.code) {
      this.error('structure', path, `must be a ${type.code}, not a ${clip(value.resourceType)}`);
    }
    this.resource(value, path, { profiles, container: contained ? scope : undefined, bundle: scope.bundle, depth: depth + 1 });
    if (contained && this.options.invariants) checkContained(value, path, this);
  }

  /** The properties of an object against the children of `provider`, then their cardinalities. */
  private children(obj: Record<string, unknown>, provider: ElementNode, path: string, env: InvariantEnv, scope: Scope, depth: number): void {
    const index = childIndex(provider);
    const isResourceRoot = provider === provider.profile.root && provider.profile.kind === 'resource';
    // The choice element each property chose, to see two types of one choice (rare: kept lazily).
    let choice: ElementNode | undefined;
    let choices: ElementNode[] | undefined;
    for (const key in obj) {
      // A resource's type marker; below the root, only an element of that name (AccessPolicy.resource.resourceType).
      if (key === 'resourceType' && (isResourceRoot || !index.keys.has(key))) {
        if (!isResourceRoot) this.error('structure', `${path}.resourceType`, `'resourceType' is not an element of ${provider.path}`);
        continue;
      }
      const extension = key.charCodeAt(0) === 95;
      const name = extension ? key.slice(1) : key;
      const slot = index.keys.get(name);
      if (!slot || (extension && !slot.primitive)) {
        this.error('structure', `${path}.${key}`, `Unrecognized property: '${clip(key)}' is not an element of ${provider.path}`);
        continue;
      }
      if (slot.node.choice && !(extension && obj[name] !== undefined)) {
        if (choice === undefined) choice = slot.node;
        else (choices ??= [choice]).push(slot.node);
      }
      if (slot.primitive) {
        // A primitive and its `_name` twin are read together, once.
        if (extension && obj[name] !== undefined) continue;
        this.primitive(obj, name, slot.node, slot.type, path, env, scope, depth);
      } else {
        this.complexProperty(obj[key], slot.node, slot.type, path, env, scope, depth);
      }
    }
    for (const child of index.required) {
      if (countOf(obj, index.names.get(child) as string[]) === 0) this.error('required', `${path}.${child.name}`, `minimum required = ${child.min}, but only found 0 (${child.path})`);
    }
    for (const child of index.slicesRequired) {
      if (countOf(obj, index.names.get(child) as string[]) > 0) continue;
      for (const slice of child.slices) if (slice.min > 0) reportSliceMinimum(this, child, slice, 0, `${path}.${child.name}`);
    }
    for (const child of index.bounded) {
      const count = countOf(obj, index.names.get(child) as string[]);
      if (count > child.max) this.error('structure', `${path}.${child.name}`, `${child.path}: maximum allowed = ${child.max}, but found ${count}`);
    }
    if (choices) {
      for (const node of new Set(choices)) {
        if (choices.filter((c) => c === node).length < 2) continue;
        const present = (index.names.get(node) as string[]).filter((n) => n in obj || `_${n}` in obj);
        this.error('structure', `${path}.${node.name}`, `only one of ${present.join(', ')} may be given`);
      }
    }
  }

  private complexProperty(value: unknown, node: ElementNode, type: TypeRef, path: string, env: InvariantEnv, scope: Scope, depth: number): void {
    const at = node.choice ? `${path}.${node.name}.ofType(${type.code})` : `${path}.${node.name}`;
    const items = this.itemsOf(value, node, at);
    if (!items) return;
    if (node.slices.length > 0 && node.slicing) {
      for (const { item, at, itemType } of placeInSlices(items, node, type, this.placing)) this.complex(item.value, at, itemType, item.path, env, scope, depth + 1);
    } else {
      for (const item of items) this.complex(item.value, node, type, item.path, env, scope, depth + 1);
    }
  }

  /** The values of a property as a list, after checking array-ness against the definition. */
  private itemsOf(value: unknown, node: ElementNode, at: string): Item[] | undefined {
    if (node.isArray) {
      if (!Array.isArray(value)) {
        this.error('structure', at, 'must be a JSON array');
        return [{ value, path: at }];
      }
      if (value.length === 0) this.error('structure', at, 'must not be an empty array (leave the property out instead)');
      const items: Item[] = [];
      for (let i = 0; i < value.length; i++) {
        if (value[i] === null) this.error('structure', `${at}[${i}]`, 'null is not allowed here');
        else items.push({ value: value[i], path: `${at}[${i}]` });
      }
      return items;
    }
    if (Array.isArray(value)) {
      this.error('structure', at, 'must be a single value, not a JSON array');
      return undefined;
    }
    if (value === null) {
      this.error('structure', at, 'null is not allowed here');
      return undefined;
    }
    return [{ value, path: at }];
  }

  /** A primitive property (`birthDate`) with its `_birthDate` twin (id and extensions). */
  private primitive(obj: Record<string, unknown>, name: string, node: ElementNode, type: TypeRef, path: string, env: InvariantEnv, scope: Scope, depth: number): void {
    const value = obj[name];
    const ext = obj[twin(name)];
    const at = node.choice ? `${path}.${node.name}.ofType(${type.code})` : `${path}.${node.name}`;
    if (node.isArray) {
      const values = this.primitiveList(value, at);
      const exts = this.primitiveList(ext, `${path}._${name}`);
      if (value !== undefined && ext !== undefined && values.length !== exts.length) {
        this.error('structure', at, `'${name}' and '_${name}' must be arrays of the same length`);
      }
      if (values.length === 0 && exts.length === 0 && (value !== undefined || ext !== undefined)) {
        this.error('structure', at, 'must not be an empty array (leave the property out instead)');
      }
      const n = Math.max(values.length, exts.length);
      const items: Item[] = [];
      for (let i = 0; i < n; i++) {
        const v = values[i] ?? null;
        const e = exts[i] ?? null;
        if (v === null && e === null) this.error('structure', `${at}[${i}]`, 'null with no extension in its place');
        if (v !== null) items.push({ value: v, path: `${at}[${i}]` });
        if (e !== null) this.elementExtensions(e, `${at}[${i}]`, env, scope, depth);
      }
      this.primitiveValues(items, node, type, scope);
    } else {
      if (Array.isArray(value)) this.error('structure', at, 'must be a single value, not a JSON array');
      else if (value === null) this.error('structure', at, 'null is not allowed here');
      else if (value !== undefined) this.primitiveValues([{ value, path: at }], node, type, scope);
      if (ext !== undefined) {
        if (Array.isArray(ext) || ext === null) this.error('structure', `${path}._${name}`, 'must be a single JSON object');
        else this.elementExtensions(ext, at, env, scope, depth);
      }
    }
    if (this.options.invariants && node.constraints.length > 0 && value !== undefined) {
      // Evaluated on the parent: the engine types a primitive by where it is found.
      const parentPath = node.path.slice(0, node.path.lastIndexOf('.')).replace(/\[x\]/g, '');
      for (const c of node.constraints) this.evaluate(c, obj, parentPath, env, at, name);
    }
  }

  private primitiveList(value: unknown, at: string): unknown[] {
    if (value === undefined) return [];
    if (!Array.isArray(value)) {
      this.error('structure', at, 'must be a JSON array');
      return [value];
    }
    return value;
  }

  private primitiveValues(items: Item[], node: ElementNode, type: TypeRef, scope: Scope): void {
    if (node.slices.length > 0 && node.slicing) {
      for (const { item, at, itemType } of placeInSlices(items, node, type, this.placing)) this.primitiveValue(item.value, at, itemType, item.path, scope);
    } else {
      for (const item of items) this.primitiveValue(item.value, node, type, item.path, scope);
    }
  }

  private primitiveValue(value: unknown, node: ElementNode, type: TypeRef, at: string, scope: Scope): void {
    const problem = primitiveProblem(type.code, value);
    if (problem) {
      this.error(problem.code, at, problem.message);
      return;
    }
    if (node.fixed && node.fixed.value !== value) this.error('value', at, `is '${show(value)}' but must be '${show(node.fixed.value)}'`);
    if (node.pattern && node.pattern.value !== value) this.error('value', at, `is '${show(value)}' but must be '${show(node.pattern.value)}'`);
    if (node.maxLength !== undefined && typeof value === 'string' && value.length > node.maxLength) {
      this.error('value', at, `is ${value.length} characters long; at most ${node.maxLength} are allowed`);
    }
    if (node.minValue && compare(value, node.minValue.value) < 0) this.error('value', at, `is below the minimum ${show(node.minValue.value)}`);
    if (node.maxValue && compare(value, node.maxValue.value) > 0) this.error('value', at, `is above the maximum ${show(node.maxValue.value)}`);
    if (typeof value === 'string' && value.charCodeAt(0) === 35 && (type.code === 'canonical' || type.code === 'uri' || type.code === 'url')) {
      scope.localRefs.add(value);
    }
    if (type.code === 'code' && this.options.terminology) this.binding(node, 'code', [{ code: value as string }], at);
  }

  /** `_name`: an object that may carry only `id` and `extension`. */
  private elementExtensions(value: unknown, at: string, env: InvariantEnv, scope: Scope, depth: number): void {
    const element = this.session.base('Element');
    if (!element) return;
    this.complex(value, element.root, { code: 'Element', profiles: [], targetProfiles: [] }, at, env, scope, depth + 1);
  }

  // -------------------------------------------------------------------------------------------
  // Slicing

  /** A profile that is loaded and usable, or undefined. */
  private usable(url: string): CompiledProfile | undefined {
    const resolved = this.session.profile(url);
    return resolved && resolved !== 'unloaded' && !(resolved instanceof ProfileError) ? resolved : undefined;
  }

  /** Whether a value conforms to a profile, for a `profile` discriminator: walked on the side, errors counted. */
  private conforms(value: unknown, url: string, type: TypeRef): boolean {
    const resolved = this.usable(url);
    if (!resolved) return false;
    const side = new Walk(this.session, { ...this.options, terminology: false, profiles: false }, this.invariants);
    if (isObject(value) && typeof value.resourceType === 'string') side.resource(value, 'x', { profiles: [resolved] });
    else side.complex(value, resolved.root, type, 'x', { resource: value, rootResource: value }, { root: {}, localRefs: new Set() }, 0);
    return !side.issues.some((i) => i.severity === 'error');
  }

  // -------------------------------------------------------------------------------------------
  // Invariants and type rules

  private constraints(value: Record<string, unknown>, node: ElementNode, provider: ElementNode, type: TypeRef, path: string, env: InvariantEnv): void {
    for (const { constraint, base } of this.constraintsFor(node, provider, type)) this.evaluate(constraint, value, base, env, path);
  }

  /** The element's own constraints, those of the definition giving its children, and its type's. */
  private constraintsFor(node: ElementNode, provider: ElementNode, type: TypeRef): BoundConstraint[] {
    // Keyed by the provider when it is another node, else by the type (whose own invariants apply).
    const cache = (node.constraintsByType ??= new Map());
    const key: ElementNode | string = provider !== node ? provider : type.code;
    let list = cache.get(key);
    if (!list) {
      const out: BoundConstraint[] = [];
      const seen = new Set<string>();
      const add = (from: ElementNode) => {
        for (const c of from.constraints) {
          if (seen.has(c.key)) continue;
          seen.add(c.key);
          out.push({ constraint: c, base: basePath(from) });
        }
      };
      add(node);
      if (provider !== node) add(provider);
      else if (node.path.includes('.')) {
        const typeBase = this.session.base(type.code);
        if (typeBase) add(typeBase.root);
      }
      list = out;
      cache.set(key, list);
    }
    return list;
  }

  /** One invariant at one place; `primitive` names the property when the constraint is on a primitive of `focus`. */
  private evaluate(constraint: Constraint, focus: Record<string, unknown>, base: string, env: InvariantEnv, path: string, primitive?: string): void {
    if (constraint.user) {
      // A user's invariant may take any time: the validator evaluates these after the walk, bounded.
      if (this.invariants) this.userInvariants.push({ constraint, expression: invariantExpression(constraint, primitive), focus, base, env, path });
      return;
    }
    const native = nativeInvariant(constraint);
    let result = native?.(focus, env);
    if (!result && this.invariants) result = this.invariants.check(invariantExpression(constraint, primitive), focus, base, env);
    if (result) this.invariantResult(constraint, path, result);
  }

  /** The issue an invariant's result makes, if any. */
  invariantResult(constraint: Constraint, path: string, result: InvariantResult): void {
    if (result.ok === true) return;
    if (result.ok === false) {
      this.issues.push({ severity: constraint.severity, code: 'invariant', message: `Constraint failed: ${constraint.key}: '${constraint.human}'`, expression: path, source: constraint.key });
      return;
    }
    this.issues.push({ severity: 'warning', code: 'invariant', message: `Constraint ${constraint.key} could not be evaluated: ${result.reason}`, expression: path, source: constraint.key });
  }

  private typeRules(value: Record<string, unknown>, node: ElementNode, type: TypeRef, path: string, scope: Scope): void {
    switch (type.code) {
      case 'Reference':
        checkReference(value, type, path, scope, this.referencing);
        return;
      case 'CodeableConcept':
        if (this.options.terminology && node.binding) {
          const codings = Array.isArray(value.coding) ? value.coding.filter(isObject).map(codingOf) : [];
          if (codings.length > 0) this.binding(node, 'CodeableConcept', codings, path);
          else if (node.binding.strength === 'required' && node.binding.valueSet) {
            this.error('code-invalid', path, `No code provided, and a code is required from the value set '${node.binding.valueSet}'`);
          }
        }
        return;
      case 'Coding':
        if (this.options.terminology && node.binding) this.binding(node, 'Coding', [codingOf(value)], path);
        return;
      case 'Quantity':
        if (this.options.terminology && node.binding && typeof value.code === 'string') {
          this.binding(node, 'Coding', [{ system: value.system as string | undefined, code: value.code }], path);
        }
        return;
      default:
        if (node.path === 'Bundle.entry') checkBundleEntry(value, path, this);
    }
  }

  private binding(node: ElementNode, kind: PendingBinding['kind'], codings: Coding[], path: string): void {
    const b = node.binding;
    if (!b?.valueSet || (b.strength !== 'required' && b.strength !== 'extensible')) return;
    if (codings.every((c) => c.code === undefined)) return;
    this.bindings.push({ valueSet: b.valueSet, strength: b.strength, kind, codings, expression: path });
  }

  // -------------------------------------------------------------------------------------------

  error(code: ValidationIssue['code'], expression: string, message: string, source?: string): void {
    this.issues.push({ severity: 'error', code, message, expression, source });
  }

  warning(code: ValidationIssue['code'], expression: string, message: string): void {
    this.issues.push({ severity: 'warning', code, message, expression });
  }
}

function isModifierPath(path: string): boolean {
  return /\.modifierExtension\[\d+\]$/.test(path);
}

function isEmpty(value: Record<string, unknown>): boolean {
  for (const _key in value) return false;
  return true;
}

function basePath(node: ElementNode): string {
  return node.path.replace(/\[x\]/g, '');
}

function codingOf(value: Record<string, unknown>): Coding {
  const coding: Coding = {};
  if (typeof value.system === 'string') coding.system = value.system;
  if (typeof value.version === 'string') coding.version = value.version;
  if (typeof value.code === 'string') coding.code = value.code;
  return coding;
}

/** Numbers by value, dates and times by text (same precision compares correctly). */
function compare(a: unknown, b: unknown): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0;
}


function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'string' ? 'a string' : typeof value === 'number' ? 'a number' : typeof value === 'boolean' ? 'a boolean' : 'an object';
}
