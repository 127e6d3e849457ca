import type { FhirError } from '../fhir/errors';
import { FHIR_JSON } from '../fhir/outcome';

/**
 * The messages between the server and its bot sandbox process (child_process IPC). The sandbox
 * holds the isolates; everything a bot does outside its isolate (its FHIR client) is a message
 * back to the server, which answers it as the bot's principal.
 */

export interface RunLimits {
  /** Heap of the bot's isolate, in MB. */
  memoryMb: number;
  /** Wall-clock (and CPU) time of one execution, in ms. */
  timeoutMs: number;
  /** Largest answer (JSON or text), in bytes. */
  outputBytes: number;
  /** Largest captured console log, in bytes (the rest is cut). */
  logBytes: number;
  /** Largest body of a call to the server or a fetch, in bytes (BODY_LIMIT, as over HTTP). */
  bodyBytes: number;
}

/**
 * Largest client call without its body (method, path, query, headers), in characters. The body
 * travels beside it, as text, so that it meets the body's own limits and is never escaped into
 * this envelope.
 */
export const ENVELOPE_CHARS = 64 * 1024;

/** Server -> sandbox. */
export type ToSandbox =
  | { kind: 'run'; id: number; code: string; event: string; limits: RunLimits }
  | { kind: 'compile'; id: number; code: string }
  | { kind: 'client-answer'; id: number; call: number; answer: string };

/** What a bot returned: nothing, text, or a JSON value (as JSON text). */
export type BotResult = { kind: 'none' } | { kind: 'text'; value: string } | { kind: 'json'; value: string };

/** Sandbox -> server. */
export type FromSandbox =
  | { kind: 'ready' }
  | { kind: 'done'; id: number; ok: true; result: BotResult; log: string }
  | { kind: 'done'; id: number; ok: false; error: string; log: string }
  | { kind: 'client-call'; id: number; call: number; request: string; body?: string };

/** A FHIR call of a bot's client, as the sandbox sends it (JSON in `request`). */
export interface ClientRequest {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';
  /** Below the FHIR base: `Patient/1`, `Observation`. */
  path: string;
  /** A query string, or name/value pairs. */
  query?: string | [string, string][];
  /** The body as text: JSON for the client's calls, as given for a fetch. */
  body?: string;
  contentType?: string;
  /** If-None-Exist of a conditional create. */
  ifNoneExist?: string;
  /** A fetch (absolute URL) rather than a client call: answered with `text`. */
  url?: string;
  headers?: Record<string, string>;
}

/** The answer to a client call (JSON in `answer`); status >= 400 makes the bot's call throw. */
export interface ClientAnswer {
  /** 0: a fetch that was refused or failed (the bot's fetch throws). */
  status: number;
  body?: unknown;
  message?: string;
  /** A fetch's answer. */
  text?: string;
  headers?: Record<string, string>;
}

/**
 * This server's own routes outside the REST core, called without credentials (so only what
 * anyone may read answers; anything else is 401): the HTTP layer provides it (src/http/anonymous-calls.ts).
 */
export type AnonymousCalls = (request: {
  method: string;
  pathAndQuery: string;
  headers?: Record<string, string>;
  body?: string;
}) => Promise<{ status: number; headers: Record<string, string>; text: string }>;

/** A call refused before it reached the server: the answer both the client and fetch read. */
export function refusedCall(err: FhirError): ClientAnswer {
  return {
    status: err.status,
    message: err.message,
    body: err.outcome,
    text: JSON.stringify(err.outcome),
    headers: { 'content-type': FHIR_JSON },
  };
}
