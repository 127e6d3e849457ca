import type { ChangeWatch } from './change-watch';
import type { Resource } from 'fhir/r4';
import type { EphemeralStore } from './ephemeral';
import type { JobStore, NewJob } from './jobs';
import type { BulkStore } from './bulk';
import type { Notices } from './notices';
import type { IndexRows } from './index-schema';
import { fhirError, type FhirError } from '../fhir/errors';

/**
 * The storage seam. Backends keep versions, their search index rows and a few counters, and run
 * the SQL the search layer builds; everything about versioning rules, ETags and If-Match
 * decisions lives above them in `repository.ts`, written once.
 */

// The project ids live with the request context, the ground every layer stands on; storage scopes by them.
export { DEFAULT_PROJECT, SYSTEM_PROJECT } from '../context/projects';

/**
 * Definitions, never data: of these types, what the system scope holds (imported packages) is
 * read and searched by every project, as it reads the bundled R4 content. A project's own
 * resource of the same id stands beside it; writes only ever go to the project's own.
 */
export const SHARED_TYPES: readonly string[] = [
  'CodeSystem',
  'ValueSet',
  'ConceptMap',
  'StructureDefinition',
  'SearchParameter',
];

/** One version of one resource, as stored. `resource` is null for a deletion. */
export interface StoredVersion {
  project: string;
  type: string;
  id: string;
  versionId: number;
  /** ISO instant. */
  lastUpdated: string;
  resource: Resource | null;
  /**
   * How a client asked for this version, for history's `request`: POST (a create, server-assigned
   * id), PUT (an update, or a create at the client's id) or PATCH. Absent for a deletion, and for
   * versions written before it was recorded (history then takes version 1 for a POST, others for PUT).
   */
  method?: WriteMethod;
}

export type WriteMethod = 'POST' | 'PUT' | 'PATCH';

function isWriteMethod(text: string | null | undefined): text is WriteMethod {
  return text === 'POST' || text === 'PUT' || text === 'PATCH';
}

/** The method a write records with its version (none for a deletion). */
export function methodOf(op: WriteOp): WriteMethod | null {
  return op.resource === null ? null : (op.method ?? null);
}

/** The version a successful write made (what stores answer and observers see). */
export function writtenVersion(op: WriteOp, versionId: number): StoredVersion {
  const method = methodOf(op);
  return {
    project: op.project,
    type: op.type,
    id: op.id,
    versionId,
    lastUpdated: op.lastUpdated,
    resource: op.resource,
    ...(method ? { method } : {}),
  };
}

/** The state of a resource before a write: its version number and whether that version is a deletion. */
export interface CurrentState {
  versionId: number;
  deleted: boolean;
}

/** A write of one resource: a new version, or a deletion. */
export interface WriteOp {
  project: string;
  type: string;
  id: string;
  /**
   * The new content, with `meta.lastUpdated` set; null deletes. The store sets `meta.versionId`
   * on it once it knows the version (the next after the current one), inside the transaction.
   */
  resource: Resource | null;
  lastUpdated: string;
  /** The version that must be current (If-Match); 0: the resource must be absent or deleted. */
  ifMatch?: number;
  /** Canonical keys, so the resource is findable by url. */
  url?: string;
  version?: string;
  /** The search index rows of the new content (none for a deletion). */
  index: IndexRows | null;
  /** How a client asked for it (see `StoredVersion.method`); absent for a deletion. */
  method?: WriteMethod;
}

export type WriteResult =
  | { status: 'ok'; version: StoredVersion; previous?: CurrentState }
  /** If-Match did not hold; `current` is what is there. */
  | { status: 'conflict'; current?: CurrentState }
  /** A deletion of what is absent or deleted already: nothing was written. */
  | { status: 'unchanged'; current?: CurrentState };

/** Reads, of committed state or (inside a transaction) of the transaction's own view. */
export interface StoreReader {
  /** The newest version (which may be a deletion), or undefined when there is none. */
  read(project: string, type: string, id: string): Promise<StoredVersion | undefined>;
  readVersion(project: string, type: string, id: string, versionId: number): Promise<StoredVersion | undefined>;
  /** All versions, newest first. */
  history(project: string, type: string, id: string): Promise<StoredVersion[]>;
  /**
   * Runs a read-only statement the search layer built (`?` placeholders, the SQL both backends
   * understand) and answers its rows.
   */
  query<R extends object>(sql: string, params: readonly unknown[]): Promise<R[]>;
}

/** What a transaction can do; everything it writes commits together or not at all. */
export interface StoreTx extends StoreReader {
  write(op: WriteOp): Promise<WriteResult>;
  /** Several writes, answered in order (as if written one after the other), in fewer round trips. */
  writeMany(ops: WriteOp[]): Promise<WriteResult[]>;
  /** Replaces the index rows of current resources (reindexing); their versions do not change. */
  replaceIndex(entries: { project: string; type: string; rid: number; rows: IndexRows }[]): Promise<void>;
  /**
   * Serialises this transaction with any other taking the same key until both end (conditional
   * creates racing on the same criteria). SQLite serialises every write transaction anyway.
   */
  lock(key: string): Promise<void>;
  /** Enqueues a job that commits with this transaction, or not at all (a transactional outbox); answers its id. */
  enqueue(job: NewJob): Promise<string>;
}

export interface ResourceStore extends StoreReader {
  readonly kind: 'sqlite' | 'postgres';
  /**
   * Resolves when the store can take writes; throws StorageFullError while its disk is full (after a
   * write failed for want of space, re-checked by a small write of its own until one succeeds).
   */
  writable(): Promise<void>;
  /** Runs pending schema migrations (all, or up to `upTo`: tests of a migration start before it); called once at start-up. */
  migrate(options?: { upTo?: number }): Promise<void>;
  /** One write in its own transaction. When the 'ok' promise settles the write is durable. */
  write(op: WriteOp): Promise<WriteResult>;
  /** Runs `work` in one database transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (tx: StoreTx) => Promise<T>): Promise<T>;
  /**
   * Per type, a number that grows with every write of that type in the project. Writes through
   * this store are counted at once; another process's as its notice arrives (see ChangeWatch).
   */
  changeMarks(project: string, types: string[]): Promise<Map<string, number>>;
  /** Whether the change marks may have moved since they were last read, without asking. */
  readonly changes: ChangeWatch;
  /** Current state of every resource of `type` in the project written after mark `since`. */
  changesSince(project: string, type: string, since: number): Promise<Change[]>;
  /**
   * Refreshes the statistics the query planner chooses indexes by (after bulk loads; the server
   * also does it as data grows). Without them a planner may scan a whole type for a search that
   * names a handful of rows.
   */
  optimize(): Promise<void>;
  /** Short-lived state shared by every process (authorization codes, replay marks, keys). */
  readonly ephemeral: EphemeralStore;
  /** The durable job queue's rows (src/jobs/ runs them). */
  readonly jobs: JobStore;
  /** Snapshots and NDJSON files of bulk export. */
  readonly bulk: BulkStore;
  /** Best-effort messages to every process over this database (websocket notifications). */
  readonly notices: Notices;
  /** A small key/value of the server's own (index versions and the like). */
  getSetting(key: string): Promise<string | undefined>;
  setSetting(key: string, value: string): Promise<void>;
  close(): Promise<void>;
}

/** The current state of one resource after a change; null resource for a deletion. */
export interface Change extends StoredVersion {
  seq: number;
  /** The stored JSON text (null for a deletion), for a cache that holds it unparsed until used. */
  json: string | null;
}

/** A version row as both backends' SQL selects it. */
export interface VersionRow {
  project: string;
  type: string;
  id: string;
  version: number;
  last_updated: string | Date;
  content: string | null;
  /** Read by history (other reads leave it out). */
  method?: string | null;
}

export function optionalVersion(row: VersionRow | undefined): StoredVersion | undefined {
  return row === undefined ? undefined : versionFromRow(row);
}

export function versionFromRow(row: VersionRow): StoredVersion {
  return {
    project: row.project,
    type: row.type,
    id: row.id,
    versionId: Number(row.version),
    lastUpdated: typeof row.last_updated === 'string' ? row.last_updated : row.last_updated.toISOString(),
    resource: row.content === null ? null : (JSON.parse(row.content) as Resource),
    ...(isWriteMethod(row.method) ? { method: row.method } : {}),
  };
}

/**
 * A change row whose resource is parsed only when read: a cache that already holds the version
 * (because this process wrote it) skips parsing what may be megabytes of JSON.
 */
export function changeFromRow(row: VersionRow, seq: number): Change {
  let parsed: Resource | null | undefined;
  return {
    project: row.project,
    type: row.type,
    id: row.id,
    versionId: Number(row.version),
    lastUpdated: typeof row.last_updated === 'string' ? row.last_updated : row.last_updated.toISOString(),
    seq,
    json: row.content,
    get resource(): Resource | null {
      if (parsed === undefined) parsed = row.content === null ? null : (JSON.parse(row.content) as Resource);
      return parsed;
    },
  };
}

/**
 * The stamped JSON of a version: `meta.versionId` set to the version the store assigned. The
 * resource object is the write's own copy (built by the repository), so it is updated in place.
 */
export function stampVersion(resource: Resource, versionId: number): string {
  resource.meta = { ...(resource.meta ?? {}), versionId: String(versionId) };
  return JSON.stringify(resource);
}

/** If-Match N holds when version N is current and not a deletion; 0 when there is no live resource. */
export function ifMatchHolds(expected: number, current: CurrentState | undefined): boolean {
  if (expected === 0) return !current || current.deleted;
  return current !== undefined && !current.deleted && current.versionId === expected;
}

/** Thrown by a backend when its database cannot be reached; answered as 503. */
export class StorageUnavailableError extends Error {}

/**
 * The database's disk is full (SQLITE_FULL: the disk, or the size the database is limited to;
 * PostgreSQL's disk_full): nothing of the write was kept, earlier writes are intact; answered 507.
 */
export class StorageFullError extends StorageUnavailableError {}

/**
 * The catalogue's answer to a storage failure (full, timed out, unreachable: each with Retry-After),
 * or undefined for any other error. One mapping for the HTTP layer and for a batch's entries.
 */
export function storageFailure(err: unknown): FhirError | undefined {
  if (err instanceof StorageFullError) return fhirError('ERR_STORAGE_FULL', {}, { headers: { 'retry-after': '60' } });
  if (err instanceof StorageTimeoutError)
    return fhirError('ERR_STORAGE_TIMEOUT', { ms: err.ms }, { headers: { 'retry-after': '5' } });
  if (err instanceof StorageUnavailableError)
    return fhirError('ERR_STORAGE_UNAVAILABLE', {}, { headers: { 'retry-after': '5' } });
  return undefined;
}

/**
 * A statement the database did not finish within the store's time (its own statement timeout), or
 * a database that answered nothing at all for longer (the client's read timeout); answered as 503.
 */
export class StorageTimeoutError extends StorageUnavailableError {
  constructor(
    message: string,
    readonly ms: number,
  ) {
    super(message);
  }
}
