import type { BundleEntry, BundleEntryResponse, OperationOutcome } from 'fhir/r4';
import type { RequestContext } from '../context/request-context';
import { fhirError, isFhirError, type FhirError } from '../fhir/errors';
import { asFhirError } from '../fhir/outcome';
import { storageFailure } from '../storage/store';
import type { FhirResponse } from './fhir-request';

/**
 * The entries of a batch or transaction's answer (R4 http.html#transaction): an interaction's
 * response as an entry (status, location relative to the base, etag, the resource or the
 * OperationOutcome), and the errors that name the entry they come from.
 */

const REASONS: Record<number, string> = { 200: 'OK', 201: 'Created', 204: 'No Content', 304: 'Not Modified' };

/** `write`: the entry wrote (or matched) a version, whose URL an update names in Content-Location. */
export function responseEntry(response: FhirResponse, ctx: RequestContext, write: boolean): BundleEntry {
  const out: BundleEntryResponse = {
    status: `${response.status}${REASONS[response.status] ? ` ${REASONS[response.status]}` : ''}`,
  };
  const location = response.headers.location ?? (write ? response.headers['content-location'] : undefined);
  if (location) out.location = location.startsWith(ctx.baseUrl) ? location.slice(ctx.baseUrl.length + 1) : location;
  if (response.headers.etag) out.etag = response.headers.etag;
  if (response.headers['last-modified']) out.lastModified = new Date(response.headers['last-modified']).toISOString();
  const entry: BundleEntry = { response: out };
  const body = response.body;
  if (body?.resourceType === 'OperationOutcome' && response.status !== 200) out.outcome = body;
  else if (body) {
    entry.resource = body;
    if (body.id && response.status < 300 && body.resourceType !== 'Bundle' && body.resourceType !== 'Parameters')
      entry.fullUrl = `${ctx.baseUrl}/${body.resourceType}/${body.id}`;
  }
  return entry;
}

export function failureResponse(err: unknown): FhirResponse {
  // A full disk or a database gone is the entry's answer too (507, 503), not an unexpected 500.
  const fhir = storageFailure(err) ?? asFhirError(err);
  return { status: fhir.status, headers: {}, body: fhir.outcome };
}

export function failureEntry(err: unknown, _ctx: RequestContext): BundleEntry {
  return failureEntryOf(failureResponse(err));
}

export function failureEntryOf(response: FhirResponse): BundleEntry {
  return { response: { status: String(response.status), outcome: response.body as OperationOutcome } };
}

export function entryError(index: number, reason: string, status?: number): FhirError {
  return fhirError('ERR_BUNDLE_ENTRY', { index, reason }, { expression: [`Bundle.entry[${index}]`], status });
}

export function checkAt(index: number, check: () => void): void {
  try {
    check();
  } catch (err) {
    if (!isFhirError(err)) throw err;
    throw entryError(index, err.message, err.status);
  }
}

/** Runs an entry's work; a failure becomes one that names the entry (with the failure's own status). */
export async function atEntry<T>(index: number, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (!isFhirError(err)) throw err;
    if (err.code === 'ERR_BUNDLE_ENTRY') throw err;
    throw entryError(index, err.message, err.status);
  }
}
