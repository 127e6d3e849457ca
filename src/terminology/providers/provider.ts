import type { CodeSystem, Coding, Extension } from 'fhir/r4';

/**
 * What the engine needs of a terminology, whatever holds it: a CodeSystem resource, or a
 * terminology the server knows by its rules or tables (UCUM, BCP-47, ISO 3166, ...). The engine
 * (checker, expander, lookup, subsumes, compare) talks only to this interface; a registry picks
 * the provider for each system url (src/terminology/providers/registry.ts). Everything is
 * synchronous: a provider holds or indexes its content; the engine never waits in the middle of a
 * membership check.
 *
 * This folder holds the interface and every provider behind it: CodeSystem resources
 * (with its supplements and filters), the built-in terminologies (index.ts), and
 * the registry. A new large terminology (SNOMED CT, LOINC, RxNorm) is one more provider here.
 */

export type ContentMode = 'complete' | 'fragment' | 'not-present' | 'example' | 'supplement';

/** One designation of a concept (the display counts as one, with the display use). */
export interface Designation {
  language?: string;
  use?: Coding;
  value: string;
  /** 'active' unless the designation says otherwise (standards-status extension). */
  status: string;
  /** True for the concept's own display (rather than a designation). */
  isDisplay: boolean;
  extension?: Extension[];
  /** The supplement (url|version) the designation comes from, if any. */
  source?: string;
}

/** A concept property value, as stored: `value[x]` in one of its FHIR types. */
export interface PropertyValue {
  code: string;
  type: string;
  value: string | number | boolean | Coding;
}

/** The result of compiling a filter: a membership test, and the members when asked. */
export interface ConceptFilter<C> {
  contains(concept: C): boolean;
  /** All members, in the code system's order (not asked of a provider that is not enumerable). */
  members(): Iterable<C>;
  /** Why a concept is not a member, when the filter can say it better than "not in the value set". */
  explain?(concept: C): string | undefined;
  /**
   * members() tests every concept with contains(): a caller that paces long work lists all()
   * and tests each itself, so the gaps between members cost no unchecked time.
   */
  scansAll?: boolean;
}

export class FilterNotSupportedError extends Error {
  constructor(
    readonly property: string,
    readonly op: string,
    readonly value: string,
  ) {
    super(`filter ${property} ${op} ${value} is not supported`);
  }
}

export interface ConceptHandle {
  readonly code: string;
}

export interface CodeSystemProvider<C extends ConceptHandle = ConceptHandle> {
  readonly url: string;
  readonly version?: string;
  /** The name $lookup answers with. */
  readonly name: string;
  readonly content: ContentMode;
  readonly caseSensitive: boolean;
  /** The language of the code system's own displays (CodeSystem.language). */
  readonly language?: string;
  /** The resource, when the provider is one; used for status and metadata reporting. */
  readonly resource?: CodeSystem;
  /** Canonicals (url|version) of the supplements applied. */
  readonly supplements: string[];
  readonly hasHierarchy: boolean;
  readonly totalCount: number;
  /**
   * False for a terminology defined by a grammar (UCUM, BCP-47, HGVS): its codes cannot be
   * listed, so `all()` and `roots()` answer nothing and an expansion of all of it is refused,
   * or made from `expansionBasis`.
   */
  readonly enumerable: boolean;
  /** A value set whose codes stand for the whole terminology in an expansion (an unclosed one). */
  readonly expansionBasis?: string;

  /** Finds a code; where the system is case-insensitive the match ignores case. */
  locate(code: string): C | undefined;
  display(concept: C): string | undefined;
  definition(concept: C): string | undefined;
  designations(concept: C): Designation[];
  properties(concept: C): PropertyValue[];
  isAbstract(concept: C): boolean;
  isInactive(concept: C): boolean;
  /** The concept's status code (active, retired, deprecated, inactive, ...), if it states one. */
  status(concept: C): string | undefined;
  parents(concept: C): C[];
  children(concept: C): C[];
  /** Whether `descendant` is `ancestor` or below it. */
  subsumes(ancestor: C, descendant: C): boolean;
  roots(): C[];
  all(): Iterable<C>;
  /** Compiles a compose filter; throws FilterNotSupportedError for one it cannot evaluate. */
  filter(property: string, op: string, value: string): ConceptFilter<C>;
  hasSupplement(canonical: string): boolean;
  /** The URI that defines a property of this code system (its declaration's `uri`). */
  propertyUri(code: string): string | undefined;
  /** Extensions on the concept (for deprecation and item weights). */
  extensions(concept: C): Extension[];
  /** Why a code is not one of this terminology's, when the provider can say (a grammar error). */
  explainUnknown?(code: string): string | undefined;
  /** A code whose meaning its users assign (ISO 3166's user-assigned codes): any display may be theirs. */
  allowsOwnDisplay?(concept: C): boolean;
}
