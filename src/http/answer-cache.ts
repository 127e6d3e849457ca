/**
 * Answers of read-only operations, kept as the serialized bytes that were sent, keyed by
 * everything in the request that reaches the handler (method, URL, the headers an operation
 * honours, the body) and stamped with the state token the operation's services gave when the
 * answer was made. A hit is only a hit while that token is unchanged, so stored content that
 * changes (in this process or any other over the same database) retires every older answer.
 *
 * Bounded three ways: by entries, by the size of one answer, and by the size of all of them
 * (keys included: a POST's key carries its body), so neither a few huge expansions nor many large
 * requests can grow the process without end. Sizes are counted in characters, which is bytes for
 * the ASCII that FHIR JSON mostly is. Eviction is "second chance" in batches: a hit only sets a
 * flag, because moving the entry to the end of a V8 Map on every hit (a true LRU) makes the Map
 * rehash itself once it is full, measured here at 50 µs per hit with 10,000 entries.
 *
 * An answer is kept the second time it is made, not the first: a request seen once is remembered
 * only by a hash of its key. A stream of requests that never repeat (a validator going through
 * every coded element of its resources) would otherwise fill the cache with answers nobody asks
 * for again, pushing out those that are, and keep the garbage collector busy copying them; with
 * the hash they cost a number each. A repeated request is answered from the cache from its third
 * time on.
 */
interface Entry {
  token: string;
  body: string;
  size: number;
  used: boolean;
}

export interface AnswerCacheLimits {
  maxEntries: number;
  /** Largest answer (and key) kept. */
  maxAnswerBytes: number;
  /** All keys and answers together. */
  maxTotalBytes: number;
  /** Keep an answer only the second time it is made (see above); false keeps every answer at once. */
  admitOnRepeat: boolean;
}

export const DEFAULT_ANSWER_CACHE_LIMITS: AnswerCacheLimits = {
  maxEntries: 10_000,
  maxAnswerBytes: 64 * 1024,
  maxTotalBytes: 64 * 1024 * 1024,
  admitOnRepeat: true,
};

export class AnswerCache {
  private readonly entries = new Map<string, Entry>();
  private readonly limits: AnswerCacheLimits;
  private totalBytes = 0;
  /** Hashes of the keys answered once and not kept; forgotten all at once when as many as maxEntries. */
  private readonly answeredOnce = new Set<number>();

  constructor(limits: Partial<AnswerCacheLimits> = {}) {
    this.limits = { ...DEFAULT_ANSWER_CACHE_LIMITS, ...limits };
  }

  /** Characters held, keys and answers together. */
  get size(): { entries: number; bytes: number } {
    return { entries: this.entries.size, bytes: this.totalBytes };
  }

  get(key: string, token: string): string | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.token !== token) {
      this.remove(key, entry);
      // Asked for again after the content changed: its new answer is kept at once.
      if (this.limits.admitOnRepeat) this.answeredOnce.add(fnv1a(key));
      return undefined;
    }
    entry.used = true;
    return entry.body;
  }

  set(key: string, token: string, body: string): void {
    const { maxAnswerBytes, maxEntries, maxTotalBytes } = this.limits;
    if (body.length > maxAnswerBytes || key.length > maxAnswerBytes) return;
    const size = key.length + body.length;
    if (size > maxTotalBytes) return;
    if (this.limits.admitOnRepeat && !this.entries.has(key) && !this.repeated(key)) return;
    const previous = this.entries.get(key);
    if (previous) this.remove(key, previous);
    if (this.entries.size >= maxEntries || this.totalBytes + size > maxTotalBytes) this.evict(size);
    this.entries.set(key, { token, body, size, used: false });
    this.totalBytes += size;
  }

  /** Whether this key was answered before; remembers it when not. */
  private repeated(key: string): boolean {
    const hash = fnv1a(key);
    if (this.answeredOnce.delete(hash)) return true;
    if (this.answeredOnce.size >= this.limits.maxEntries) this.answeredOnce.clear();
    this.answeredOnce.add(hash);
    return false;
  }

  private remove(key: string, entry: Entry): void {
    this.entries.delete(key);
    this.totalBytes -= entry.size;
  }

  /**
   * Frees an eighth of the room (in entries and in bytes) and at least `needed` bytes, oldest
   * first; an entry used since it was last looked at moves to the end instead, once.
   */
  private evict(needed: number): void {
    const { maxEntries, maxTotalBytes } = this.limits;
    const entriesGoal = maxEntries - Math.max(1, Math.floor(maxEntries / 8));
    const bytesGoal = Math.min(maxTotalBytes - needed, maxTotalBytes - Math.floor(maxTotalBytes / 8));
    const kept: [string, Entry][] = [];
    for (const [key, entry] of this.entries) {
      if (this.entries.size + kept.length <= entriesGoal && this.totalBytes <= bytesGoal) break;
      this.entries.delete(key);
      if (entry.used) {
        entry.used = false;
        kept.push([key, entry]);
      } else {
        this.totalBytes -= entry.size;
      }
    }
    for (const [key, entry] of kept) this.entries.set(key, entry);
    // Everything was used since the last round: what is kept still has to make room.
    if (this.entries.size > entriesGoal || this.totalBytes > bytesGoal) this.evictOldest(entriesGoal, bytesGoal);
  }

  private evictOldest(entriesGoal: number, bytesGoal: number): void {
    for (const [key, entry] of this.entries) {
      if (this.entries.size <= entriesGoal && this.totalBytes <= bytesGoal) return;
      this.remove(key, entry);
    }
  }
}

/** 32-bit FNV-1a of a string's UTF-16 code units: a collision only lets an answer in early. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return hash >>> 0;
}
