import { randomUUID } from 'node:crypto';
import type { Resource } from 'fhir/r4';
import { fhirError } from '../fhir/errors';
import type { CanonicalQuery, Page, ResourceStore, StoredVersion } from './store';

/**
 * Versioning, written once above every backend: version numbers, meta, If-Match, and the retry
 * when two writers race for the same version. Backends only append versions.
 */

export interface WriteOptions {
  /** The version the client says it is changing (If-Match); a different current version is 412. */
  ifMatch?: number;
}

export interface Written {
  version: StoredVersion;
  created: boolean;
}

/** How often an unconditional write retries after losing a race before answering 409. */
const MAX_ATTEMPTS = 25;

/** A short random pause, growing with the attempt, so racing writers stop colliding in step. */
function backoff(attempt: number): Promise<void> {
  if (attempt === 0) return Promise.resolve();
  return new Promise((resolve) => setTimeout(resolve, Math.random() * 2 ** Math.min(attempt, 6)));
}

export const ID_PATTERN = /^[A-Za-z0-9\-.]{1,64}$/;

export class Repository {
  private readonly written: ((version: StoredVersion) => void)[] = [];

  constructor(
    readonly store: ResourceStore,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** Called with each version this repository has durably written (and a deletion's tombstone). */
  onWrite(listener: (version: StoredVersion) => void): void {
    this.written.push(listener);
  }

  private committed(version: StoredVersion): void {
    for (const listener of this.written) listener(version);
  }

  async create(type: string, resource: Resource): Promise<Written> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const id = randomUUID();
      const version = this.stamp(type, id, 1, resource);
      if ((await this.store.append(withCanonical(version))) === 'ok') {
        this.committed(version);
        return { version, created: true };
      }
    }
    throw fhirError('ERR_WRITE_CONFLICT', { type, id: '(new)' });
  }

  async update(type: string, id: string, resource: Resource, options: WriteOptions = {}): Promise<Written> {
    return this.write(type, id, resource, options);
  }

  /** Deleting writes a tombstone version; deleting what is absent or deleted already is a no-op. */
  async delete(type: string, id: string, options: WriteOptions = {}): Promise<void> {
    const current = await this.store.read(type, id);
    if (!current || current.resource === null) {
      if (options.ifMatch !== undefined) throw this.conflict(type, id, options.ifMatch, current);
      return;
    }
    await this.write(type, id, null, options);
  }

  async read(type: string, id: string): Promise<StoredVersion> {
    const current = await this.store.read(type, id);
    if (!current) throw fhirError('ERR_RESOURCE_NOT_FOUND', { type, id });
    if (current.resource === null) throw fhirError('ERR_RESOURCE_DELETED', { type, id });
    return current;
  }

  async vread(type: string, id: string, versionId: number): Promise<StoredVersion> {
    const version = await this.store.readVersion(type, id, versionId);
    if (!version) {
      if (!(await this.store.read(type, id))) throw fhirError('ERR_RESOURCE_NOT_FOUND', { type, id });
      throw fhirError('ERR_VERSION_NOT_FOUND', { type, id, vid: String(versionId) });
    }
    if (version.resource === null) throw fhirError('ERR_RESOURCE_DELETED', { type, id });
    return version;
  }

  async history(type: string, id: string): Promise<StoredVersion[]> {
    const versions = await this.store.history(type, id);
    if (versions.length === 0) throw fhirError('ERR_RESOURCE_NOT_FOUND', { type, id });
    return versions;
  }

  search(type: string, query: CanonicalQuery, page: Page) {
    return this.store.search(type, query, page);
  }

  private async write(type: string, id: string, resource: Resource | null, options: WriteOptions): Promise<Written> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      await backoff(attempt);
      const current = await this.store.read(type, id);
      const currentVersion = current?.versionId ?? 0;
      if (options.ifMatch !== undefined && options.ifMatch !== currentVersion) {
        throw this.conflict(type, id, options.ifMatch, current);
      }
      const version = this.stamp(type, id, currentVersion + 1, resource);
      if ((await this.store.append(withCanonical(version))) === 'ok') {
        this.committed(version);
        return { version, created: !current || current.resource === null };
      }
      // Someone else took that version. With If-Match the client's premise is now false.
      if (options.ifMatch !== undefined) {
        const now = await this.store.read(type, id);
        throw this.conflict(type, id, options.ifMatch, now);
      }
    }
    throw fhirError('ERR_WRITE_CONFLICT', { type, id });
  }

  private stamp(type: string, id: string, versionId: number, resource: Resource | null): StoredVersion {
    const lastUpdated = this.now().toISOString();
    if (resource === null) return { type, id, versionId, lastUpdated, resource: null };
    const meta = { ...(resource.meta ?? {}), versionId: String(versionId), lastUpdated };
    // id and meta first, as FHIR servers conventionally write them.
    const stamped = { resourceType: type, id, meta, ...withoutKeys(resource, ['resourceType', 'id', 'meta']) } as Resource;
    return { type, id, versionId, lastUpdated, resource: stamped };
  }

  private conflict(type: string, id: string, expected: number, current: StoredVersion | undefined) {
    const state = !current ? 'absent' : current.resource === null ? 'deleted' : `at version ${current.versionId}`;
    return fhirError('ERR_VERSION_CONFLICT', { type, id, expected: String(expected), current: state });
  }
}

function withCanonical(version: StoredVersion) {
  const resource = version.resource as (Resource & { url?: unknown; version?: unknown }) | null;
  return {
    ...version,
    url: typeof resource?.url === 'string' ? resource.url : undefined,
    version: typeof resource?.version === 'string' ? resource.version : undefined,
  };
}

function withoutKeys<T extends object>(value: T, keys: string[]): Partial<T> {
  const copy: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) if (!keys.includes(k)) copy[k] = v;
  return copy as Partial<T>;
}
