import type { ResourceStore } from '../../storage/store';
import { CanonicalIndex, TERMINOLOGY_TYPES, type TerminologyResource } from '../canonical-index';

/**
 * The CodeSystems, ValueSets and ConceptMaps users stored, held in memory and kept current.
 * Before each terminology request the store's per-type change marks are read (one small query);
 * when another process (or this one) wrote since, only the changed resources are fetched. So an
 * update takes effect on the next request, in every process over the same database.
 */
export class StoredTerminology {
  readonly index = new CanonicalIndex();
  /** Grows whenever the stored content changes; caches built on it compare generations. */
  generation = 0;
  private readonly marks = new Map<string, number>(TERMINOLOGY_TYPES.map((t) => [t, 0]));
  private pending?: Promise<void>;

  constructor(private readonly store: ResourceStore) {}

  /** Brings the index up to date; concurrent callers share one refresh. */
  refresh(): Promise<void> {
    this.pending ??= this.doRefresh().finally(() => {
      this.pending = undefined;
    });
    return this.pending;
  }

  private async doRefresh(): Promise<void> {
    const current = await this.store.changeMarks(TERMINOLOGY_TYPES);
    let changed = false;
    for (const type of TERMINOLOGY_TYPES) {
      const known = this.marks.get(type) ?? 0;
      const now = current.get(type) ?? 0;
      if (now <= known) continue;
      let seen = now;
      for (const change of await this.store.changesSince(type, known)) {
        this.index.removeById(type, change.id);
        if (change.resource) this.index.add(change.resource as TerminologyResource);
        seen = Math.max(seen, change.seq);
      }
      this.marks.set(type, seen);
      changed = true;
    }
    if (changed) this.generation++;
  }
}
