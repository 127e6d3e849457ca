import { createServer, type Server } from 'node:http';

/** One request a receiver got. */
export interface Received {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  at: number;
}

/**
 * A loopback HTTP receiver for webhooks: records every request and answers with what `respond`
 * says (200 by default). Tests wait on `until`, never on wall-clock time.
 */
export class Receiver {
  readonly received: Received[] = [];
  respond: (request: Received) => number = () => 200;
  private waiters: (() => void)[] = [];
  private server?: Server;
  port = 0;

  async start(port = 0): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const request: Received = {
          method: req.method ?? '',
          url: req.url ?? '',
          headers: req.headers,
          body: Buffer.concat(chunks).toString('utf8'),
          at: Date.now(),
        };
        this.received.push(request);
        res.statusCode = this.respond(request);
        res.end();
        const waiters = this.waiters;
        this.waiters = [];
        for (const w of waiters) w();
      });
    });
    await new Promise<void>((resolve) => (this.server as Server).listen(port, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  /** Resolves once `check` holds over what was received (rejects after `timeoutMs`: a test failure, not a timing assertion). */
  async until(check: (received: Received[]) => boolean, timeoutMs = 30_000): Promise<Received[]> {
    const deadline = Date.now() + timeoutMs;
    while (!check(this.received)) {
      if (Date.now() > deadline)
        throw new Error(
          `the receiver did not get what was expected; it got ${JSON.stringify(this.received.map((r) => `${r.method} ${r.url}`))}`,
        );
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 200);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.received;
  }

  clear(): void {
    this.received.length = 0;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
