import { RefreshGate } from '../storage/refresh-gate';
import { SYSTEM_PROJECT } from '../context/projects';
import type { ResourceStore, StoredVersion } from '../storage/store';
import {
  TERMINOLOGY_TYPES,
  type ProjectTerminology,
  type TerminologyResource,
  type TerminologySource,
} from '../terminology/service';
import { StoredIndex } from './stored-index';

/**
 * The stored terminology of every project, each held once it is asked for. A project resolves
 * against its own and the system scope's (imported packages), never another project's.
 */
export class StoredTerminologies implements TerminologySource {
  private readonly projects = new Map<string, StoredTerminology>();

  constructor(private readonly store: ResourceStore) {}

  of(project: string): StoredTerminology {
    let stored = this.projects.get(project);
    if (!stored) {
      stored = new StoredTerminology(this.store, project);
      this.projects.set(project, stored);
    }
    return stored;
  }

  /** The system scope, whose content every project sees. */
  get system(): StoredTerminology {
    return this.of(SYSTEM_PROJECT);
  }

  /** A version this process has just written (the repository says so after the commit). */
  noteLocalWrite(version: StoredVersion): void {
    this.projects.get(version.project)?.noteLocalWrite(version);
  }
}

/**
 * The CodeSystems, ValueSets and ConceptMaps one project stored, held in memory and kept current.
 * Before each terminology request the store's per-type change marks are checked (no query while
 * the store's ChangeWatch says nothing changed); when another process (or this one) wrote since,
 * only the changed resources are fetched. So a write through this process takes effect on its
 * next request, and another process's once its notice arrives (or on the next request, with
 * FRESHNESS_CHECK=request).
 */
export class StoredTerminology implements ProjectTerminology {
  /** Held as stored JSON and parsed per resource on first use (see StoredIndex). */
  readonly index = new StoredIndex();
  /** Grows whenever the stored content changes; caches built on it compare generations. */
  generation = 0;
  private readonly marks = new Map<string, number>(TERMINOLOGY_TYPES.map((t) => [t, 0]));
  private readonly gate = new RefreshGate(() => this.doRefresh());
  /** Versions this process wrote, by type/id: the refresh takes them as they are instead of parsing them again. */
  private readonly local = new Map<string, StoredVersion>();

  constructor(
    private readonly store: ResourceStore,
    readonly project: string,
  ) {}

  /** A version this process has just written (the repository says so after the commit). */
  noteLocalWrite(version: StoredVersion): void {
    if ((TERMINOLOGY_TYPES as string[]).includes(version.type))
      this.local.set(`${version.type}/${version.id}`, version);
  }

  /**
   * Brings the index up to date with every write committed before this call (a refresh that
   * read the change marks after the caller asked: see RefreshGate); undefined when it is (the
   * store's watch has not moved since the last refresh began).
   */
  refresh(): Promise<void> | undefined {
    if (this.store.changes.epoch === this.refreshedAt) return undefined;
    return this.gate.refresh();
  }

  /** The watch's epoch when the last finished refresh began (nothing it names is missed). */
  private refreshedAt?: number;

  private async doRefresh(): Promise<void> {
    const epoch = this.store.changes.epoch;
    await this.readChanges();
    this.refreshedAt = epoch;
  }

  private async readChanges(): Promise<void> {
    const current = await this.store.changeMarks(this.project, TERMINOLOGY_TYPES);
    let changed = false;
    for (const type of TERMINOLOGY_TYPES) {
      const known = this.marks.get(type) ?? 0;
      const now = current.get(type) ?? 0;
      if (now <= known) continue;
      let seen = now;
      for (const change of await this.store.changesSince(this.project, type, known)) {
        const key = `${type}/${change.id}`;
        const mine = this.local.get(key);
        this.local.delete(key);
        // The store decides which version is current; ours stands in only for that very version.
        this.index.removeById(type, change.id);
        if (mine && mine.versionId === change.versionId) {
          if (mine.resource) this.index.putResource(mine.resource as TerminologyResource & { id: string });
        } else if (change.json !== null) {
          this.index.putJson(type, change.id, change.json);
        }
        seen = Math.max(seen, change.seq);
      }
      this.marks.set(type, seen);
      changed = true;
    }
    if (changed) this.generation++;
  }
}
