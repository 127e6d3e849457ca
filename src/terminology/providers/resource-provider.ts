import type { CodeSystem, CodeSystemConcept, Coding, Extension } from 'fhir/r4';
import { compileFilter } from './filters';
import type { CodeSystemProvider, ConceptFilter, ContentMode, Designation, PropertyValue } from './provider';

/**
 * A provider over a CodeSystem resource (complete, fragment, example or not-present content),
 * with its supplements applied. The concepts are indexed once: by code (and lower-cased code
 * where the system is case-insensitive), with parent and child links from nesting and from the
 * `parent`/`child`/`subsumedBy` properties.
 */

export interface ConceptNode {
  readonly code: string;
  readonly source: CodeSystemConcept;
  /** Links, in both directions. A node without any shares the frozen NO_NODES (memory: most are leaves). */
  parents: ConceptNode[];
  children: ConceptNode[];
  /** Designations and properties that supplements add. */
  supplementDesignations?: Designation[];
  supplementProperties?: PropertyValue[];
  supplementExtensions?: Extension[];
}

const STANDARDS_STATUS = 'http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status';
const PROPERTY_URI = 'http://hl7.org/fhir/concept-properties#';
const DISPLAY_USE: Coding = {
  system: 'http://terminology.hl7.org/CodeSystem/hl7TermMaintInfra',
  code: 'preferredForLanguage',
};

export class ResourceCodeSystemProvider implements CodeSystemProvider<ConceptNode> {
  readonly url: string;
  readonly version?: string;
  readonly name: string;
  readonly content: ContentMode;
  readonly enumerable = true;
  readonly caseSensitive: boolean;
  readonly language?: string;
  readonly supplements: string[];
  readonly hasHierarchy: boolean;
  private readonly byCode = new Map<string, ConceptNode>();
  private readonly byLowerCode?: Map<string, ConceptNode>;
  private readonly ordered: ConceptNode[] = [];
  private readonly rootNodes: ConceptNode[] = [];
  /** Property codes as the code system names them, by their standard meaning. */
  private readonly propertyCodes: Map<string, string>;
  private readonly propertyTypes = new Map<string, string>();
  private readonly propertyUris = new Map<string, string>();

  constructor(
    readonly resource: CodeSystem,
    supplements: CodeSystem[] = [],
  ) {
    this.url = resource.url ?? '';
    this.version = resource.version;
    this.name = resource.name ?? resource.title ?? this.url;
    this.content = (resource.content ?? 'complete') as ContentMode;
    // FHIR's default is "not stated"; tx servers treat that as case-sensitive.
    this.caseSensitive = resource.caseSensitive !== false;
    this.language = resource.language;
    this.propertyCodes = standardPropertyCodes(resource);
    for (const p of resource.property ?? []) {
      this.propertyTypes.set(p.code, p.type);
      if (p.uri) this.propertyUris.set(p.code, p.uri);
    }
    this.index(resource.concept ?? [], undefined);
    this.linkByProperties();
    this.hasHierarchy = this.ordered.some((n) => n.children.length > 0);
    if (!this.caseSensitive) {
      this.byLowerCode = new Map();
      for (const node of this.ordered)
        if (!this.byLowerCode.has(node.code.toLowerCase())) this.byLowerCode.set(node.code.toLowerCase(), node);
    }
    this.supplements = [];
    for (const supplement of supplements) this.applySupplement(supplement);
  }

  get totalCount(): number {
    return this.ordered.length;
  }

  private index(concepts: CodeSystemConcept[], parent: ConceptNode | undefined): void {
    for (const concept of concepts) {
      let node = this.byCode.get(concept.code);
      if (!node) {
        node = { code: concept.code, source: concept, parents: NO_NODES, children: NO_NODES };
        this.byCode.set(concept.code, node);
        this.ordered.push(node);
        if (parent) addLink(parent, node);
      } else if (parent) {
        // A code listed twice: link it once more only if it is under another parent.
        link(parent, node);
      }
      if (!parent) this.rootNodes.push(node);
      if (concept.concept) this.index(concept.concept, node);
    }
  }

  /** Hierarchy stated by properties rather than nesting (`parent`, `child`, `subsumedBy`). */
  private linkByProperties(): void {
    const parentCode = this.propertyCodes.get('parent');
    const childCode = this.propertyCodes.get('child');
    const subsumedBy = this.propertyCodes.get('subsumedBy');
    if (!parentCode && !childCode && !subsumedBy) return;
    for (const node of this.ordered) {
      for (const p of node.source.property ?? []) {
        const target = this.byCode.get(p.valueCode ?? (p.valueCoding?.code as string) ?? '');
        if (!target) continue;
        if (p.code === parentCode || p.code === subsumedBy) link(target, node);
        else if (p.code === childCode) link(node, target);
      }
    }
    this.rootNodes.length = 0;
    for (const node of this.ordered) if (node.parents.length === 0) this.rootNodes.push(node);
  }

  private applySupplement(supplement: CodeSystem): void {
    const source = supplement.version ? `${supplement.url}|${supplement.version}` : (supplement.url ?? '');
    this.supplements.push(source);
    for (const p of supplement.property ?? []) {
      if (!this.propertyTypes.has(p.code)) this.propertyTypes.set(p.code, p.type);
      if (p.uri && !this.propertyUris.has(p.code)) this.propertyUris.set(p.code, p.uri);
    }
    const visit = (concepts: CodeSystemConcept[]) => {
      for (const concept of concepts) {
        const node = this.locate(concept.code);
        if (node) {
          node.supplementDesignations ??= [];
          if (concept.display && supplement.language) {
            node.supplementDesignations.push({
              language: supplement.language,
              use: DISPLAY_USE,
              value: concept.display,
              status: 'active',
              isDisplay: false,
              source,
            });
          }
          for (const d of concept.designation ?? [])
            node.supplementDesignations.push({ ...toDesignation(d.value, d.language, d.use, d.extension), source });
          node.supplementProperties ??= [];
          for (const p of concept.property ?? []) {
            const value = propertyValue(p);
            if (value) node.supplementProperties.push(value);
          }
          if (concept.extension) (node.supplementExtensions ??= []).push(...concept.extension);
        }
        if (concept.concept) visit(concept.concept);
      }
    };
    visit(supplement.concept ?? []);
  }

  hasSupplement(canonical: string): boolean {
    return this.supplements.some((s) => s === canonical || s.split('|')[0] === canonical);
  }

  locate(code: string): ConceptNode | undefined {
    return this.byCode.get(code) ?? this.byLowerCode?.get(code.toLowerCase());
  }

  display(concept: ConceptNode): string | undefined {
    return concept.source.display?.trim();
  }

  definition(concept: ConceptNode): string | undefined {
    return concept.source.definition;
  }

  designations(concept: ConceptNode): Designation[] {
    const list: Designation[] = [];
    if (concept.source.display) {
      list.push({
        language: this.language,
        use: DISPLAY_USE,
        value: concept.source.display.trim(),
        status: 'active',
        isDisplay: true,
      });
    }
    for (const d of concept.source.designation ?? []) list.push(toDesignation(d.value, d.language, d.use, d.extension));
    if (concept.supplementDesignations) list.push(...concept.supplementDesignations);
    return list;
  }

  properties(concept: ConceptNode): PropertyValue[] {
    const list: PropertyValue[] = [];
    for (const p of concept.source.property ?? []) {
      const value = propertyValue(p);
      if (value) list.push(value);
    }
    if (concept.supplementProperties) list.push(...concept.supplementProperties);
    return list;
  }

  extensions(concept: ConceptNode): Extension[] {
    return [...(concept.source.extension ?? []), ...(concept.supplementExtensions ?? [])];
  }

  /** The concept's value for a property by its standard meaning (`status`, `inactive`, ...). */
  standardProperty(concept: ConceptNode, meaning: string): PropertyValue | undefined {
    const code = this.propertyCodes.get(meaning) ?? meaning;
    return this.properties(concept).find((p) => p.code === code || p.code === meaning);
  }

  isAbstract(concept: ConceptNode): boolean {
    for (const meaning of ['notSelectable', 'abstract', 'not-selectable']) {
      const p = this.standardProperty(concept, meaning);
      if (p && (p.value === true || p.value === 'true')) return true;
    }
    return false;
  }

  isInactive(concept: ConceptNode): boolean {
    const inactive = this.standardProperty(concept, 'inactive');
    if (inactive && (inactive.value === true || inactive.value === 'true')) return true;
    const status = this.standardProperty(concept, 'status');
    if (status && (status.value === 'inactive' || status.value === 'retired')) return true;
    const standards = this.extensions(concept).find((e) => e.url === STANDARDS_STATUS);
    return (standards?.valueCode ?? '').toLowerCase() === 'withdrawn';
  }

  status(concept: ConceptNode): string | undefined {
    const status = this.standardProperty(concept, 'status');
    if (status && typeof status.value === 'string') return status.value;
    const flags: [string, string][] = [
      ['deprecated', 'deprecated'],
      ['inactive', 'inactive'],
      ['retired', 'retired'],
    ];
    for (const [meaning, result] of flags) {
      const p = this.standardProperty(concept, meaning);
      if (p && (p.value === true || p.value === 'true')) return result;
    }
    const standards = this.extensions(concept).find((e) => e.url === STANDARDS_STATUS);
    return standards?.valueCode;
  }

  parents(concept: ConceptNode): ConceptNode[] {
    return concept.parents;
  }

  children(concept: ConceptNode): ConceptNode[] {
    return concept.children;
  }

  /** Walks up from the descendant: O(depth x fan-in), never the whole system. */
  subsumes(ancestor: ConceptNode, descendant: ConceptNode): boolean {
    if (ancestor === descendant) return true;
    const seen = new Set<ConceptNode>();
    const stack = [...descendant.parents];
    while (stack.length > 0) {
      const node = stack.pop() as ConceptNode;
      if (node === ancestor) return true;
      if (seen.has(node)) continue;
      seen.add(node);
      stack.push(...node.parents);
    }
    return false;
  }

  roots(): ConceptNode[] {
    return this.rootNodes;
  }

  all(): Iterable<ConceptNode> {
    return this.ordered;
  }

  filter(property: string, op: string, value: string): ConceptFilter<ConceptNode> {
    return compileFilter(this, { property, op, value });
  }

  propertyUri(code: string): string | undefined {
    return this.propertyUris.get(code);
  }

  /** The declared type of a property (code, Coding, string, boolean, ...), if declared. */
  propertyType(code: string): string | undefined {
    return this.propertyTypes.get(code);
  }

  /** Whether CodeSystem.filter declares this filter (code and operator). */
  declaresFilter(code: string, op: string): boolean {
    return (this.resource.filter ?? []).some(
      (f) => f.code === code && f.operator.includes(op as (typeof f.operator)[number]),
    );
  }

  /** The code this system uses for a property with the given standard meaning, if any. */
  propertyCodeFor(meaning: string): string | undefined {
    return this.propertyCodes.get(meaning);
  }
}

/** Frozen: a push onto the shared empty list would be a bug, and throws. */
const NO_NODES = Object.freeze([]) as unknown as ConceptNode[];

/** Links two nodes known not to be linked yet. */
function addLink(parent: ConceptNode, child: ConceptNode): void {
  if (parent.children === NO_NODES) parent.children = [child];
  else parent.children.push(child);
  if (child.parents === NO_NODES) child.parents = [parent];
  else child.parents.push(parent);
}

function link(parent: ConceptNode, child: ConceptNode): void {
  if (!parent.children.includes(child)) addLink(parent, child);
}

/** Maps standard property meanings (from their concept-properties URI) to this system's codes. */
function standardPropertyCodes(resource: CodeSystem): Map<string, string> {
  const codes = new Map<string, string>();
  for (const p of resource.property ?? []) {
    if (p.uri?.startsWith(PROPERTY_URI)) codes.set(p.uri.slice(PROPERTY_URI.length), p.code);
    else if (!codes.has(p.code)) codes.set(p.code, p.code);
  }
  return codes;
}

function toDesignation(value: string, language?: string, use?: Coding, extension?: Extension[]): Designation {
  const status = extension?.find((e) => e.url === STANDARDS_STATUS)?.valueCode;
  return { language, use, value: value.trim(), status: status ?? 'active', isDisplay: false, extension };
}

const VALUE_KEYS: [string, string][] = [
  ['valueCode', 'code'],
  ['valueString', 'string'],
  ['valueBoolean', 'boolean'],
  ['valueInteger', 'integer'],
  ['valueDecimal', 'decimal'],
  ['valueDateTime', 'dateTime'],
  ['valueCoding', 'Coding'],
];

function propertyValue(p: NonNullable<CodeSystemConcept['property']>[number]): PropertyValue | undefined {
  for (const [key, type] of VALUE_KEYS) {
    const value = (p as unknown as Record<string, unknown>)[key];
    if (value !== undefined) return { code: p.code, type, value: value as PropertyValue['value'] };
  }
  return undefined;
}
