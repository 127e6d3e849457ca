import type { ElementDefinition, ElementDefinitionType, StructureDefinition } from 'fhir/r4';
import type { Binding, CompiledProfile, Constraint, ElementNode, Slicing, TypedValue, TypeRef } from './model';
import { isPrimitive, SYSTEM_TYPES } from './primitives';

/**
 * Compiles a StructureDefinition's snapshot into a tree of element nodes, once. Elements are
 * placed by their ids (`Observation.component:systolic.code`), so slices and their children land
 * under the element they slice; content references are resolved and checked for cycles here,
 * so a broken profile is refused before any instance is walked.
 */

/** A StructureDefinition that cannot be used to validate (no snapshot, a cycle, a malformed tree). */
export class ProfileError extends Error {
  constructor(
    readonly url: string,
    reason: string,
  ) {
    super(`The profile '${url}' cannot be used: ${reason}`);
  }
}

const FHIR_TYPE_EXT = 'http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type';
const BEST_PRACTICE_EXT = 'http://hl7.org/fhir/StructureDefinition/elementdefinition-bestpractice';

/** More elements than any real profile has (the largest core resource has about 500). */
const MAX_ELEMENTS = 20_000;

/**
 * The invariant expressions of the bundled definitions compiled so far: a stored profile's
 * snapshot repeats its base's invariants, which need no bounding (the base is compiled first).
 */
const BUNDLED_EXPRESSIONS = new Set<string>();

export interface CompileOptions {
  /** A StructureDefinition users stored: its own invariants are marked `user`. */
  stored?: boolean;
}

export function compileProfile(sd: StructureDefinition, options: CompileOptions = {}): CompiledProfile {
  const url = sd.url ?? '(no url)';
  const elements = sd.snapshot?.element;
  if (!elements || elements.length === 0) throw new ProfileError(url, 'it has no snapshot');
  if (elements.length > MAX_ELEMENTS)
    throw new ProfileError(url, `its snapshot has more than ${MAX_ELEMENTS} elements`);
  const type = sd.type ?? elements[0].path;
  const profile: CompiledProfile = {
    url,
    version: sd.version,
    name: sd.name ?? url,
    type,
    kind: sd.kind ?? 'resource',
    derivation: sd.derivation,
    base: sd.baseDefinition,
    root: undefined as unknown as ElementNode,
    byId: new Map(),
    byPath: new Map(),
  };
  const ids = elementIds(elements);
  elements.forEach((element, i) => {
    const id = ids[i];
    if (profile.byId.has(id)) throw new ProfileError(url, `two elements have the id '${id}'`);
    const node = toNode(element, id, profile, options);
    profile.byId.set(id, node);
    if (!profile.byPath.has(element.path)) profile.byPath.set(element.path, node);
    if (i === 0) {
      if (id.includes('.')) throw new ProfileError(url, `its first element '${id}' is not the root`);
      profile.root = node;
      return;
    }
    attach(node, profile);
  });
  for (const node of profile.byId.values()) if (node.contentReference) resolveContentReference(node, profile);
  return profile;
}

/** Ids as written, or derived from paths and slice names for definitions written without them. */
function elementIds(elements: ElementDefinition[]): string[] {
  const current = new Map<string, string>();
  return elements.map((element) => {
    if (element.id) return element.id;
    const path = element.path;
    const dot = path.lastIndexOf('.');
    const parent = dot < 0 ? '' : (current.get(path.slice(0, dot)) ?? path.slice(0, dot));
    const own = dot < 0 ? path : `${parent}.${path.slice(dot + 1)}`;
    const id = element.sliceName ? `${own}:${element.sliceName}` : own;
    current.set(path, id);
    return id;
  });
}

/** Places a node under its parent, or among the slices of the element it slices. */
function attach(node: ElementNode, profile: CompiledProfile): void {
  const id = node.id;
  const dot = id.lastIndexOf('.');
  const last = id.slice(dot + 1);
  const colon = last.lastIndexOf(':');
  if (colon >= 0) {
    // A slice (`a.b:s`) or a re-slice (`a.b:s/r`): it belongs to the element it slices.
    const sliced = last.includes('/')
      ? `${id.slice(0, dot + 1)}${last.slice(0, last.lastIndexOf('/'))}`
      : id.slice(0, dot + 1 + colon);
    const base = profile.byId.get(sliced);
    if (!base) throw new ProfileError(profile.url, `the slice '${id}' comes before the element it slices`);
    base.slices.push(node);
    return;
  }
  const parent = profile.byId.get(id.slice(0, dot));
  if (!parent) throw new ProfileError(profile.url, `the element '${id}' comes before its parent`);
  const choice = renamedChoice(parent, last);
  if (choice) {
    // `Observation.valueQuantity`: a constraint on `value[x]` for one of its types, i.e. a type slice.
    node.sliceName = last;
    node.name = choice.name;
    node.choice = true;
    choice.slicing ??= { discriminators: [{ type: 'type', path: '$this' }], ordered: false, rules: 'open' };
    choice.slices.push(node);
    return;
  }
  parent.children.push(node);
}

function renamedChoice(parent: ElementNode, name: string): ElementNode | undefined {
  return parent.children.find(
    (c) => c.choice && name.startsWith(c.name) && name.length > c.name.length && /[A-Z]/.test(name[c.name.length]),
  );
}

function toNode(
  element: ElementDefinition,
  id: string,
  profile: CompiledProfile,
  options: CompileOptions,
): ElementNode {
  const path = element.path;
  const last = path.slice(path.lastIndexOf('.') + 1);
  const choice = last.endsWith('[x]');
  const isRoot = !path.includes('.');
  const baseMax = element.base?.max ?? element.max ?? '1';
  const node: ElementNode = {
    id,
    path,
    name: choice ? last.slice(0, -3) : last,
    choice,
    min: element.min ?? 0,
    max: element.max === undefined || element.max === '*' ? Infinity : Number(element.max),
    isArray: !isRoot && (baseMax === '*' || Number(baseMax) > 1),
    types: (element.type ?? []).map((t) => typeRef(t)),
    children: [],
    slices: [],
    constraints: constraintsOf(element, options),
    isModifier: element.isModifier === true,
    profile,
  };
  if (Number.isNaN(node.max)) throw new ProfileError(profile.url, `the element '${id}' has max '${element.max}'`);
  // The R4 snapshots type Resource.id as a string; as a resource's id it is an id.
  if (profile.kind === 'resource' && path === `${profile.type}.id`)
    node.types = [{ code: 'id', profiles: [], targetProfiles: [] }];
  if (element.contentReference)
    node.contentReference = element.contentReference.slice(element.contentReference.indexOf('#') + 1);
  if (element.sliceName) node.sliceName = element.sliceName;
  if (element.slicing) node.slicing = slicingOf(element.slicing);
  const fixed = prefixed(element, 'fixed');
  if (fixed) node.fixed = fixed;
  const pattern = prefixed(element, 'pattern');
  if (pattern) node.pattern = pattern;
  const minValue = prefixed(element, 'minValue');
  if (minValue) node.minValue = minValue;
  const maxValue = prefixed(element, 'maxValue');
  if (maxValue) node.maxValue = maxValue;
  if (element.maxLength !== undefined) node.maxLength = element.maxLength;
  const binding = bindingOf(element);
  if (binding) node.binding = binding;
  return node;
}

function typeRef(t: ElementDefinitionType): TypeRef {
  let code = t.code;
  if (code.startsWith('http://hl7.org/fhirpath/System.')) {
    const ext = t.extension?.find((e) => e.url === FHIR_TYPE_EXT);
    code = ext?.valueUrl ?? ext?.valueUri ?? SYSTEM_TYPES[code] ?? 'string';
  }
  return { code, profiles: t.profile ?? [], targetProfiles: t.targetProfile ?? [] };
}

function constraintsOf(element: ElementDefinition, options: CompileOptions): Constraint[] {
  const out: Constraint[] = [];
  for (const c of element.constraint ?? []) {
    if (!c.expression || c.key === 'ele-1') continue;
    const bestPractice = c.extension?.some((e) => e.url === BEST_PRACTICE_EXT && e.valueBoolean === true);
    const constraint: Constraint = {
      key: c.key,
      severity: c.severity === 'error' && !bestPractice ? 'error' : 'warning',
      human: c.human,
      expression: c.expression,
    };
    if (!options.stored) BUNDLED_EXPRESSIONS.add(c.expression);
    else if (!BUNDLED_EXPRESSIONS.has(c.expression)) constraint.user = true;
    out.push(constraint);
  }
  return out;
}

function slicingOf(slicing: NonNullable<ElementDefinition['slicing']>): Slicing {
  return {
    discriminators: (slicing.discriminator ?? []).map((d) => ({ type: d.type, path: d.path })),
    ordered: slicing.ordered === true,
    rules: slicing.rules,
  };
}

function bindingOf(element: ElementDefinition): Binding | undefined {
  const b = element.binding as
    (ElementDefinition['binding'] & { valueSetUri?: string; valueSetReference?: { reference?: string } }) | undefined;
  if (!b) return undefined;
  const valueSet = b.valueSet ?? b.valueSetUri ?? b.valueSetReference?.reference;
  return { strength: b.strength, valueSet };
}

/** `fixedCodeableConcept` -> { type: 'CodeableConcept', value }; `fixedUri` -> { type: 'uri', value }. */
function prefixed(element: ElementDefinition, prefix: string): TypedValue | undefined {
  const record = element as unknown as Record<string, unknown>;
  for (const key in record) {
    if (!key.startsWith(prefix) || key.length === prefix.length) continue;
    const suffix = key.slice(prefix.length);
    if (!/^[A-Z]/.test(suffix)) continue;
    const lower = suffix[0].toLowerCase() + suffix.slice(1);
    return { type: isPrimitive(lower) ? lower : suffix, value: record[key] };
  }
  return undefined;
}

/** Follows a content reference to the element that defines it; a chain that loops is refused. */
function resolveContentReference(node: ElementNode, profile: CompiledProfile): ElementNode {
  const seen = new Set<ElementNode>();
  let at = node;
  while (at.contentReference) {
    if (seen.has(at))
      throw new ProfileError(profile.url, `the content reference of '${node.id}' loops ('#${at.contentReference}')`);
    seen.add(at);
    const target = profile.byId.get(at.contentReference) ?? profile.byPath.get(at.contentReference);
    if (!target)
      throw new ProfileError(
        profile.url,
        `the content reference '#${at.contentReference}' of '${node.id}' names no element`,
      );
    at = target;
  }
  return at;
}

/** The node a content reference stands for (checked at compile time, so it exists and ends). */
export function contentTarget(node: ElementNode): ElementNode {
  let at = node;
  for (let hops = 0; at.contentReference && hops < 100; hops++) {
    at = at.profile.byId.get(at.contentReference) ?? (at.profile.byPath.get(at.contentReference) as ElementNode);
  }
  return at;
}
