import type { Resource } from 'fhir/r4';

/**
 * The storage seam. Backends keep versions and answer a few lookups; everything about
 * versioning rules, ETags and If-Match lives above them in `repository.ts`, written once.
 */

/** One version of one resource, as stored. `resource` is null for a deletion. */
export interface StoredVersion {
  type: string;
  id: string;
  versionId: number;
  /** ISO instant. */
  lastUpdated: string;
  resource: Resource | null;
}

/** A version to append, with the canonical keys that make it findable by url. */
export interface NewVersion extends StoredVersion {
  url?: string;
  version?: string;
}

export interface CanonicalQuery {
  url?: string;
  version?: string;
  id?: string;
}

export interface Page {
  count: number;
  offset: number;
}

/** The current state of one resource after a change; null resource for a deletion. */
export interface Change extends StoredVersion {
  seq: number;
}

export interface ResourceStore {
  readonly kind: 'sqlite' | 'postgres';
  /** Runs pending schema migrations; called once at start-up. */
  migrate(): Promise<void>;
  /** The newest version (which may be a deletion), or undefined when there is none. */
  read(type: string, id: string): Promise<StoredVersion | undefined>;
  readVersion(type: string, id: string, versionId: number): Promise<StoredVersion | undefined>;
  /** All versions, newest first. */
  history(type: string, id: string): Promise<StoredVersion[]>;
  /**
   * Appends `entry` as the next version. Answers 'conflict' when that version already exists,
   * which is how two writers racing for one version find out: exactly one of them wins.
   * When the 'ok' promise settles the write is durable.
   */
  append(entry: NewVersion): Promise<'ok' | 'conflict'>;
  /** Current, not deleted resources of a type, filtered by the canonical keys given. */
  search(type: string, query: CanonicalQuery, page: Page): Promise<{ total: number; resources: StoredVersion[] }>;
  /** Per type, a number that grows with every write of that type. */
  changeMarks(types: string[]): Promise<Map<string, number>>;
  /** Current state of every resource of `type` written after mark `since`. */
  changesSince(type: string, since: number): Promise<Change[]>;
  close(): Promise<void>;
}

/** A version row as both backends' SQL selects it. */
export interface VersionRow {
  type: string;
  id: string;
  version: number;
  last_updated: string | Date;
  content: string | null;
}

export function optionalVersion(row: VersionRow | undefined): StoredVersion | undefined {
  return row === undefined ? undefined : versionFromRow(row);
}

export function versionFromRow(row: VersionRow): StoredVersion {
  return {
    type: row.type,
    id: row.id,
    versionId: row.version,
    lastUpdated: typeof row.last_updated === 'string' ? row.last_updated : row.last_updated.toISOString(),
    resource: row.content === null ? null : (JSON.parse(row.content) as Resource),
  };
}

/**
 * A change row whose resource is parsed only when read: a cache that already holds the version
 * (because this process wrote it) skips parsing what may be megabytes of JSON.
 */
export function changeFromRow(row: VersionRow, seq: number): Change {
  let parsed: Resource | null | undefined;
  return {
    type: row.type,
    id: row.id,
    versionId: row.version,
    lastUpdated: typeof row.last_updated === 'string' ? row.last_updated : row.last_updated.toISOString(),
    seq,
    get resource(): Resource | null {
      if (parsed === undefined) parsed = row.content === null ? null : (JSON.parse(row.content) as Resource);
      return parsed;
    },
  };
}

/** Thrown by a backend when its database cannot be reached; answered as 503. */
export class StorageUnavailableError extends Error {}
