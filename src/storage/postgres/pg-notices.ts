import pg from 'pg';
import type { Notices } from '../notices';

interface Listener {
  onMessage: (payload: string) => void;
  missed?: () => void;
}

/** How long after a failed connection (or LISTEN) the next try starts. */
const RETRY_MS = 1000;

/**
 * LISTEN/NOTIFY: publishing is one `pg_notify` on the pool; listening holds one connection of its
 * own (a pooled one would be handed to others), opened at the first listen and opened again,
 * every second until it works, after it is lost or could not be opened (the database down, or out
 * of connections). Messages sent while no connection listens are lost: on each new connection
 * every listener's `missed` is called, so it can look for itself.
 */
export class PgNotices implements Notices {
  private client?: pg.Client;
  /** The channels the current connection listens to. */
  private readonly listened = new Set<string>();
  /** The current attempt to connect and LISTEN to every channel with listeners. */
  private attempt?: Promise<void>;
  private readonly listeners = new Map<string, Set<Listener>>();
  private retryTimer?: NodeJS.Timeout;
  /** Whether a connection ever listened (a later one means messages may have been missed). */
  private connectedBefore = false;
  private closed = false;

  constructor(
    private readonly connectionString: string,
    private readonly notify: (channel: string, payload: string) => Promise<void>,
  ) {}

  publish(channel: string, payload: string): Promise<void> {
    return this.notify(channel, payload);
  }

  async listen(channel: string, onMessage: (payload: string) => void, missed?: () => void): Promise<() => void> {
    quote(channel);
    const listener: Listener = { onMessage, missed };
    let set = this.listeners.get(channel);
    if (!set) {
      set = new Set();
      this.listeners.set(channel, set);
    }
    set.add(listener);
    const listeners = set;
    try {
      await this.listening(channel);
    } catch {
      // Not listening yet: tried again in the background, and `missed` is called once it works.
      this.lost(this.client);
    }
    return () => void listeners.delete(listener);
  }

  /** Resolves once the current connection listens to `channel` (every caller, not only a channel's first). */
  private async listening(channel: string): Promise<void> {
    await this.connect();
    const client = this.client;
    if (!client) throw new Error('notices closed');
    if (this.listened.has(channel)) return;
    await client.query(`LISTEN ${quote(channel)}`);
    if (this.client === client) this.listened.add(channel);
  }

  /** Whether a connection listens to `channel` now (messages sent meanwhile reach this process). */
  isListening(channel: string): boolean {
    return this.client !== undefined && this.listened.has(channel);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    await this.client?.end().catch(() => undefined);
  }

  /** Connects (when not connected) and listens to every channel with listeners. */
  private connect(): Promise<void> {
    if (this.client) return Promise.resolve();
    this.attempt ??= (async () => {
      const client = new pg.Client({
        connectionString: this.connectionString,
        application_name: 'fhir-tx-server-listen',
        keepAlive: true,
        connectionTimeoutMillis: 10_000,
      });
      client.on('notification', (message) => {
        for (const listener of this.listeners.get(message.channel) ?? []) listener.onMessage(message.payload ?? '');
      });
      client.on('error', () => this.lost(client));
      client.on('end', () => this.lost(client));
      const channels = [...this.listeners.keys()];
      try {
        await client.connect();
        for (const channel of channels) await client.query(`LISTEN ${quote(channel)}`);
      } catch (err) {
        await client.end().catch(() => undefined);
        throw err;
      }
      if (this.closed) {
        await client.end().catch(() => undefined);
        return;
      }
      this.client = client;
      this.listened.clear();
      for (const channel of channels) this.listened.add(channel);
      if (this.connectedBefore) this.announceMissed();
      this.connectedBefore = true;
    })().finally(() => {
      this.attempt = undefined;
    });
    return this.attempt;
  }

  /** The listening connection is gone or could not be made: try again soon, until it works. */
  private lost(client: pg.Client | undefined): void {
    if (client && this.client !== client) return;
    const gone = this.client;
    this.client = undefined;
    this.listened.clear();
    gone?.end().catch(() => undefined);
    // A first connection that failed: whatever was sent meanwhile is missed as well.
    this.connectedBefore = true;
    if (this.closed || this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.closed) return;
      this.connect().catch(() => this.lost(undefined));
    }, RETRY_MS);
    this.retryTimer.unref();
  }

  private announceMissed(): void {
    for (const set of this.listeners.values()) for (const listener of set) listener.missed?.();
  }
}

function quote(channel: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`'${channel}' is not a channel name`);
  return `"${channel}"`;
}
