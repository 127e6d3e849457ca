import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CompartmentDefinition, Resource, SearchParameter } from 'fhir/r4';
import { PROJECT_ROOT } from './process';
import { fp } from './search-oracle';

/**
 * A patient's compartment worked out without the server: HL7's CompartmentDefinition and the
 * R4 SearchParameters from the published examples package, their FHIRPath evaluated by HL7's
 * engine (`.where(resolve() is X)` dropped: the reference itself is checked to name the patient).
 */

const EXAMPLES = join(PROJECT_ROOT, 'node_modules', 'hl7.fhir.r4.examples');

let loaded: { params: Map<string, string[]>; expressions: Map<string, string> } | undefined;

function definitions() {
  if (loaded) return loaded;
  const compartment = JSON.parse(
    readFileSync(join(EXAMPLES, 'CompartmentDefinition-patient.json'), 'utf8'),
  ) as CompartmentDefinition;
  const params = new Map(
    (compartment.resource ?? [])
      .filter((r) => (r.param ?? []).length > 0)
      .map((r) => [r.code as string, r.param as string[]]),
  );
  const expressions = new Map<string, string>();
  for (const file of readdirSync(EXAMPLES).filter((f) => f.startsWith('SearchParameter-'))) {
    const sp = JSON.parse(readFileSync(join(EXAMPLES, file), 'utf8')) as SearchParameter;
    for (const base of sp.base ?? []) if (sp.expression) expressions.set(`${base}.${sp.code}`, sp.expression);
  }
  loaded = { params, expressions };
  return loaded;
}

/** The types the CompartmentDefinition puts in a patient's compartment. */
export function compartmentTypes(): string[] {
  return [...definitions().params.keys()];
}

/** Whether `resource` is in the compartment of Patient/`id` (by the definition's parameters). */
export function inPatientCompartment(resource: Resource, id: string): boolean {
  const { params, expressions } = definitions();
  for (const code of params.get(resource.resourceType) ?? []) {
    const expression = expressions.get(`${resource.resourceType}.${code}`);
    if (!expression) continue;
    const plain = expression.replace(/\.where\(resolve\(\) is [A-Za-z]+\)/g, '');
    const parts = plain
      .split('|')
      .map((p) => p.trim())
      .filter((p) => p.startsWith(`${resource.resourceType}.`));
    for (const part of parts) {
      const refs = fp(resource, part) as { reference?: string }[];
      if (refs.some((r) => r?.reference === `Patient/${id}`)) return true;
    }
  }
  return false;
}

/** Every `reference` string in a resource. */
export function referencesIn(value: unknown, out: string[] = []): string[] {
  if (Array.isArray(value)) for (const v of value) referencesIn(v, out);
  else if (value && typeof value === 'object') {
    for (const [key, v] of Object.entries(value)) {
      if (key === 'reference' && typeof v === 'string') out.push(v);
      else referencesIn(v, out);
    }
  }
  return out;
}
