/**
 * Short-lived state by kind and key, shared by every process over the database: authorization
 * codes (taken once), refresh tokens, the `jti` of client assertions (claimed once), login
 * counters, signing keys and password hashes. Each entry expires at an instant (epoch ms); an
 * expired entry is as good as absent and is purged along the way. The SQL is the same on both
 * backends; each runs it its own way (SQLite on its writer connection, in turn).
 */
export interface EphemeralStore {
  /** Stores the value unless a live entry holds the key: true when this call took it. */
  claim(kind: string, key: string, value: string, expiresAt: number): Promise<boolean>;
  /** Removes a live entry and answers its value (at most one caller ever gets it). */
  take(kind: string, key: string): Promise<string | undefined>;
  peek(kind: string, key: string): Promise<string | undefined>;
  put(kind: string, key: string, value: string, expiresAt: number): Promise<void>;
  remove(kind: string, key: string): Promise<void>;
  /** Counts one more event in a window that starts with the first and lasts `windowMs`; answers the count. */
  count(kind: string, key: string, windowMs: number): Promise<number>;
  /** Every live entry of a kind. */
  list(kind: string): Promise<{ key: string; value: string; expiresAt: number }[]>;
}

/** Entries that never expire (a password hash): the end of the representable instants. */
export const NEVER = 8_640_000_000_000_000;

type Run = (sql: string, params: unknown[]) => Promise<Record<string, unknown>[]>;

/** How many writes between purges of expired entries. */
const PURGE_EVERY = 500;

export class SqlEphemeralStore implements EphemeralStore {
  private writes = 0;

  constructor(
    private readonly write: Run,
    private readonly read: Run = write,
    private readonly now: () => number = Date.now,
  ) {}

  async claim(kind: string, key: string, value: string, expiresAt: number): Promise<boolean> {
    await this.maybePurge();
    const rows = await this.write(
      `INSERT INTO ephemeral (kind, key, value, expires_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
       WHERE ephemeral.expires_at <= ? RETURNING kind`,
      [kind, key, value, expiresAt, this.now()],
    );
    return rows.length === 1;
  }

  async take(kind: string, key: string): Promise<string | undefined> {
    const rows = await this.write(
      'DELETE FROM ephemeral WHERE kind = ? AND key = ? AND expires_at > ? RETURNING value',
      [kind, key, this.now()],
    );
    return rows[0]?.value as string | undefined;
  }

  async peek(kind: string, key: string): Promise<string | undefined> {
    const rows = await this.read('SELECT value FROM ephemeral WHERE kind = ? AND key = ? AND expires_at > ?', [
      kind,
      key,
      this.now(),
    ]);
    return rows[0]?.value as string | undefined;
  }

  async put(kind: string, key: string, value: string, expiresAt: number): Promise<void> {
    await this.maybePurge();
    await this.write(
      `INSERT INTO ephemeral (kind, key, value, expires_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`,
      [kind, key, value, expiresAt],
    );
  }

  async remove(kind: string, key: string): Promise<void> {
    await this.write('DELETE FROM ephemeral WHERE kind = ? AND key = ?', [kind, key]);
  }

  async count(kind: string, key: string, windowMs: number): Promise<number> {
    await this.maybePurge();
    const now = this.now();
    const rows = await this.write(
      `INSERT INTO ephemeral (kind, key, value, expires_at) VALUES (?, ?, '1', ?)
       ON CONFLICT (kind, key) DO UPDATE SET
         value = CASE WHEN ephemeral.expires_at <= ? THEN '1' ELSE CAST(CAST(ephemeral.value AS BIGINT) + 1 AS TEXT) END,
         expires_at = CASE WHEN ephemeral.expires_at <= ? THEN excluded.expires_at ELSE ephemeral.expires_at END
       RETURNING value`,
      [kind, key, now + windowMs, now, now],
    );
    return Number(rows[0]?.value ?? 1);
  }

  async list(kind: string): Promise<{ key: string; value: string; expiresAt: number }[]> {
    const rows = await this.read(
      'SELECT key, value, expires_at FROM ephemeral WHERE kind = ? AND expires_at > ? ORDER BY key',
      [kind, this.now()],
    );
    return rows.map((r) => ({ key: r.key as string, value: r.value as string, expiresAt: Number(r.expires_at) }));
  }

  private async maybePurge(): Promise<void> {
    if (++this.writes % PURGE_EVERY !== 0) return;
    await this.write('DELETE FROM ephemeral WHERE expires_at <= ?', [this.now()]);
  }
}
