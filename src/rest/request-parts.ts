import type { Resource } from 'fhir/r4';
import { fhirError, type FhirError } from '../fhir/errors';
import { ID_PATTERN } from '../storage/repository';
import type { StoredVersion } from '../storage/store';
import type { FhirRequest } from './fhir-request';

/** Reading the parts of a FHIR request the interactions share: its body, id, criteria, preconditions. */

/** The search criteria of a conditional interaction (`PUT Patient?identifier=...`), as the query string. */
export function criteriaOf(request: FhirRequest): string | undefined {
  const params = new URLSearchParams();
  for (const [name, values] of Object.entries(request.query)) {
    if (name === '_format' || name === '_pretty') continue;
    for (const value of values) params.append(name, value);
  }
  const text = params.toString();
  return text === '' ? undefined : text;
}

export function checkId(id: string): void {
  if (!ID_PATTERN.test(id)) throw fhirError('ERR_RESOURCE_ID_INVALID', { id: clip(id) });
}

export function bodyResource(request: FhirRequest, type: string): Resource {
  const body = request.body as { resourceType?: unknown } | undefined;
  if (body === undefined) throw fhirError('ERR_BODY_MISSING', {});
  if (typeof body !== 'object' || body === null || Array.isArray(body) || typeof body.resourceType !== 'string') {
    throw fhirError('ERR_BODY_NOT_RESOURCE', { expected: type });
  }
  if (body.resourceType !== type)
    throw fhirError('ERR_RESOURCE_TYPE_MISMATCH', { expected: type, found: clip(body.resourceType) });
  return body as Resource;
}

/** The patch a request sends, its content type, and the version it expects. */
export function patchOf(request: FhirRequest) {
  return { body: request.body, contentType: request.headers['content-type'], ifMatch: ifMatch(request) };
}

/** `W/"3"` or `"3"` -> 3. */
export function ifMatch(request: FhirRequest): number | undefined {
  const raw = request.headers['if-match'];
  if (raw === undefined) return undefined;
  const match = /^\s*(W\/)?"([1-9][0-9]{0,9})"\s*$/.exec(raw);
  if (!match) throw fhirError('ERR_VERSION_IF_MATCH_INVALID', { value: raw.slice(0, 50) });
  return Number(match[2]);
}

/** If-None-Match naming the current version, or If-Modified-Since not before the last change. */
export function notModified(request: FhirRequest, version: StoredVersion): boolean {
  const noneMatch = request.headers['if-none-match'];
  if (noneMatch !== undefined) {
    return noneMatch
      .split(',')
      .some((tag) => tag.trim() === '*' || tag.trim().replace(/^W\//, '') === `"${version.versionId}"`);
  }
  const since = request.headers['if-modified-since'];
  if (since !== undefined) {
    const at = Date.parse(since);
    // HTTP dates have whole seconds; a change within the same second is not "after".
    return Number.isFinite(at) && Math.floor(Date.parse(version.lastUpdated) / 1000) * 1000 <= at;
  }
  return false;
}

export function notAllowed(request: FhirRequest, allowed: string): FhirError {
  return fhirError(
    'ERR_ROUTE_METHOD',
    { method: request.method, path: clip(`/${request.path}`), allowed },
    { headers: { allow: allowed } },
  );
}

export function clip(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}
