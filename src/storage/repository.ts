import type { Resource } from 'fhir/r4';
import { newResourceId } from '../fhir/resource-id';
import { yieldIfHeld } from '../context/budget';
import { fhirError } from '../fhir/errors';
import type { IndexRows } from './index-schema';
import {
  versionFromRow,
  type CurrentState,
  type ResourceStore,
  type StoredVersion,
  type StoreReader,
  type StoreTx,
  type VersionRow,
  type WriteOp,
} from './store';

/**
 * Versioning, written once above every backend: ids, meta, If-Match, and which version is
 * current. Backends assign the next version number inside their write transaction (writers of
 * one resource queue there), so an unconditional write never loses a race. Every write carries
 * the new content's search index rows, computed by the `index` function the composition root
 * gives (the search layer's extraction), and written in the same transaction.
 */

export interface WriteOptions {
  /** The version the client says it is changing (If-Match); a different current version is 412. */
  ifMatch?: number;
  /** How the client asked for the update, recorded for history: PUT unless said (a PATCH says so). */
  method?: 'PUT' | 'PATCH';
}

export interface Written {
  version: StoredVersion;
  /** True when there was no live resource before (201 rather than 200). */
  created: boolean;
}

export const ID_PATTERN = /^[A-Za-z0-9\-.]{1,64}$/;

/** One version a transaction wrote, with the state before it (absent: a create). */
export interface WriteEvent {
  version: StoredVersion;
  previous?: CurrentState;
}

/**
 * Hears of every version a transaction writes, inside that transaction, before it commits: what it
 * does with the transaction (enqueue jobs) commits with the write or not at all (subscriptions'
 * transactional outbox). Must be cheap when it has nothing to do: it runs on every write.
 */
export interface WriteObserver {
  written(tx: StoreTx, project: string, events: WriteEvent[]): Promise<void>;
}

export interface RepositoryOptions {
  /** The search index rows of a resource about to be stored. */
  index?: (resource: Resource) => IndexRows | null;
  now?: () => Date;
}

/** Reads and writes inside one store transaction (a transaction Bundle, an import). */
export interface RepositoryTx {
  read(type: string, id: string): Promise<StoredVersion>;
  create(type: string, resource: Resource, id?: string): Promise<Written>;
  update(type: string, id: string, resource: Resource, options?: WriteOptions): Promise<Written>;
  delete(type: string, id: string, options?: WriteOptions): Promise<StoredVersion | undefined>;
  /** Stores each resource under its own id (an update, or a create where absent), in one batch. */
  putMany(resources: Resource[]): Promise<Written[]>;
  /** Creates each resource under its own id, which must be free, in one batch. */
  createMany(resources: Resource[]): Promise<StoredVersion[]>;
  readonly store: StoreTx;
  readonly project: string;
  /** The same transaction, writing in another project (a new project's first resources, with its entry in the system scope). */
  in(project: string): RepositoryTx;
}

/**
 * The store, as one project sees it: every read, write and transaction is within the project. The
 * server's Repository hands these out per project (a request's project comes from its caller).
 */
export class Repository {
  private readonly written: ((version: StoredVersion) => void)[] = [];
  private readonly index: (resource: Resource) => IndexRows | null;
  private readonly now: () => Date;
  private readonly scopes = new Map<string, ProjectRepository>();
  private readonly observers: WriteObserver[] = [];

  constructor(
    readonly store: ResourceStore,
    options: RepositoryOptions = {},
  ) {
    this.index = options.index ?? (() => null);
    this.now = options.now ?? (() => new Date());
  }

  /** Called with each version any project's repository has durably written (and a deletion's tombstone). */
  onWrite(listener: (version: StoredVersion) => void): void {
    this.written.push(listener);
  }

  /** Adds an observer of every write, called inside the writing transaction (see WriteObserver). */
  observe(observer: WriteObserver): void {
    this.observers.push(observer);
  }

  /** The repository of one project. */
  in(project: string): ProjectRepository {
    let scoped = this.scopes.get(project);
    if (!scoped) {
      scoped = new ProjectRepository(this.store, project, {
        index: this.index,
        now: this.now,
        observers: this.observers,
        committed: (versions) => {
          for (const version of versions) for (const listener of this.written) listener(version);
        },
      });
      if (this.scopes.size < 10_000) this.scopes.set(project, scoped);
    }
    return scoped;
  }
}

interface ScopeParts {
  index: (resource: Resource) => IndexRows | null;
  now: () => Date;
  observers: readonly WriteObserver[];
  committed: (versions: StoredVersion[]) => void;
}

export class ProjectRepository {
  constructor(
    readonly store: ResourceStore,
    readonly project: string,
    private readonly parts: ScopeParts,
  ) {}

  /** Creates with a new server id (or the id given, which must be free). */
  async create(type: string, resource: Resource, id?: string): Promise<Written> {
    return this.transaction((tx) => tx.create(type, resource, id));
  }

  async update(type: string, id: string, resource: Resource, options: WriteOptions = {}): Promise<Written> {
    return this.transaction((tx) => tx.update(type, id, resource, options));
  }

  /** Deleting writes a tombstone version; deleting what is absent or deleted already is a no-op. */
  async delete(type: string, id: string, options: WriteOptions = {}): Promise<StoredVersion | undefined> {
    return this.transaction((tx) => tx.delete(type, id, options));
  }

  async read(type: string, id: string): Promise<StoredVersion> {
    return readLive(this.store, this.project, type, id);
  }

  async vread(type: string, id: string, versionId: number): Promise<StoredVersion> {
    const version = await this.store.readVersion(this.project, type, id, versionId);
    if (!version) {
      if (!(await this.store.read(this.project, type, id))) throw fhirError('ERR_RESOURCE_NOT_FOUND', { type, id });
      throw fhirError('ERR_VERSION_NOT_FOUND', { type, id, vid: String(versionId) });
    }
    if (version.resource === null) throw fhirError('ERR_RESOURCE_DELETED', { type, id });
    return version;
  }

  /** The current, live resources of a type with this canonical url (and version, when given). */
  async byCanonical(type: string, url: string, version?: string): Promise<StoredVersion[]> {
    const rows = await this.store.query<VersionRow>(
      `SELECT v.project, v.type, v.id, v.version, v.last_updated, v.content FROM resources r
        JOIN resource_versions v ON v.project = r.project AND v.type = r.type AND v.id = r.id AND v.version = r.version
        WHERE r.project = ? AND r.type = ? AND r.url = ? AND r.deleted = FALSE${version !== undefined ? ' AND r.canonical_version = ?' : ''}`,
      version !== undefined ? [this.project, type, url, version] : [this.project, type, url],
    );
    return rows.map((row) => versionFromRow(row));
  }

  /** Live resources whose references point at this one (from the search index), with the parameter that indexes each. */
  async referrers(type: string, id: string, limit: number): Promise<{ type: string; id: string; param: string }[]> {
    return this.store.query<{ type: string; id: string; param: string }>(
      `SELECT r.type, r.id, x.param FROM search_reference x JOIN resources r ON r.rid = x.rid
        WHERE x.project = ? AND x.target_type = ? AND x.target_id = ? AND r.deleted = FALSE AND NOT (r.type = ? AND r.id = ?) ORDER BY r.rid LIMIT ?`,
      [this.project, type, id, type, id, limit],
    );
  }

  async history(type: string, id: string): Promise<StoredVersion[]> {
    const versions = await this.store.history(this.project, type, id);
    if (versions.length === 0) throw fhirError('ERR_RESOURCE_NOT_FOUND', { type, id });
    return versions;
  }

  /**
   * Runs `work` in one store transaction: everything it writes commits together, or nothing
   * does. Listeners hear of the versions once committed. `work` may run again when the backend
   * retries a transaction that lost a race, so it must not act outside the transaction.
   */
  async transaction<T>(work: (tx: RepositoryTx) => Promise<T>): Promise<T> {
    const writes: StoredVersion[] = [];
    const result = await this.store.transaction(async (tx) => {
      writes.length = 0;
      return work(this.txOf(tx, writes));
    });
    this.parts.committed(writes);
    return result;
  }

  /** The transaction's writes, told to the observers in it (the index, the outbox); one version at a time is noted in `writes`. */
  private observedWrites(tx: StoreTx, writes: StoredVersion[]) {
    const observe = async (events: WriteEvent[]) => {
      for (const observer of this.parts.observers) await observer.written(tx, this.project, events);
    };
    const write = async (op: WriteOp) => {
      const result = await tx.write(op);
      if (result.status === 'ok') {
        writes.push(result.version);
        if (this.parts.observers.length > 0) await observe([{ version: result.version, previous: result.previous }]);
      }
      return result;
    };
    const writeMany = async (ops: WriteOp[]) => {
      const results = await tx.writeMany(ops);
      if (this.parts.observers.length > 0) {
        await observe(
          results.flatMap((r) => (r.status === 'ok' ? [{ version: r.version, previous: r.previous }] : [])),
        );
      }
      return results;
    };
    return { write, writeMany };
  }

  private txOf(tx: StoreTx, writes: StoredVersion[]): RepositoryTx {
    const { write, writeMany } = this.observedWrites(tx, writes);
    return {
      store: tx,
      project: this.project,
      in: (project) =>
        project === this.project
          ? this.txOf(tx, writes)
          : new ProjectRepository(this.store, project, this.parts).txOf(tx, writes),
      read: (type, id) => readLive(tx, this.project, type, id),
      create: async (type, resource, id) => {
        // A server-assigned id is a fresh UUID (v7): it cannot be taken, so no retry loop is needed.
        const newId = id ?? newResourceId();
        const stamped = this.stamp(type, newId, resource);
        const result = await write({ ...this.op(type, newId, stamped), ifMatch: 0, method: 'POST' });
        if (result.status !== 'ok') throw fhirError('ERR_RESOURCE_EXISTS', { type, id: newId });
        return { version: result.version, created: true };
      },
      update: async (type, id, resource, options = {}) => {
        const stamped = this.stamp(type, id, resource);
        const result = await write({
          ...this.op(type, id, stamped),
          ifMatch: options.ifMatch,
          method: options.method ?? 'PUT',
        });
        if (result.status !== 'ok') throw conflict(type, id, options.ifMatch ?? 0, result.current);
        return { version: result.version, created: isAbsent(result.previous) };
      },
      createMany: async (resources) => {
        const ops = await this.ops(resources, { ifMatch: 0, method: 'POST' });
        const results = await writeMany(ops);
        return results.map((result, i) => {
          if (result.status !== 'ok') throw fhirError('ERR_RESOURCE_EXISTS', { type: ops[i].type, id: ops[i].id });
          writes.push(result.version);
          return result.version;
        });
      },
      putMany: async (resources) => {
        const ops = await this.ops(resources, { method: 'PUT' });
        const results = await writeMany(ops);
        return results.map((result, i) => {
          if (result.status !== 'ok') throw conflict(ops[i].type, ops[i].id, 0, result.current);
          writes.push(result.version);
          return { version: result.version, created: isAbsent(result.previous) };
        });
      },
      delete: async (type, id, options = {}) => {
        const result = await write({
          project: this.project,
          type,
          id,
          resource: null,
          lastUpdated: this.parts.now().toISOString(),
          ifMatch: options.ifMatch,
          index: null,
        });
        if (result.status === 'conflict') throw conflict(type, id, options.ifMatch ?? 0, result.current);
        return result.status === 'ok' ? result.version : undefined;
      },
    };
  }

  /**
   * The writes of many resources. Indexing one takes a fraction of a millisecond, thousands take
   * seconds, so the event loop is given back in between (other requests go on meanwhile).
   */
  private async ops(resources: Resource[], fields: Pick<WriteOp, 'ifMatch' | 'method'>): Promise<WriteOp[]> {
    const ops: WriteOp[] = [];
    for (const r of resources) {
      await yieldIfHeld();
      ops.push({
        ...this.op(r.resourceType, r.id as string, this.stamp(r.resourceType, r.id as string, r)),
        ...fields,
      });
    }
    return ops;
  }

  private op(type: string, id: string, resource: Resource): WriteOp {
    const canonical = resource as Resource & { url?: unknown; version?: unknown };
    return {
      project: this.project,
      type,
      id,
      resource,
      lastUpdated: (resource.meta?.lastUpdated as string) ?? this.parts.now().toISOString(),
      url: typeof canonical.url === 'string' ? canonical.url : undefined,
      version: typeof canonical.version === 'string' ? canonical.version : undefined,
      index: this.parts.index(resource),
    };
  }

  /** id and meta first, as FHIR servers conventionally write them; the store fills in meta.versionId. */
  private stamp(type: string, id: string, resource: Resource): Resource {
    const lastUpdated = this.parts.now().toISOString();
    const meta = { versionId: '0', ...(resource.meta ?? {}), lastUpdated };
    meta.versionId = '0';
    return { resourceType: type, id, meta, ...withoutKeys(resource, ['resourceType', 'id', 'meta']) } as Resource;
  }
}

async function readLive(reader: StoreReader, project: string, type: string, id: string): Promise<StoredVersion> {
  const current = await reader.read(project, type, id);
  if (!current) throw fhirError('ERR_RESOURCE_NOT_FOUND', { type, id });
  if (current.resource === null) throw fhirError('ERR_RESOURCE_DELETED', { type, id });
  return current;
}

function isAbsent(state: CurrentState | undefined): boolean {
  return !state || state.deleted;
}

function conflict(type: string, id: string, expected: number, current: CurrentState | undefined) {
  const state = !current ? 'absent' : current.deleted ? 'deleted' : `at version ${current.versionId}`;
  return fhirError('ERR_VERSION_CONFLICT', { type, id, expected: String(expected), current: state });
}

function withoutKeys<T extends object>(value: T, keys: string[]): Partial<T> {
  const copy: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) if (!keys.includes(k)) copy[k] = v;
  return copy as Partial<T>;
}
