import { SERVED_RESOURCE_TYPES } from '../fhir/admin-types';
import type { BundleIndex } from '../fhir/references';

export { referencedType, restfulParts, type BundleIndex } from '../fhir/references';

/** Reading references: what type a reference points to, within a resource and within a Bundle. */

export const RESOURCE_TYPES: ReadonlySet<string> = new Set(SERVED_RESOURCE_TYPES);

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

/** `http://hl7.org/fhir/StructureDefinition/Patient` or `Patient` -> `Patient`. */
export function typeNameOf(typeOrUrl: string): string {
  const prefix = 'http://hl7.org/fhir/StructureDefinition/';
  return typeOrUrl.startsWith(prefix) ? typeOrUrl.slice(prefix.length).split('|')[0] : typeOrUrl;
}
