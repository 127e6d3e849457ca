import type { CodeSystem, CodeSystemConcept } from 'fhir/r4';
import type { CodeSystemProvider, ConceptFilter, ConceptHandle, Designation, PropertyValue } from './provider';

const DISPLAY_USE = { system: 'http://terminology.hl7.org/CodeSystem/hl7TermMaintInfra', code: 'preferredForLanguage' };

/**
 * A provider with supplements applied: their displays (in the supplement's language) and
 * designations are added to the concepts they name. Used for built-in terminologies; a
 * CodeSystem resource's provider applies its supplements itself.
 */
export class SupplementedProvider implements CodeSystemProvider {
  readonly supplements: string[];
  private readonly added = new Map<string, Designation[]>();

  constructor(
    private readonly base: CodeSystemProvider,
    supplements: CodeSystem[],
  ) {
    this.supplements = [...base.supplements];
    for (const supplement of supplements) {
      const source = supplement.version ? `${supplement.url}|${supplement.version}` : (supplement.url ?? '');
      this.supplements.push(source);
      const visit = (concepts: CodeSystemConcept[]) => {
        for (const c of concepts) {
          const list = this.added.get(c.code) ?? [];
          if (c.display)
            list.push({
              language: supplement.language,
              use: DISPLAY_USE,
              value: c.display,
              status: 'active',
              isDisplay: false,
              source,
            });
          for (const d of c.designation ?? [])
            list.push({ language: d.language, use: d.use, value: d.value, status: 'active', isDisplay: false, source });
          this.added.set(c.code, list);
          if (c.concept) visit(c.concept);
        }
      };
      visit(supplement.concept ?? []);
    }
  }

  get url(): string {
    return this.base.url;
  }
  get version(): string | undefined {
    return this.base.version;
  }
  get name(): string {
    return this.base.name;
  }
  get content() {
    return this.base.content;
  }
  get caseSensitive(): boolean {
    return this.base.caseSensitive;
  }
  get language(): string | undefined {
    return this.base.language;
  }
  get resource(): CodeSystem | undefined {
    return this.base.resource;
  }
  get hasHierarchy(): boolean {
    return this.base.hasHierarchy;
  }
  get totalCount(): number {
    return this.base.totalCount;
  }
  get enumerable(): boolean {
    return this.base.enumerable;
  }
  get expansionBasis(): string | undefined {
    return this.base.expansionBasis;
  }

  locate(code: string): ConceptHandle | undefined {
    return this.base.locate(code);
  }
  display(concept: ConceptHandle): string | undefined {
    return this.base.display(concept);
  }
  definition(concept: ConceptHandle): string | undefined {
    return this.base.definition(concept);
  }
  designations(concept: ConceptHandle): Designation[] {
    return [...this.base.designations(concept), ...(this.added.get(concept.code) ?? [])];
  }
  properties(concept: ConceptHandle): PropertyValue[] {
    return this.base.properties(concept);
  }
  isAbstract(concept: ConceptHandle): boolean {
    return this.base.isAbstract(concept);
  }
  isInactive(concept: ConceptHandle): boolean {
    return this.base.isInactive(concept);
  }
  status(concept: ConceptHandle): string | undefined {
    return this.base.status(concept);
  }
  parents(concept: ConceptHandle): ConceptHandle[] {
    return this.base.parents(concept);
  }
  children(concept: ConceptHandle): ConceptHandle[] {
    return this.base.children(concept);
  }
  subsumes(a: ConceptHandle, b: ConceptHandle): boolean {
    return this.base.subsumes(a, b);
  }
  roots(): ConceptHandle[] {
    return this.base.roots();
  }
  all(): Iterable<ConceptHandle> {
    return this.base.all();
  }
  filter(property: string, op: string, value: string): ConceptFilter<ConceptHandle> {
    return this.base.filter(property, op, value);
  }
  hasSupplement(canonical: string): boolean {
    return this.supplements.some((s) => s === canonical || s.split('|')[0] === canonical);
  }
  propertyUri(code: string): string | undefined {
    return this.base.propertyUri(code);
  }
  extensions(concept: ConceptHandle) {
    return this.base.extensions(concept);
  }
  explainUnknown(code: string): string | undefined {
    return this.base.explainUnknown?.(code);
  }
  allowsOwnDisplay(concept: ConceptHandle): boolean {
    return this.base.allowsOwnDisplay?.(concept) ?? false;
  }
}
