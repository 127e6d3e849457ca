/** Reading references: what type a reference points to, within a resource and within a Bundle. */

/** The resource types of a Bundle's entries by fullUrl, so `urn:uuid:` references can be typed. */
export type BundleIndex = Map<string, string>;

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
