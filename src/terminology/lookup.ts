import type { Coding } from 'fhir/r4';
import type { CodeSystemProvider, ConceptHandle, PropertyValue } from './providers/provider';
import { plainIssue, TerminologyError } from './issues';
import type { EngineContext } from './validate-code';
import { DisplayList } from './membership/display-list';
import { codeSystemProvider } from './providers/select';

/**
 * CodeSystem/$lookup as the engine sees it: everything known about one code of one code system,
 * with the supplements asked for applied.
 */

export interface LookupRequest {
  system: string;
  version?: string;
  code: string;
  /** Property codes wanted; empty means all of them (`*` too). */
  properties: string[];
}

export interface LookupDesignation {
  language?: string;
  use?: Coding;
  value: string;
  /** The supplement the designation comes from. */
  source?: string;
}

export interface LookupProperty {
  code: string;
  /** The value in its FHIR type (`code`, `Coding`, `boolean`, ...). */
  type: string;
  value: PropertyValue['value'];
  /** For parent/child: the display of the concept referred to. */
  description?: string;
}

export interface LookupResult {
  name: string;
  version?: string;
  display?: string;
  code: string;
  system: string;
  definition?: string;
  abstract: boolean;
  designation: LookupDesignation[];
  property: LookupProperty[];
  usedSupplements: string[];
}

export function lookupCode(request: LookupRequest, ctx: EngineContext): LookupResult {
  const cs = codeSystemProvider(request.system, request.version, ctx, 'lookup');
  const concept = cs.locate(request.code);
  if (!concept) {
    const where = cs.version ? `${cs.url} version ${cs.version}` : cs.url;
    throw new TerminologyError(plainIssue('LOOKUP_UNKNOWN_CODE', [request.code, where]), 404);
  }
  const designations = cs.designations(concept);
  const display =
    DisplayList.of(designations, cs.language).preferredDisplay(ctx.params.workingLanguages()) ?? cs.display(concept);

  const result: LookupResult = {
    name: cs.name,
    version: cs.version,
    display,
    code: concept.code,
    system: cs.url,
    definition: cs.definition(concept),
    abstract: cs.isAbstract(concept),
    designation: designations.map((d) => {
      const out: LookupDesignation = { value: d.value };
      if (d.language) out.language = d.language;
      if (d.use) out.use = d.use;
      if (d.source) out.source = d.source;
      return out;
    }),
    property: propertiesOf(cs, concept, request.properties),
    usedSupplements: cs.supplements,
  };
  return result;
}

/** The concept's own properties, plus the computed ones every lookup may ask for (parent, child, inactive). */
function propertiesOf(cs: CodeSystemProvider, concept: ConceptHandle, asked: string[]): LookupProperty[] {
  const wanted = (code: string) => asked.length === 0 || asked.includes('*') || asked.includes(code);
  const out: LookupProperty[] = [];
  const related = (code: string, nodes: ConceptHandle[]) => {
    if (!wanted(code)) return;
    for (const node of nodes) {
      const p: LookupProperty = { code, type: 'code', value: node.code };
      const description = cs.display(node);
      if (description) p.description = description;
      out.push(p);
    }
  };
  const ownParentLinks = new Set(['parent', 'child']);
  related('parent', cs.parents(concept));
  related('child', cs.children(concept));
  const own = cs.properties(concept).filter((p) => !ownParentLinks.has(p.code));
  if (wanted('inactive') && !own.some((p) => p.code === 'inactive'))
    out.push({ code: 'inactive', type: 'boolean', value: cs.isInactive(concept) });
  for (const p of own) if (wanted(p.code)) out.push({ code: p.code, type: p.type, value: p.value });
  return out;
}
