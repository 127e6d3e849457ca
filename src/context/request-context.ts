import { operatorIn, type Principal } from '../auth/principal';
import { DEFAULT_PROJECT } from './projects';
/**
 * What every service call below the HTTP layer is given about the request it serves: who asks
 * (room for the tenant and principal of the projects issue), where to log, how long the work may
 * take, and how the server's base is addressed (for fullUrl, Location and links).
 */

export interface ContextLog {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface Prefer {
  /** `return=minimal | representation | OperationOutcome` */
  return?: 'minimal' | 'representation' | 'OperationOutcome';
  /** `handling=strict | lenient`: strict refuses unknown search parameters. */
  handling?: 'strict' | 'lenient';
  /** `respond-async` */
  respondAsync?: boolean;
}

export interface RequestContext {
  requestId: string;
  /** The project (tenant) the request acts in: everything it reads and writes is within it. */
  project: string;
  /** Who the request acts for: what it may read and write (src/auth/guard.ts). */
  principal: Principal;
  log: ContextLog;
  /** Epoch milliseconds after which long work stops with too-costly. */
  deadline: number;
  /** The absolute base of the FHIR API as clients address it, e.g. `http://host:8080/fhir/R4`. */
  baseUrl: string;
  prefer: Prefer;
  /** `X-Validate-On-Write` as the client sent it (the server's setting decides when absent). */
  validateOnWrite?: string;
}

/** Reads a Prefer header (`return=minimal, handling=strict`); unknown preferences are ignored. */
export function parsePrefer(header: string | undefined): Prefer {
  const prefer: Prefer = {};
  if (!header) return prefer;
  for (const part of header.split(/[,;]/)) {
    const [rawName, rawValue] = part.split('=');
    const name = rawName.trim().toLowerCase();
    const value = rawValue?.trim().replace(/^"|"$/g, '');
    if (name === 'return' && (value === 'minimal' || value === 'representation' || value === 'OperationOutcome'))
      prefer.return = value;
    else if (name === 'handling' && (value === 'strict' || value === 'lenient')) prefer.handling = value;
    else if (name === 'respond-async') prefer.respondAsync = true;
  }
  return prefer;
}

const SILENT: ContextLog = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

/** A context for work that no client request started (start-up, tools, tests). */
export function internalContext(
  options: { baseUrl?: string; budgetMs?: number; log?: ContextLog; project?: string } = {},
): RequestContext {
  return {
    requestId: 'internal',
    project: options.project ?? DEFAULT_PROJECT,
    principal: operatorIn(options.project ?? DEFAULT_PROJECT),
    log: options.log ?? SILENT,
    deadline: Date.now() + (options.budgetMs ?? 3_600_000),
    baseUrl: options.baseUrl ?? 'http://localhost/fhir/R4',
    prefer: {},
  };
}
