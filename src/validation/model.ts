/**
 * A StructureDefinition compiled for validation: a tree of element nodes built once from the
 * snapshot, holding only what checking an instance needs (no texts, no mappings).
 */

export interface TypeRef {
  /** The FHIR type name: `string`, `CodeableConcept`, `Reference`, `Resource`, `Patient`... */
  code: string;
  /** Profiles the value must conform to (`type.profile`), e.g. an extension's definition. */
  profiles: string[];
  /** For Reference and canonical: the allowed targets (`type.targetProfile`). */
  targetProfiles: string[];
}

export interface Constraint {
  key: string;
  severity: 'error' | 'warning';
  human: string;
  expression: string;
  /**
   * Written by a user: an invariant of a stored profile that is not one of the bundled R4
   * definitions' own. Evaluated in `FhirPathPool`'s workers under a time limit, never in-process.
   */
  user?: boolean;
}

/** A constraint with the element path its expression is evaluated at (for FHIRPath type information). */
export interface BoundConstraint {
  constraint: Constraint;
  base: string;
}

export interface Binding {
  strength: 'required' | 'extensible' | 'preferred' | 'example';
  valueSet?: string;
}

export type DiscriminatorType = 'value' | 'exists' | 'pattern' | 'type' | 'profile';

export interface Slicing {
  discriminators: { type: DiscriminatorType; path: string }[];
  ordered: boolean;
  rules: 'closed' | 'open' | 'openAtEnd';
}

/** A fixed or pattern value, with the type it was given as (`fixedCode` -> `code`). */
export interface TypedValue {
  type: string;
  value: unknown;
}

export interface ElementNode {
  id: string;
  /** The element's path (`Patient.contact.name`), as FHIRPath type information knows it. */
  path: string;
  /** The last path segment without `[x]`. */
  name: string;
  choice: boolean;
  min: number;
  /** Infinity for `*`. */
  max: number;
  /** Whether the JSON holds an array: decided by the base definition's max, never by a profile's. */
  isArray: boolean;
  types: TypeRef[];
  /** `#Questionnaire.item`: the element takes its definition from another element. */
  contentReference?: string;
  children: ElementNode[];
  sliceName?: string;
  slicing?: Slicing;
  slices: ElementNode[];
  fixed?: TypedValue;
  pattern?: TypedValue;
  binding?: Binding;
  constraints: Constraint[];
  maxLength?: number;
  minValue?: TypedValue;
  maxValue?: TypedValue;
  isModifier: boolean;
  /** The profile this node was compiled from (for messages and lookups). */
  profile: CompiledProfile;
  /** JSON property name -> child and the type that name selects; built on first use. */
  keys?: Map<string, ChildSlot>;
  /** Constraints to evaluate at this node, by the node giving the children (or the type); built on first use. */
  constraintsByType?: Map<ElementNode | string, BoundConstraint[]>;
}

/** What one JSON property name means under an element: which child, and of which type. */
export interface ChildSlot {
  node: ElementNode;
  type: TypeRef;
  /** The type is a FHIR primitive: the property is a JSON value and may have a `_name` twin. */
  primitive: boolean;
}

export interface CompiledProfile {
  url: string;
  version?: string;
  name: string;
  /** The type it constrains or defines (`Patient`, `Extension`, `string`). */
  type: string;
  kind: string;
  derivation?: 'specialization' | 'constraint';
  /** The url it derives from. */
  base?: string;
  root: ElementNode;
  /** Nodes by element id, for content references (`#Questionnaire.item`). */
  byId: Map<string, ElementNode>;
  /** Nodes by path (first of each), for content references written as paths. */
  byPath: Map<string, ElementNode>;
}
