import pg from 'pg';
import type { Notices } from '../notices';

/**
 * LISTEN/NOTIFY: publishing is one `pg_notify` on the pool; listening holds one connection of its
 * own (a pooled one would be handed to others), opened at the first listen and opened again after
 * it is lost (messages sent meanwhile are missed: notices are best effort).
 */
export class PgNotices implements Notices {
  private client?: pg.Client;
  private connecting?: Promise<pg.Client>;
  private readonly listeners = new Map<string, Set<(payload: string) => void>>();
  private closed = false;

  constructor(
    private readonly connectionString: string,
    private readonly notify: (channel: string, payload: string) => Promise<void>,
  ) {}

  publish(channel: string, payload: string): Promise<void> {
    return this.notify(channel, payload);
  }

  async listen(channel: string, listener: (payload: string) => void): Promise<() => void> {
    let set = this.listeners.get(channel);
    if (!set) {
      set = new Set();
      this.listeners.set(channel, set);
      const client = await this.connect();
      await client.query(`LISTEN ${quote(channel)}`);
    }
    set.add(listener);
    return () => set.delete(listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.client?.end().catch(() => undefined);
  }

  private connect(): Promise<pg.Client> {
    if (this.client) return Promise.resolve(this.client);
    this.connecting ??= (async () => {
      const client = new pg.Client({ connectionString: this.connectionString, application_name: 'fhir-tx-server-listen', keepAlive: true });
      client.on('notification', (message) => {
        for (const listener of this.listeners.get(message.channel) ?? []) listener(message.payload ?? '');
      });
      client.on('error', () => this.lost(client));
      client.on('end', () => this.lost(client));
      await client.connect();
      this.client = client;
      this.connecting = undefined;
      return client;
    })().catch((err) => {
      this.connecting = undefined;
      throw err;
    });
    return this.connecting;
  }

  private lost(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    if (this.closed) return;
    const retry = () => {
      if (this.closed) return;
      this.connect()
        .then(async (again) => {
          for (const channel of this.listeners.keys()) await again.query(`LISTEN ${quote(channel)}`);
        })
        .catch(() => setTimeout(retry, 1000).unref());
    };
    setTimeout(retry, 100).unref();
  }
}

function quote(channel: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`'${channel}' is not a channel name`);
  return `"${channel}"`;
}
