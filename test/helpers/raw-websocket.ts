import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';

/**
 * A websocket client over a bare TCP socket (the project has no client library, and a test of
 * limits wants to see the HTTP answer to a refused upgrade and the moment the server closes):
 * the handshake, masked text frames out, text and close frames in.
 */
export class RawWebSocket {
  readonly messages: string[] = [];
  /** The close code the server sent, if it sent one. */
  closeCode: number | undefined;
  /** Resolves when the TCP connection has closed (whoever closed it). */
  readonly closed: Promise<void>;
  private buffer = Buffer.alloc(0);
  private waiters: (() => void)[] = [];

  private constructor(private readonly socket: Socket) {
    this.closed = new Promise((resolve) => socket.once('close', () => resolve()));
    socket.on('data', (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.readFrames();
    });
  }

  /**
   * Sends an upgrade request for `path`: the socket when the server switched protocols (101), or
   * the HTTP status and body of its refusal.
   */
  static async open(
    port: number,
    path: string,
    options: { from?: string } = {},
  ): Promise<{ status: number; body: string; socket?: RawWebSocket }> {
    // `from`: a loopback address of 127/8 to connect from, to stand for another client.
    const socket = connect({ port, host: '127.0.0.1', localAddress: options.from });
    socket.on('error', () => undefined);
    const key = randomBytes(16).toString('base64');
    socket.write(
      `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    );
    const { head, rest } = await readHead(socket);
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
    if (status !== 101) {
      const after: Buffer[] = [rest];
      socket.on('data', (more: Buffer) => after.push(more));
      const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      socket.resume();
      await ended;
      return { status, body: Buffer.concat(after).toString('utf8') };
    }
    const raw = new RawWebSocket(socket);
    if (rest.length > 0) socket.emit('data', rest);
    socket.resume();
    return { status, body: '', socket: raw };
  }

  send(text: string): void {
    const payload = Buffer.from(text, 'utf8');
    const mask = randomBytes(4);
    const header =
      payload.length < 126
        ? Buffer.from([0x81, 0x80 | payload.length])
        : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 0xff]);
    const masked = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]));
    this.socket.write(Buffer.concat([header, mask, masked]));
  }

  /** Resolves once a message satisfying `check` has arrived (or rejects when the connection closes first). */
  async until(check: (message: string) => boolean): Promise<string> {
    for (;;) {
      const found = this.messages.find(check);
      if (found !== undefined) return found;
      if (this.socket.destroyed) throw new Error(`the socket closed; messages: ${JSON.stringify(this.messages)}`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        this.socket.once('close', resolve);
      });
    }
  }

  get isOpen(): boolean {
    return !this.socket.destroyed;
  }

  destroy(): void {
    this.socket.destroy();
  }

  private readFrames(): void {
    for (;;) {
      if (this.buffer.length < 2) return;
      const opcode = this.buffer[0] & 0x0f;
      let length = this.buffer[1] & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (this.buffer.length < 4) return;
        length = this.buffer.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (this.buffer.length < 10) return;
        length = Number(this.buffer.readBigUInt64BE(2));
        offset = 10;
      }
      if (this.buffer.length < offset + length) return;
      const payload = this.buffer.subarray(offset, offset + length);
      this.buffer = this.buffer.subarray(offset + length);
      if (opcode === 0x1) this.messages.push(payload.toString('utf8'));
      if (opcode === 0x8 && payload.length >= 2) this.closeCode = payload.readUInt16BE(0);
      const waiters = this.waiters;
      this.waiters = [];
      for (const w of waiters) w();
    }
  }
}

/** Reads up to the end of the HTTP head, and leaves the socket paused with no reader. */
function readHead(socket: Socket): Promise<{ head: string; rest: Buffer }> {
  return new Promise((resolve, reject) => {
    let buffer = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      const end = buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.pause();
      socket.off('data', onData);
      socket.off('close', onClose);
      resolve({ head: buffer.subarray(0, end).toString('latin1'), rest: buffer.subarray(end + 4) });
    };
    const onClose = () =>
      reject(
        new Error(
          `the server closed the connection before answering; got ${JSON.stringify(buffer.toString('latin1'))}`,
        ),
      );
    socket.on('data', onData);
    socket.once('close', onClose);
  });
}
