import type { Resource } from 'fhir/r4';

/**
 * What a person picks a resource by, beside its id: its name or title, its code, its date and its
 * status, from whichever of the common elements it has. Lists show this, so that a search for
 * Observations reads "Heart rate · 2024-05-01 10:00 · final", not forty ids.
 */
export function labelOf(resource: Resource): string {
  const r = resource as unknown as Record<string, unknown>;
  const status = typeof r.status === 'string' ? r.status : undefined;
  return [nameOf(r), codeOf(r), dateOf(r), status].filter((part) => part).join(' · ');
}

interface HumanName {
  text?: string;
  given?: string[];
  family?: string;
}

interface CodeableConcept {
  text?: string;
  coding?: { display?: string; code?: string }[];
}

function nameOf(r: Record<string, unknown>): string | undefined {
  if (typeof r.title === 'string') return r.title;
  if (typeof r.name === 'string') return r.name;
  if (Array.isArray(r.name)) {
    const name = r.name[0] as HumanName | undefined;
    return name?.text ?? ([...(name?.given ?? []), name?.family].filter((part) => part).join(' ') || undefined);
  }
  return undefined;
}

const CODE_ELEMENTS = ['code', 'vaccineCode', 'medicationCodeableConcept', 'type'];

function codeOf(r: Record<string, unknown>): string | undefined {
  for (const element of CODE_ELEMENTS) {
    const value = r[element];
    const concept = (Array.isArray(value) ? value[0] : value) as CodeableConcept | undefined;
    if (concept && typeof concept === 'object') {
      const text = concept.text ?? concept.coding?.[0]?.display ?? concept.coding?.[0]?.code;
      if (text) return text;
    }
  }
  return undefined;
}

const DATE_ELEMENTS = [
  'effectiveDateTime',
  'effectivePeriod',
  'onsetDateTime',
  'performedDateTime',
  'performedPeriod',
  'occurrenceDateTime',
  'authoredOn',
  'recordedDate',
  'issued',
  'birthDate',
  'period',
  'date',
];

function dateOf(r: Record<string, unknown>): string | undefined {
  for (const element of DATE_ELEMENTS) {
    const value = r[element];
    const text = typeof value === 'string' ? value : (value as { start?: string } | undefined)?.start;
    if (text) return text.replace('T', ' ').slice(0, 16);
  }
  return undefined;
}
