import type { CodeSystem, Extension } from 'fhir/r4';
import {
  FilterNotSupportedError,
  type CodeSystemProvider,
  type ConceptFilter,
  type ConceptHandle,
  type Designation,
  type PropertyValue,
} from './provider';

/** A code of a built-in terminology, with its display (and other English names). */
export interface BuiltInConcept extends ConceptHandle {
  readonly code: string;
  readonly display: string;
  /** Other names that are valid displays too. */
  readonly alternates?: readonly string[];
  /** The code's meaning is left to its users (see CodeSystemProvider.allowsOwnDisplay). */
  readonly userAssigned?: boolean;
}

export const DISPLAY_USE = {
  system: 'http://terminology.hl7.org/CodeSystem/hl7TermMaintInfra',
  code: 'preferredForLanguage',
};
const NONE: readonly never[] = Object.freeze([]);

/** The CodeSystem that describes a built-in terminology (found by url like any other). */
export function describe(options: {
  url: string;
  version?: string;
  name: string;
  title: string;
  caseSensitive?: boolean;
}): CodeSystem {
  const cs: CodeSystem = {
    resourceType: 'CodeSystem',
    url: options.url,
    name: options.name,
    title: options.title,
    status: 'active',
    content: 'complete',
  };
  if (options.version) cs.version = options.version;
  cs.caseSensitive = options.caseSensitive ?? true;
  return cs;
}

/**
 * What every built-in terminology shares: flat (no hierarchy), English displays, no properties,
 * every code active and selectable. Subclasses say which codes exist (`locate`) and, when they
 * can be listed, which (`all`).
 */
export abstract class BuiltInProvider<C extends BuiltInConcept = BuiltInConcept> implements CodeSystemProvider<C> {
  readonly content = 'complete' as const;
  readonly language = 'en';
  readonly supplements: string[] = [];
  readonly hasHierarchy = false;
  abstract readonly enumerable: boolean;
  readonly expansionBasis?: string;

  constructor(readonly resource: CodeSystem) {}

  get url(): string {
    return this.resource.url as string;
  }
  get version(): string | undefined {
    return this.resource.version;
  }
  get name(): string {
    return this.resource.name as string;
  }
  get caseSensitive(): boolean {
    return this.resource.caseSensitive !== false;
  }
  get totalCount(): number {
    return this.enumerable ? [...this.all()].length : 0;
  }

  abstract locate(code: string): C | undefined;

  all(): Iterable<C> {
    return NONE;
  }
  roots(): C[] {
    return [...this.all()];
  }
  display(concept: C): string | undefined {
    return concept.display;
  }
  definition(): string | undefined {
    return undefined;
  }
  designations(concept: C): Designation[] {
    const list: Designation[] = [
      { language: 'en', use: DISPLAY_USE, value: concept.display, status: 'active', isDisplay: true },
    ];
    for (const value of concept.alternates ?? [])
      list.push({ language: 'en', use: DISPLAY_USE, value, status: 'active', isDisplay: false });
    return list;
  }
  properties(): PropertyValue[] {
    return [];
  }
  isAbstract(): boolean {
    return false;
  }
  isInactive(): boolean {
    return false;
  }
  status(): string | undefined {
    return undefined;
  }
  parents(): C[] {
    return [];
  }
  children(): C[] {
    return [];
  }
  subsumes(ancestor: C, descendant: C): boolean {
    return ancestor.code === descendant.code;
  }
  filter(property: string, op: string, value: string): ConceptFilter<C> {
    throw new FilterNotSupportedError(property, op, value);
  }
  hasSupplement(canonical: string): boolean {
    return this.supplements.some((s) => s === canonical || s.split('|')[0] === canonical);
  }
  propertyUri(): string | undefined {
    return undefined;
  }
  extensions(): Extension[] {
    return [];
  }
  allowsOwnDisplay(concept: C): boolean {
    return concept.userAssigned === true;
  }
}

/** A terminology given as a table of codes and displays: every code can be listed. */
export class TableProvider extends BuiltInProvider {
  readonly enumerable = true;
  private readonly byCode = new Map<string, BuiltInConcept>();

  constructor(resource: CodeSystem, concepts: Iterable<BuiltInConcept>) {
    super(resource);
    for (const c of concepts) this.byCode.set(c.code, c);
  }

  override get totalCount(): number {
    return this.byCode.size;
  }
  locate(code: string): BuiltInConcept | undefined {
    return this.byCode.get(code);
  }
  override all(): Iterable<BuiltInConcept> {
    return this.byCode.values();
  }
}
