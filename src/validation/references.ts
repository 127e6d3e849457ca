import { SERVED_RESOURCE_TYPES } from '../fhir/admin-types';

/** Reading references: what type a reference points to, within a resource and within a Bundle. */

export const RESOURCE_TYPES: ReadonlySet<string> = new Set(SERVED_RESOURCE_TYPES);

/** The resource types of a Bundle's entries by fullUrl, so `urn:uuid:` references can be typed. */
export type BundleIndex = Map<string, string>;

export function bundleIndex(bundle: Record<string, unknown>): BundleIndex {
  const index: BundleIndex = new Map();
  const entries = bundle.entry;
  if (!Array.isArray(entries)) return index;
  for (const entry of entries) {
    const e = entry as { fullUrl?: unknown; resource?: { resourceType?: unknown; id?: unknown } } | null;
    const type = e?.resource?.resourceType;
    if (typeof type !== 'string') continue;
    if (typeof e?.fullUrl === 'string') index.set(e.fullUrl, type);
    if (typeof e?.resource?.id === 'string') index.set(`${type}/${e.resource.id}`, type);
  }
  return index;
}

const RESTFUL = /(?:^|\/)([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/[A-Za-z0-9\-.]{1,64})?$/;

/**
 * The resource type a reference names: `Patient/1`, `http://x/fhir/Patient/1`, `Patient/1/_history/2`,
 * or a `urn:` found in the Bundle. Undefined when it cannot be told (a logical URL, an unknown urn).
 */
export function referencedType(reference: string, bundle: BundleIndex | undefined): string | undefined {
  if (reference.startsWith('urn:')) return bundle?.get(reference);
  const match = RESTFUL.exec(reference);
  if (!match) return undefined;
  return match[1];
}

/** The relative form `Type/id` of a RESTful reference or fullUrl, when it has one. */
export function restfulParts(reference: string): { type: string; id: string } | undefined {
  const match = RESTFUL.exec(reference);
  return match ? { type: match[1], id: match[2] } : undefined;
}

/** `http://hl7.org/fhir/StructureDefinition/Patient` or `Patient` -> `Patient`. */
export function typeNameOf(typeOrUrl: string): string {
  const prefix = 'http://hl7.org/fhir/StructureDefinition/';
  return typeOrUrl.startsWith(prefix) ? typeOrUrl.slice(prefix.length).split('|')[0] : typeOrUrl;
}
