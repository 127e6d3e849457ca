import { randomBytes } from 'node:crypto';
import { createServer, connect, type Server, type Socket } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PgNotices } from '../../src/storage/postgres/pg-notices';
import { hasPostgres, TEST_DATABASE_URL } from '../helpers/postgres';

/**
 * A TCP proxy in front of PostgreSQL that can refuse new connections and cut the open ones: the
 * database unreachable, out of connections, or a network blip, for this test's connections only.
 */
class Proxy {
  refusing = false;
  private readonly open = new Set<Socket>();
  private server?: Server;
  port = 0;

  constructor(private readonly target: URL) {}

  async start(): Promise<void> {
    this.server = createServer((client) => {
      if (this.refusing) return void client.destroy();
      const upstream = connect(Number(this.target.port || 5432), this.target.hostname);
      for (const [a, b] of [
        [client, upstream],
        [upstream, client],
      ] as const) {
        a.pipe(b);
        a.on('error', () => b.destroy());
        a.on('close', () => b.destroy());
        this.open.add(a);
        a.on('close', () => this.open.delete(a));
      }
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    this.port = (this.server?.address() as { port: number }).port;
  }

  url(): string {
    const url = new URL(this.target.toString());
    url.hostname = '127.0.0.1';
    url.port = String(this.port);
    return url.toString();
  }

  cut(): void {
    for (const socket of this.open) socket.destroy();
  }

  async stop(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}

describe.skipIf(!hasPostgres)('PostgreSQL notices (LISTEN/NOTIFY)', () => {
  let proxy: Proxy;
  let publisher: pg.Client;
  const publish = async (channel: string, payload: string) =>
    void (await publisher.query('SELECT pg_notify($1, $2)', [channel, payload]));
  const channel = () => `test_notices_${randomBytes(5).toString('hex')}`;

  beforeAll(async () => {
    proxy = new Proxy(new URL(TEST_DATABASE_URL as string));
    await proxy.start();
    publisher = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await publisher.connect();
  });

  afterAll(async () => {
    await publisher?.end();
    await proxy?.stop();
  });

  /** A listener's messages, and a promise for the next time it is told it may have missed some. */
  function recorder() {
    const messages: string[] = [];
    let missedCount = 0;
    let onMissed: (() => void) | undefined;
    return {
      messages,
      onMessage: (payload: string) => void messages.push(payload),
      missed: () => {
        missedCount++;
        onMissed?.();
      },
      nextMissed: () => new Promise<void>((resolve) => (onMissed = resolve)),
      missedCount: () => missedCount,
    };
  }

  async function received(messages: string[], payload: string): Promise<void> {
    while (!messages.includes(payload)) await new Promise((resolve) => setTimeout(resolve, 10));
  }

  test('a listener whose first connection fails is listening once the database takes connections again, and is told it may have missed messages', async () => {
    const notices = new PgNotices(proxy.url(), publish);
    try {
      const name = channel();
      const r = recorder();
      proxy.refusing = true;
      const missed = r.nextMissed();
      // Answers (does not hang or throw) although nothing listens yet.
      await notices.listen(name, r.onMessage, r.missed);
      proxy.refusing = false;
      await missed;
      await publish(name, 'after');
      await received(r.messages, 'after');
    } finally {
      proxy.refusing = false;
      await notices.close();
    }
  });

  test('a listening connection that is cut comes back, says messages may be missed, and receives the next ones', async () => {
    const notices = new PgNotices(proxy.url(), publish);
    try {
      const name = channel();
      const r = recorder();
      await notices.listen(name, r.onMessage, r.missed);
      await publish(name, 'before');
      await received(r.messages, 'before');
      expect(r.missedCount()).toBe(0);
      const missed = r.nextMissed();
      proxy.cut();
      await missed;
      await publish(name, 'after');
      await received(r.messages, 'after');
    } finally {
      await notices.close();
    }
  });

  test('every listener of a channel, not only the first, is listening when its listen() answers', async () => {
    const notices = new PgNotices(proxy.url(), publish);
    try {
      const name = channel();
      const a = recorder();
      const b = recorder();
      await Promise.all([notices.listen(name, a.onMessage), notices.listen(name, b.onMessage)]);
      await publish(name, 'both');
      await received(a.messages, 'both');
      await received(b.messages, 'both');
      // The second channel on a live connection: listening when its listen() answers.
      const other = channel();
      const c = recorder();
      await notices.listen(other, c.onMessage);
      await publish(other, 'third');
      await received(c.messages, 'third');
    } finally {
      await notices.close();
    }
  });
});
