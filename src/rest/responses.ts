import type { Bundle, BundleEntry, Resource } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import { informational } from '../fhir/outcome';
import type { StoredVersion } from '../storage/store';
import type { FhirResponse } from './fhir-request';

/** How answers about stored versions look: status, the version headers, and Prefer: return. */

export function etag(version: Pick<StoredVersion, 'versionId'>): string {
  return `W/"${version.versionId}"`;
}

export function versionHeaders(version: StoredVersion): Record<string, string> {
  return { etag: etag(version), 'last-modified': new Date(version.lastUpdated).toUTCString() };
}

export function fullUrl(ctx: RequestContext, type: string, id: string): string {
  return `${ctx.baseUrl}/${type}/${id}`;
}

export function versionUrl(ctx: RequestContext, version: StoredVersion): string {
  return `${fullUrl(ctx, version.type, version.id)}/_history/${version.versionId}`;
}

/**
 * A version as the answer to a read or a write. Writes honour `Prefer: return=` (minimal: no
 * body; OperationOutcome: a short outcome instead of the resource); reads always return it.
 */
export function versionResponse(
  ctx: RequestContext,
  version: StoredVersion,
  status: number,
  options: { write?: boolean } = {},
): FhirResponse {
  const headers = versionHeaders(version);
  if (status === 201) headers.location = versionUrl(ctx, version);
  // An update names the version it made too, as Content-Location (HTTP's name for the URL of the
  // representation returned); a Bundle entry carries it as response.location (R4's transaction-response example).
  else if (options.write) headers['content-location'] = versionUrl(ctx, version);
  if (options.write && ctx.prefer.return === 'minimal') return { status, headers };
  if (options.write && ctx.prefer.return === 'OperationOutcome') {
    const text =
      status === 201
        ? `Created ${version.type}/${version.id} at version ${version.versionId}`
        : `Updated ${version.type}/${version.id} to version ${version.versionId}`;
    return { status, headers, body: informational(text) };
  }
  return { status, headers, body: version.resource as Resource };
}

/**
 * A history Bundle entry: the version with the request that made it and its response (bdl-3,
 * bdl-4). `created`: the write created the resource (its first version, or a re-create after a
 * deletion), which answered 201.
 */
export function historyEntry(ctx: RequestContext, version: StoredVersion, created: boolean): BundleEntry {
  const url = `${version.type}/${version.id}`;
  const response = { status: '', lastModified: version.lastUpdated, etag: etag(version) };
  if (version.resource === null) {
    return {
      fullUrl: fullUrl(ctx, version.type, version.id),
      request: { method: 'DELETE', url },
      response: { ...response, status: '204' },
    };
  }
  // Versions written before the method was recorded: the first is taken for a POST.
  const method = version.method ?? (version.versionId === 1 ? 'POST' : 'PUT');
  return {
    fullUrl: fullUrl(ctx, version.type, version.id),
    resource: version.resource,
    request: method === 'POST' ? { method: 'POST', url: version.type } : { method, url },
    response: {
      ...response,
      status: created ? '201' : '200',
      location: versionUrl(ctx, version),
    } as BundleEntry['response'],
  };
}

export function bundleResponse(bundle: Bundle): FhirResponse {
  return { status: 200, headers: {}, body: bundle };
}
