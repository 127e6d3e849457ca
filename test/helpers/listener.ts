import { createServer, type Server, type Socket } from 'node:net';

/**
 * A loopback listener that only counts the connections made to it (on 127.0.0.1 and on ::1, one
 * port): what an outbound guard must keep at zero. Every connection is ended at once.
 */
export class CountingListener {
  connections = 0;
  port = 0;
  private readonly servers: Server[] = [];
  private readonly sockets = new Set<Socket>();

  async start(): Promise<this> {
    this.port = await this.listen('127.0.0.1', 0);
    // The same port on ::1, for the IPv6 forms; a machine without IPv6 loopback refuses those anyway.
    await this.listen('::1', this.port).catch(() => undefined);
    return this;
  }

  private listen(host: string, port: number): Promise<number> {
    const server = createServer((socket) => {
      this.connections += 1;
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      socket.on('error', () => undefined);
      socket.destroy();
    });
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        this.servers.push(server);
        resolve((server.address() as { port: number }).port);
      });
    });
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await Promise.all(this.servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }
}

/** URLs that reach the loopback listener on `port`, in every way an address can be written. */
export function loopbackForms(port: number): string[] {
  return [
    `http://127.0.0.1:${port}/`,
    `http://[::ffff:127.0.0.1]:${port}/`,
    `http://[::ffff:7f00:1]:${port}/`,
    `http://[0:0:0:0:0:ffff:7f00:1]:${port}/`,
    `http://2130706433:${port}/`,
    `http://0x7f000001:${port}/`,
    `http://0177.0.0.1:${port}/`,
    `http://127.1:${port}/`,
    `http://0.0.0.0:${port}/`,
    `http://0:${port}/`,
    `http://[::]:${port}/`,
    `http://[::1]:${port}/`,
    `http://[::ffff:0.0.0.0]:${port}/`,
    `http://localhost:${port}/`,
  ];
}

/**
 * Forms of private and metadata addresses that are not on this machine: only ever judged, never
 * connected to (a test that got through would send traffic off the machine).
 */
export const OFF_MACHINE_FORMS = [
  'http://[::ffff:169.254.169.254]/latest/meta-data/',
  'http://[::ffff:a9fe:a9fe]/latest/meta-data/',
  'http://169.254.169.254/latest/meta-data/',
  'http://2852039166/latest/meta-data/',
  'http://[fd00:ec2::254]/',
  'http://[64:ff9b::a9fe:a9fe]/',
  'http://[2002:a9fe:a9fe::]/',
  'http://[::7f00:1]/',
  'http://[64:ff9b::7f00:1]/',
  'http://[2002:7f00:1::]/',
  'http://[::ffff:10.0.0.1]/',
  'http://[fc00::1]/',
  'http://[fe80::1]/',
  'http://[ff02::1]/',
  'http://100.64.0.1/',
  'http://10.0.0.1/',
  'http://172.16.0.1/',
  'http://192.168.0.1/',
  'http://224.0.0.1/',
];
