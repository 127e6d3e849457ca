import type { Extension, ValueSetExpansionContains, ValueSetComposeIncludeConceptDesignation } from 'fhir/r4';
import type { Designation, PropertyValue } from '../providers/provider';
import type { LanguageList } from '../languages';
import { DisplayList } from '../membership/display-list';
import type { Member } from './members';
import type { ExpandOptions } from './options';

/**
 * What a member looks like in an expansion: display for the languages asked for, designations,
 * properties (as R5's `contains.property`, written as the R4 cross-version extension), and the
 * extensions the HL7 ecosystem carries over from the code system and the value set.
 */

export const VS_EXP_PROP = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-ValueSet.expansion.property';
export const VS_CONT_PROP =
  'http://hl7.org/fhir/5.0/StructureDefinition/extension-ValueSet.expansion.contains.property';
const PROPERTY_URI = 'http://hl7.org/fhir/concept-properties#';

const ext = (name: string) => `http://hl7.org/fhir/StructureDefinition/${name}`;
const CS_EXTENSIONS_KEPT = new Set([
  ext('coding-sctdescid'),
  ext('rendering-style'),
  ext('rendering-xhtml'),
  ext('codesystem-alternate'),
]);
const VS_EXTENSIONS_KEPT = new Set([
  ext('valueset-supplement'),
  ext('valueset-deprecated'),
  ext('structuredefinition-standards-status'),
  ext('valueset-concept-definition'),
  ext('coding-sctdescid'),
  ext('rendering-style'),
  ext('rendering-xhtml'),
]);
const DESIGNATION_EXTENSIONS_KEPT = new Set([
  ext('coding-sctdescid'),
  ext('rendering-style'),
  ext('rendering-xhtml'),
  ext('structuredefinition-standards-status'),
  ext('codesystem-alternate'),
]);

/** The property definitions an expansion declares, in the order they were first used. */
export class PropertyDeclarations {
  readonly list: { code: string; uri?: string }[] = [];

  /** Declares a property (by uri when it has one, else by code); answers the code to use. */
  declare(code: string, uri: string | undefined): string {
    const found = uri
      ? this.list.find((p) => p.uri === uri || p.code === code)
      : this.list.find((p) => p.code === code);
    if (found) {
      if (uri && !found.uri) found.uri = uri;
      return found.code;
    }
    this.list.push(uri ? { code, uri } : { code });
    return code;
  }

  toExtensions(): Extension[] {
    return this.list.map((p) => ({
      url: VS_EXP_PROP,
      extension: [{ url: 'code', valueCode: p.code }, ...(p.uri ? [{ url: 'uri', valueUri: p.uri }] : [])],
    }));
  }
}

interface EntryContext {
  options: ExpandOptions;
  languages: LanguageList | undefined;
  declarations: PropertyDeclarations;
  /** The value set's language, for displays a value set gives its concepts. */
  valueSetLanguage?: string;
  /** Supplements whose content ended up in the answer. */
  usedSupplements: Set<string>;
}

export function entryFor(member: Member, ctx: EntryContext): ValueSetExpansionContains {
  if (member.imported) return { ...member.imported };
  const { cs, concept } = member;
  if (!cs || !concept) return { system: member.system, code: member.code };
  const extensions: Extension[] = [];
  for (const e of cs.extensions(concept)) if (CS_EXTENSIONS_KEPT.has(e.url)) extensions.push(e);
  for (const e of member.listed?.extension ?? []) if (VS_EXTENSIONS_KEPT.has(e.url)) extensions.push(e);

  const entry: ValueSetExpansionContains = {};
  if (extensions.length > 0) entry.extension = extensions;
  entry.system = member.system;
  if (member.showVersion && member.version) entry.version = member.version;
  if (cs.isAbstract(concept)) entry.abstract = true;
  if (cs.isInactive(concept)) entry.inactive = true;
  entry.code = concept.code;

  const designations = cs.designations(concept);
  if (member.listed?.display) {
    designations.unshift({
      language: ctx.valueSetLanguage,
      value: member.listed.display,
      status: 'active',
      isDisplay: true,
    });
  }
  for (const d of member.listed?.designation ?? []) {
    designations.push({
      language: d.language,
      use: d.use,
      value: d.value,
      status: 'active',
      isDisplay: false,
      extension: d.extension,
    });
  }
  const list = DisplayList.of(designations, cs.language);
  const display =
    list.preferredDisplay(ctx.languages) ??
    (ctx.languages?.refusesOthers ? undefined : list.preferredDisplay(undefined));
  if (display) entry.display = display;
  if (ctx.options.includeDesignations) {
    const chosen = designations.find((d) => d.value === display);
    const out: ValueSetComposeIncludeConceptDesignation[] = [];
    for (const d of designations) {
      if (d === chosen || !wanted(d, ctx.options.designations)) continue;
      if (!d.language && d.isDisplay) continue;
      out.push(designationOf(d));
      if (d.source) ctx.usedSupplements.add(d.source);
    }
    if (out.length > 0) entry.designation = out;
  }

  const properties = propertiesOf(member, ctx);
  if (properties.length > 0) entry.extension = [...(entry.extension ?? []), ...properties];
  return entry;
}

function wanted(d: Designation, filters: string[]): boolean {
  if (filters.length === 0) return true;
  return filters.some((f) => {
    const [left, right] = f.split('|');
    if (d.use && d.use.system === left && d.use.code === right) return true;
    return left === 'urn:ietf:bcp:47' && d.language === right;
  });
}

function designationOf(d: Designation): ValueSetComposeIncludeConceptDesignation {
  // Built in FHIR element order: extension, language, use, value.
  const out: Partial<ValueSetComposeIncludeConceptDesignation> = {};
  const kept = (d.extension ?? []).filter((e) => DESIGNATION_EXTENSIONS_KEPT.has(e.url));
  if (kept.length > 0) out.extension = kept;
  if (d.language) out.language = d.language;
  if (d.use) out.use = d.use;
  out.value = d.value;
  return out as ValueSetComposeIncludeConceptDesignation;
}

/** The properties to show for a member: its status, labels, order and weight, and those asked for. */
function propertiesOf(member: Member, ctx: EntryContext): Extension[] {
  const { cs, concept } = member;
  if (!cs || !concept) return [];
  const values: { code: string; uri?: string; type: string; value: PropertyValue['value'] }[] = [];
  const set = (
    code: string,
    uri: string | undefined,
    type: string,
    value: PropertyValue['value'] | undefined,
    repeatable = false,
  ) => {
    if (value === undefined) return;
    const existing = values.find((v) => v.code === code && (!repeatable || v.value === value));
    if (existing && !repeatable) existing.value = value;
    else if (!existing) values.push({ code, uri, type, value });
  };
  const status = cs.status(concept);
  if (status && status.toLowerCase() !== 'active') set('status', `${PROPERTY_URI}status`, 'code', status);
  const csExt = cs.extensions(concept);
  const vsExt = member.listed?.extension ?? [];
  const decimalOf = (list: Extension[], name: string) => {
    const e = list.find((x) => x.url === ext(name));
    return e ? (e.valueDecimal ?? e.valueInteger) : undefined;
  };
  set('label', `${PROPERTY_URI}label`, 'string', csExt.find((e) => e.url === ext('codesystem-label'))?.valueString);
  set('label', `${PROPERTY_URI}label`, 'string', vsExt.find((e) => e.url === ext('valueset-label'))?.valueString);
  set('order', `${PROPERTY_URI}order`, 'decimal', decimalOf(csExt, 'codesystem-conceptOrder'));
  set('order', `${PROPERTY_URI}order`, 'decimal', decimalOf(vsExt, 'valueset-conceptOrder'));
  set('weight', `${PROPERTY_URI}itemWeight`, 'decimal', decimalOf(csExt, 'itemWeight'));
  set('weight', `${PROPERTY_URI}itemWeight`, 'decimal', decimalOf(vsExt, 'itemWeight'));
  const standards = csExt.find((e) => e.url === ext('structuredefinition-standards-status'))?.valueCode;
  if (standards) set('status', `${PROPERTY_URI}status`, 'code', standards);

  const asked = ctx.options.properties;
  const all = cs.properties(concept);
  if (asked.includes('*')) for (const p of all) set(p.code, cs.propertyUri(p.code), p.type, p.value, true);
  for (const name of asked) {
    if (name === '*') continue;
    if (name === 'definition') {
      set('definition', `${PROPERTY_URI}definition`, 'string', cs.definition(concept));
      continue;
    }
    for (const p of all) if (p.code === name) set(p.code, cs.propertyUri(p.code), p.type, p.value, true);
  }
  return values.map((v) => {
    const code = ctx.declarations.declare(v.code, v.uri);
    const valueKey = `value${v.type.charAt(0).toUpperCase()}${v.type.slice(1)}`;
    return {
      url: VS_CONT_PROP,
      extension: [{ url: 'code', valueCode: code }, { url: 'value', [valueKey]: v.value } as Extension],
    };
  });
}
