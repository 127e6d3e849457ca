import type { Coding, Resource } from 'fhir/r4';

/**
 * Reading criteria results (CQL values, FHIR JSON, FHIRPath answers) as what a report needs:
 * membership, resources, numbers for observations, codings for strata and supplemental data.
 */

/** A boolean-basis criterion holds when it answers true, or a non-empty list that is not all false. */
export function holds(value: unknown): boolean {
  if (Array.isArray(value))
    return value.length > 0 && !value.every((v) => v === false || v === null || v === undefined);
  return value === true;
}

export function isResource(value: unknown): value is Resource {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Resource).resourceType === 'string' &&
    typeof (value as Resource).id === 'string'
  );
}

/** The resources of a resource-basis criterion's answer (a list of them, or one). */
export function resourcesOf(value: unknown): Resource[] {
  return (Array.isArray(value) ? value : [value]).filter(isResource);
}

/** An observation as a number: a number, a CQL or FHIR Quantity's value, a duration in CQL; else undefined. */
export function numberOf(value: unknown): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  const json = jsonOf(v);
  if (typeof json === 'number' && Number.isFinite(json)) return json;
  if (typeof json === 'object' && json !== null) {
    const inner = (json as { value?: unknown }).value;
    if (typeof inner === 'number' && Number.isFinite(inner)) return inner;
    if (typeof inner === 'object') return numberOf(inner);
  }
  return undefined;
}

/** The FHIR JSON behind a cql-exec-fhir object, or the value itself. */
function jsonOf(value: unknown): unknown {
  if (typeof value === 'object' && value !== null && '_json' in value) return (value as { _json: unknown })._json;
  return value;
}

/**
 * The codings a value stands for: a code or concept (CQL or FHIR), a tuple with a `code`
 * (the supplemental data's payer), a primitive (as a bare code); one per list member.
 */
export function codingsOf(value: unknown): Coding[] {
  if (value === null || value === undefined) return [];
  if (Array.isArray(value)) return value.flatMap(codingsOf);
  const v = jsonOf(value);
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return [{ code: String(v) }];
  if (typeof v !== 'object' || v === null) return [];
  const o = v as Record<string, unknown>;
  if (typeof o.code === 'string')
    return [withoutUndefined({ system: stringOr(o.system), code: o.code, display: stringOr(o.display) })];
  if (Array.isArray(o.codes)) return o.codes.slice(0, 1).flatMap(codingsOf);
  if (Array.isArray(o.coding)) return (o.coding as unknown[]).slice(0, 1).flatMap(codingsOf);
  if (o.code !== undefined) return codingsOf(o.code);
  if (o.value !== undefined && typeof o.value !== 'object') return codingsOf(o.value);
  return [];
}

function stringOr(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function withoutUndefined(coding: Coding): Coding {
  return Object.fromEntries(Object.entries(coding).filter(([, v]) => v !== undefined)) as Coding;
}

/** The key strata are grouped by: `system|code` of each coding, joined. */
export function keyOf(codings: Coding[]): string {
  return codings.map((c) => `${c.system ?? ''}|${c.code}`).join(',');
}
