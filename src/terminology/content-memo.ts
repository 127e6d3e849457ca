/**
 * Work derived from terminology content (an expansion's members, say), kept for as long as the
 * content it came from: a memo belongs to one resolver, and a resolver to one state of the
 * stored content, so a change retires the whole memo with its resolver. Keyed by the resource
 * the work is about (by identity: an inline resource never matches a stored one) and a string
 * naming everything else the work depended on. Bounded by entries and by their total weight
 * (what each holds, in the caller's unit: an expansion's members), so that many distinct large
 * expansions (distinct filters over a big value set) cannot fill memory: the oldest go first, and
 * a value heavier than the whole budget is not kept.
 */
export class ContentMemo {
  private readonly byOwner = new WeakMap<object, Map<string, unknown>>();
  private readonly order: { owner: WeakRef<object>; key: string; weight: number }[] = [];
  private weight = 0;

  constructor(
    private readonly maxEntries = 64,
    private readonly maxWeight = 200_000,
  ) {}

  /** The total weight of the entries held. */
  get heldWeight(): number {
    return this.weight;
  }

  get<T>(owner: object, key: string): T | undefined {
    return this.byOwner.get(owner)?.get(key) as T | undefined;
  }

  set<T>(owner: object, key: string, value: T, weight = 1): void {
    if (weight > this.maxWeight) return;
    let entries = this.byOwner.get(owner);
    if (!entries) {
      entries = new Map();
      this.byOwner.set(owner, entries);
    }
    // A key set again is moved to the end with its new weight.
    if (entries.has(key)) this.forget(this.order.findIndex((e) => e.key === key && e.owner.deref() === owner));
    this.order.push({ owner: new WeakRef(owner), key, weight });
    this.weight += weight;
    entries.set(key, value);
    while (this.order.length > this.maxEntries || this.weight > this.maxWeight) this.forget(0);
  }

  private forget(index: number): void {
    if (index < 0) return;
    const [gone] = this.order.splice(index, 1);
    this.weight -= gone.weight;
    const holder = gone.owner.deref();
    if (holder) this.byOwner.get(holder)?.delete(gone.key);
  }
}
