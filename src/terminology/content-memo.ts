/**
 * Work derived from terminology content (an expansion's members, say), kept for as long as the
 * content it came from: a memo belongs to one resolver, and a resolver to one state of the
 * stored content, so a change retires the whole memo with its resolver. Keyed by the resource
 * the work is about (by identity: an inline resource never matches a stored one) and a string
 * naming everything else the work depended on. Bounded: the oldest entries go first.
 */
export class ContentMemo {
  private readonly byOwner = new WeakMap<object, Map<string, unknown>>();
  private readonly order: { owner: WeakRef<object>; key: string }[] = [];

  constructor(private readonly maxEntries = 64) {}

  get<T>(owner: object, key: string): T | undefined {
    return this.byOwner.get(owner)?.get(key) as T | undefined;
  }

  set<T>(owner: object, key: string, value: T): void {
    let entries = this.byOwner.get(owner);
    if (!entries) {
      entries = new Map();
      this.byOwner.set(owner, entries);
    }
    if (!entries.has(key)) this.order.push({ owner: new WeakRef(owner), key });
    entries.set(key, value);
    while (this.order.length > this.maxEntries) {
      const oldest = this.order.shift() as { owner: WeakRef<object>; key: string };
      const holder = oldest.owner.deref();
      if (holder) this.byOwner.get(holder)?.delete(oldest.key);
    }
  }
}
