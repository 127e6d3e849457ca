import type { Coding, Resource } from 'fhir/r4';
import type { ElementModel } from '../fhir/model/model';
import type { SummaryMode } from './query/criteria';

/**
 * `_summary` and `_elements`: the parts of each resource the client asked for, marked
 * SUBSETTED (R4 search.html 3.1.1.5.8) so nobody mistakes them for whole resources.
 */

const SUBSETTED: Coding = { system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue', code: 'SUBSETTED' };
const ALWAYS = new Set(['resourceType', 'id', 'meta']);

export function subset(
  resource: Resource,
  model: ElementModel,
  options: { summary?: SummaryMode; elements?: string[] },
): Resource {
  const { summary, elements } = options;
  let keep: ((key: string) => boolean) | undefined;
  if (elements && elements.length > 0) {
    const wanted = elementsWanted(resource.resourceType, model, elements);
    keep = (key) => ALWAYS.has(key) || wanted.has(baseName(key)) || choiceInSummary(wanted, key);
  } else if (summary === 'true') {
    const inSummary = new Set(
      model
        .topLevel(resource.resourceType)
        .filter(([, info]) => info.summary)
        .map(([name]) => name),
    );
    keep = (key) =>
      ALWAYS.has(key) ||
      inSummary.has(baseName(key)) ||
      inSummary.has(`${baseName(key)}[x]`) ||
      choiceInSummary(inSummary, key);
  } else if (summary === 'text') {
    const required = new Set(
      model
        .topLevel(resource.resourceType)
        .filter(([, info]) => info.required)
        .map(([name]) => name),
    );
    keep = (key) => ALWAYS.has(key) || key === 'text' || required.has(baseName(key)) || choiceInSummary(required, key);
  } else if (summary === 'data') {
    keep = (key) => key !== 'text';
  }
  if (!keep) return resource;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(resource)) if (keep(key)) out[key] = value;
  const meta = { ...(resource.meta ?? {}) };
  meta.tag = [...(meta.tag ?? []).filter((t) => t.code !== SUBSETTED.code), SUBSETTED];
  out.meta = meta;
  return out as unknown as Resource;
}

/** Bulk Data `_elements`: as search's, the named top-level elements plus the mandatory ones, marked SUBSETTED. */
export function subsetWithMandatory(resource: Resource, model: ElementModel, names: string[]): Resource {
  return subset(resource, model, { elements: names });
}

/**
 * The top-level elements `_elements` keeps: those named (a choice element by its base name too,
 * `effective` for `effective[x]`, as the definition names it) and those the base definition makes
 * mandatory (min 1), which R4 search.html says a server SHOULD return, so the subset is still a
 * valid resource.
 */
function elementsWanted(type: string, model: ElementModel, elements: string[]): Set<string> {
  const top = model.topLevel(type);
  const choices = new Set(top.map(([name]) => name).filter((name) => name.endsWith('[x]')));
  const wanted = new Set<string>();
  for (const element of elements) {
    const name = element.split('.')[0];
    wanted.add(name);
    if (choices.has(`${name}[x]`)) wanted.add(`${name}[x]`);
  }
  for (const [name, info] of top) if (info.required) wanted.add(name);
  return wanted;
}

/** `_birthDate` (a primitive's extensions) travels with `birthDate`. */
function baseName(key: string): string {
  return key.startsWith('_') ? key.slice(1) : key;
}

/** `valueQuantity` belongs to `value[x]`. */
function choiceInSummary(names: Set<string>, key: string): boolean {
  const m = /^_?([a-z][A-Za-z]*?)[A-Z]/.exec(key);
  return m !== null && names.has(`${m[1]}[x]`);
}
