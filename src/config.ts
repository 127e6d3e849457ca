import { FRESHNESS_CHECKS, type FreshnessCheck } from './storage/change-watch';
import { existsSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { parseEnv } from 'node:util';

/** Everything the server can be told from outside, already checked. */
export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl?: string;
  authTokens: string[];
  allowAnonymous: boolean;
  logLevel: LogLevel;
  bodyLimit: number;
  /** Largest expansion the server will build before answering too-costly. */
  expansionLimit: number;
  /** Time budget of one operation, in milliseconds. */
  operationTimeoutMs: number;
  /**
   * PostgreSQL: longest a statement may run (its session's statement_timeout) before the request
   * answers 503; the client gives up on a database that answers nothing 2 s after that.
   */
  databaseStatementTimeoutMs: number;
  /** SQLite: the most the database file may grow to, in MB (a quota); writes beyond answer 507 as on a full disk. */
  sqliteMaxSizeMb?: number;
  /** On SIGTERM/SIGINT: how long in-flight requests may go on before the process exits anyway. */
  drainTimeoutMs: number;
  /** FHIRPath users wrote (criteria, stored invariants, `fhirpath:` arguments): worker threads, time per batch, heap per worker. */
  fhirpathWorkers: number;
  fhirpathTimeoutMs: number;
  fhirpathMemoryMb: number;
  /** Time a client has to send the request line and headers; 408 after. */
  headersTimeoutMs: number;
  /** Time a client has to send the whole request, body included; 408 after. */
  requestTimeoutMs: number;
  /** Largest total size of the kept operation answers (keys included). */
  answerCacheBytes: number;
  /**
   * The public URL of the FHIR base (https://tx.example.org/fhir/R4), without a trailing slash.
   * When set, every absolute URL the server writes starts with it; when not, with the request's
   * own scheme and Host header.
   */
  baseUrl?: string;
  /** Validate creates and updates fully (profiles, invariants, terminology) and refuse those with errors (422). */
  validateOnWrite: boolean;
  /** Let outbound requests (a client's jwksUri) reach loopback and private addresses (tests, closed networks). */
  outboundAllowPrivate: boolean;
  /**
   * Private `address:port` pairs outbound requests may reach while OUTBOUND_ALLOW_PRIVATE is off
   * (OUTBOUND_ALLOW_TARGETS): one internal receiver, not the whole network. Addresses, not names.
   */
  outboundAllowTargets: string[];
  /** Origins (scheme://host[:port]) whose browser pages may call the server; `*` for any. Empty: none. */
  corsOrigins: string[];
  /** Job-queue workers this process runs (bulk export and other background work); 0 for a web-only process. */
  jobWorkers: number;
  /** Server processes (src/cluster.ts): 1 serves in this process; more fork that many workers sharing the port. */
  workers: number;
  /** How a process learns of other processes' writes to stored content (src/storage/change-watch.ts). */
  freshnessCheck: FreshnessCheck;
  /** How long a subscription websocket may stay open without binding (WS_BIND_TIMEOUT_MS); closed after. */
  wsBindTimeoutMs: number;
  /** Open subscription websockets one client address may hold (WS_MAX_PER_ADDRESS); the next upgrade is 429. */
  wsMaxPerAddress: number;
  /** Open subscription websockets this process holds in all (WS_MAX_CONNECTIONS); keep it under the descriptor limit. */
  wsMaxConnections: number;
  /** The first retry of a failed subscription delivery, in ms (doubled each attempt, with jitter). */
  subscriptionRetryMs: number;
  /** How long a claimed job is a worker's before another may take it (renewed while it runs): the wait after a crash. */
  jobLeaseMs: number;
  /** Heap limit of a bot's isolate, in MB (BOT_MEMORY_MB). */
  botMemoryMb: number;
  /** Largest answer a bot may return (BOT_OUTPUT_LIMIT). */
  botOutputBytes: number;
  /**
   * Secrets bots see as `event.secrets` (BOT_SECRETS, JSON): by project id, `*` for every project,
   * each a map of name to value. Kept in configuration, never in a resource a reader could see.
   */
  botSecrets: Record<string, Record<string, string>>;
  /** Origins a bot's fetch may reach besides this server (BOT_FETCH_ALLOW); `*` for any public address. */
  botFetchAllow: string[];
  /**
   * Resident memory of the bot sandbox process past which it is killed and replaced
   * (BOT_SANDBOX_MEMORY_MB); unset: BOT_MEMORY_MB for each of its 16 slots plus 256 MB.
   */
  botSandboxMemoryMb: number | undefined;
  /** Sandbox slots (of 16) one project's bots may hold at once (BOT_SLOTS_PER_PROJECT). */
  botSlotsPerProject: number;
  /** Executions of one project that may wait for a slot; more are refused 429 (BOT_QUEUE_PER_PROJECT). */
  botQueuePerProject: number;
  /** Bulk exports one project may have queued or running at once; the next kick-off is 429 (BULK_EXPORTS_PER_PROJECT). */
  bulkExportsPerProject: number;
  /** Hours a finished export's files are kept before they are deleted (BULK_EXPORT_EXPIRY_HOURS). */
  bulkExportExpiryHours: number;
}

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** A configuration value that cannot be used; the message names the variable. */
export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

/**
 * Reads `.env` (when present) under the process environment: a variable set in the
 * environment wins over the file, as with every dotenv convention.
 */
export function readEnv(envFile = '.env', env: Env = process.env): Env {
  if (!existsSync(envFile)) return { ...env };
  let fromFile: Env;
  try {
    fromFile = parseEnv(readFileSync(envFile, 'utf8'));
  } catch (err) {
    throw new ConfigError(`${envFile}: cannot be read (${(err as Error).message})`);
  }
  return { ...fromFile, ...env };
}

export function loadConfig(env: Env): Config {
  const host = text(env, 'HOST', '127.0.0.1');
  const authTokens = tokens(env);
  const allowAnonymous = bool(env, 'ALLOW_ANONYMOUS', false);
  if (authTokens.length === 0 && !isLoopback(host) && !allowAnonymous) {
    throw new ConfigError(
      `AUTH_TOKENS: required when HOST (${host}) is not a loopback address; set ALLOW_ANONYMOUS=true to serve without authentication`,
    );
  }
  const databaseUrl = env.DATABASE_URL?.trim() || undefined;
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\/\S+$/.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL: must be a postgres:// or postgresql:// URL');
  }
  const headersTimeoutMs = integer(env, 'HEADERS_TIMEOUT_MS', 10_000, 100, 3_600_000);
  const operationTimeoutMs = integer(env, 'OPERATION_TIMEOUT_MS', 30_000, 10, 3_600_000);
  const requestTimeoutMs = integer(env, 'REQUEST_TIMEOUT_MS', 60_000, 100, 3_600_000);
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(
      `HEADERS_TIMEOUT_MS: ${headersTimeoutMs} is longer than REQUEST_TIMEOUT_MS (${requestTimeoutMs}), which includes the headers`,
    );
  }
  return {
    port: integer(env, 'PORT', 8080, 0, 65535),
    host,
    dataDir: text(env, 'DATA_DIR', './data'),
    databaseUrl,
    authTokens,
    allowAnonymous,
    logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS, 'info'),
    bodyLimit: size(env, 'BODY_LIMIT', 10 * 1024 * 1024),
    expansionLimit: integer(env, 'EXPANSION_LIMIT', 10_000, 1, 10_000_000),
    operationTimeoutMs,
    databaseStatementTimeoutMs: integer(env, 'DATABASE_STATEMENT_TIMEOUT_MS', operationTimeoutMs, 10, 3_600_000),
    sqliteMaxSizeMb: env.SQLITE_MAX_SIZE_MB?.trim() ? integer(env, 'SQLITE_MAX_SIZE_MB', 0, 1, 100_000_000) : undefined,
    drainTimeoutMs: integer(env, 'DRAIN_TIMEOUT_MS', 10_000, 0, 3_600_000),
    fhirpathWorkers: integer(env, 'FHIRPATH_WORKERS', 2, 1, 64),
    fhirpathTimeoutMs: integer(env, 'FHIRPATH_TIMEOUT_MS', 1000, 10, 600_000),
    fhirpathMemoryMb: integer(env, 'FHIRPATH_MEMORY_MB', 128, 16, 4096),
    headersTimeoutMs,
    requestTimeoutMs,
    answerCacheBytes: size(env, 'ANSWER_CACHE_BYTES', 64 * 1024 * 1024),
    baseUrl: baseUrl(env),
    validateOnWrite: bool(env, 'VALIDATE_ON_WRITE', false),
    outboundAllowPrivate: bool(env, 'OUTBOUND_ALLOW_PRIVATE', false),
    outboundAllowTargets: addressPorts(env, 'OUTBOUND_ALLOW_TARGETS'),
    corsOrigins: origins(env, 'CORS_ORIGINS'),
    jobWorkers: integer(env, 'JOB_WORKERS', 1, 0, 64),
    freshnessCheck: oneOf(env, 'FRESHNESS_CHECK', FRESHNESS_CHECKS, 'notify'),
    workers: env.WORKERS?.trim().toLowerCase() === 'auto' ? availableParallelism() : integer(env, 'WORKERS', 1, 1, 256),
    wsBindTimeoutMs: integer(env, 'WS_BIND_TIMEOUT_MS', 10_000, 50, 3_600_000),
    wsMaxPerAddress: integer(env, 'WS_MAX_PER_ADDRESS', 16, 1, 100_000),
    wsMaxConnections: integer(env, 'WS_MAX_CONNECTIONS', 512, 1, 1_000_000),
    subscriptionRetryMs: integer(env, 'SUBSCRIPTION_RETRY_MS', 1000, 1, 3_600_000),
    jobLeaseMs: integer(env, 'JOB_LEASE_MS', 30_000, 1_000, 3_600_000),
    botMemoryMb: integer(env, 'BOT_MEMORY_MB', 128, 16, 4096),
    botOutputBytes: size(env, 'BOT_OUTPUT_LIMIT', 1024 * 1024),
    botSecrets: botSecrets(env),
    botFetchAllow: origins(env, 'BOT_FETCH_ALLOW'),
    botSlotsPerProject: integer(env, 'BOT_SLOTS_PER_PROJECT', 8, 1, 16),
    botQueuePerProject: integer(env, 'BOT_QUEUE_PER_PROJECT', 64, 0, 100_000),
    botSandboxMemoryMb: env.BOT_SANDBOX_MEMORY_MB?.trim()
      ? integer(env, 'BOT_SANDBOX_MEMORY_MB', 0, 128, 1_048_576)
      : undefined,
    bulkExportsPerProject: integer(env, 'BULK_EXPORTS_PER_PROJECT', 2, 1, 1000),
    bulkExportExpiryHours: integer(env, 'BULK_EXPORT_EXPIRY_HOURS', 24, 1, 24 * 365),
  };
}

/** An absolute http(s) URL without query, fragment or credentials; trailing slashes dropped. */
function baseUrl(env: Env): string | undefined {
  const raw = env.BASE_URL?.trim();
  if (!raw) return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`BASE_URL: '${raw}' is not an absolute URL such as https://tx.example.org/fhir/R4`);
  }
  if (!/^https?:$/.test(url.protocol) || url.search || url.hash || url.username || url.password || /[?#]/.test(raw)) {
    throw new ConfigError(`BASE_URL: '${raw}' must be an http(s) URL without query, fragment or credentials`);
  }
  return url.toString().replace(/\/+$/, '');
}

/** Comma-separated origins as a browser sends them in `Origin`: scheme, host and port, nothing more. */
function origins(env: Env, name: string): string[] {
  const raw = env[name]?.trim();
  if (!raw) return [];
  const list = raw
    .split(',')
    .map((o) => o.trim())
    .filter((o) => o !== '');
  for (const origin of list) {
    if (origin === '*') continue;
    let url: URL | undefined;
    try {
      url = new URL(origin);
    } catch {
      url = undefined;
    }
    if (!url || !/^https?:$/.test(url.protocol) || url.origin !== origin.replace(/\/$/, '').toLowerCase()) {
      throw new ConfigError(
        `${name}: '${origin}' is not an origin such as https://app.example.org or http://localhost:3000 (no path)`,
      );
    }
  }
  return list.map((o) => (o === '*' ? o : new URL(o).origin));
}

/**
 * Comma-separated `address:port` pairs (`10.0.0.5:8443`, `[fd00::5]:9000`), written as the URL
 * parser writes them (the outbound connector compares them as text).
 */
function addressPorts(env: Env, name: string): string[] {
  const raw = env[name]?.trim();
  if (!raw) return [];
  return raw
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
    .map((entry) => {
      const match = /^(\[[0-9a-fA-F:.]+\]|\d+\.\d+\.\d+\.\d+):(\d{1,5})$/.exec(entry);
      const port = match ? Number(match[2]) : 0;
      if (!match || port < 1 || port > 65535)
        throw new ConfigError(`${name}: '${entry}' is not an address and port such as 10.0.0.5:8443 or [fd00::5]:9000`);
      let host: string;
      try {
        host = new URL(`http://${match[1]}/`).hostname;
      } catch {
        throw new ConfigError(`${name}: '${entry}' is not an address and port such as 10.0.0.5:8443 or [fd00::5]:9000`);
      }
      return `${host}:${port}`;
    });
}

/** `{"*": {"NAME": "value"}, "<project id>": {...}}`: names to string values, by project. */
function botSecrets(env: Env): Record<string, Record<string, string>> {
  const raw = env.BOT_SECRETS?.trim();
  if (!raw) return {};
  const fail = () =>
    new ConfigError('BOT_SECRETS: must be JSON such as {"*": {"API_KEY": "..."}, "<project id>": {"NAME": "value"}}');
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw fail();
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw fail();
  for (const values of Object.values(parsed)) {
    if (
      !values ||
      typeof values !== 'object' ||
      Array.isArray(values) ||
      Object.values(values).some((v) => typeof v !== 'string')
    )
      throw fail();
  }
  return parsed as Record<string, Record<string, string>>;
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

function text(env: Env, name: string, fallback: string): string {
  const value = env[name]?.trim();
  if (value === undefined || value === '') return fallback;
  return value;
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new ConfigError(`${name}: '${raw}' is not a whole number from ${min} to ${max}`);
  }
  return Number(raw);
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true' || raw === '1' || raw === 'yes') return true;
  if (raw === 'false' || raw === '0' || raw === 'no') return false;
  throw new ConfigError(`${name}: '${env[name]}' is not true or false`);
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === '') return fallback;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(`${name}: '${raw}' is not one of ${allowed.join(', ')}`);
  }
  return raw as T;
}

/** A byte count, plain or with a kb/mb suffix (BODY_LIMIT=10mb). */
function size(env: Env, name: string, fallback: number): number {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  const match = /^(\d+)\s*(b|kb|k|mb|m)?$/.exec(raw);
  if (!match) throw new ConfigError(`${name}: '${env[name]}' is not a size such as 1048576, 512kb or 10mb`);
  const unit = match[2] ?? 'b';
  const factor = unit.startsWith('m') ? 1024 * 1024 : unit.startsWith('k') ? 1024 : 1;
  const bytes = Number(match[1]) * factor;
  if (bytes < 1024 || bytes > 1024 * 1024 * 1024) throw new ConfigError(`${name}: must be between 1kb and 1024mb`);
  return bytes;
}

function tokens(env: Env): string[] {
  const raw = env.AUTH_TOKENS?.trim();
  if (!raw) return [];
  const list = raw
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '');
  for (const token of list) {
    if (token.length < 16 || !/^[\x21-\x7e]+$/.test(token)) {
      throw new ConfigError('AUTH_TOKENS: every token must be at least 16 printable characters without spaces');
    }
  }
  return list;
}
