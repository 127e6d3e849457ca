import type { OperationOutcome, Parameters, ParametersParameter, Resource } from 'fhir/r4';
import { currentToken } from './session';

export const BASE = '/fhir/R4';

/** A failed call: the HTTP status and the OperationOutcome the server answered with (when it did). */
export class CallError extends Error {
  constructor(
    readonly status: number,
    readonly outcome?: OperationOutcome,
  ) {
    super(outcome?.issue.map((i) => i.details?.text ?? i.diagnostics ?? i.code).join('; ') || `HTTP ${status}`);
  }
}

/** GET (or POST) on the FHIR base with the session's token; the answer as a resource. */
export async function fhir<T extends Resource = Resource>(path: string, init: RequestInit = {}): Promise<T> {
  const headers = new Headers(init.headers);
  headers.set('accept', 'application/fhir+json');
  const token = currentToken();
  if (token) headers.set('authorization', `Bearer ${token}`);
  const res = await fetch(`${BASE}/${path}`, { ...init, headers });
  const text = await res.text();
  let body: Resource | undefined;
  try {
    body = text ? (JSON.parse(text) as Resource) : undefined;
  } catch {
    body = undefined;
  }
  if (!res.ok)
    throw new CallError(res.status, body?.resourceType === 'OperationOutcome' ? (body as OperationOutcome) : undefined);
  return body as T;
}

/** GET a JSON (non-FHIR) endpoint of the server, such as `/auth/me` or `/admin/jobs`, with the session's token. */
export async function json<T>(path: string): Promise<T> {
  const token = currentToken();
  const res = await fetch(path, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  const body = (await res.json().catch(() => undefined)) as T | OperationOutcome | undefined;
  if (!res.ok)
    throw new CallError(
      res.status,
      (body as OperationOutcome | undefined)?.resourceType === 'OperationOutcome'
        ? (body as OperationOutcome)
        : undefined,
    );
  return body as T;
}

/** A query string from the non-empty fields. */
export function query(fields: Record<string, string | number | undefined>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(fields))
    if (value !== undefined && value !== '') params.set(name, String(value));
  return params.toString();
}

/** The value of a Parameters entry, whatever its type ([x]). */
export function valueOf(p: ParametersParameter): unknown {
  const key = Object.keys(p).find((k) => k.startsWith('value') || k === 'resource');
  return key === undefined ? undefined : (p as unknown as Record<string, unknown>)[key];
}

export function param(body: Parameters, name: string): unknown {
  const found = body.parameter?.find((p) => p.name === name);
  return found ? valueOf(found) : undefined;
}
