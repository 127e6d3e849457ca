import { connect } from 'node:net';
import type { Subscription } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import type { Config } from '../../src/config';
import { RawWebSocket } from '../helpers/raw-websocket';
import { FHIR_JSON, serverApp } from '../helpers/server-app';

/**
 * The subscription websocket is public at the HTTP level, so it is bounded: a socket that does not
 * bind within WS_BIND_TIMEOUT_MS is closed by the server, one address holds at most
 * WS_MAX_PER_ADDRESS sockets (the next upgrade is 429), the process at most WS_MAX_CONNECTIONS
 * (503), and the upgrade request itself is under
 * HEADERS_TIMEOUT_MS. Over real TCP on loopback: the limits are about connections.
 */

const OPERATOR = 'operator-token-websocket-limits';
const PATH = '/ws/subscriptions-r4';

async function listening(config: Partial<Config>): Promise<{ server: ServerApp; port: number }> {
  const server = await serverApp({ authTokens: [OPERATOR], ...config });
  await server.app.listen({ port: 0, host: '127.0.0.1' });
  return { server, port: (server.app.server.address() as { port: number }).port };
}

/** A REST read over TCP, as a legitimate client makes it while the sockets are open. */
async function restRead(port: number): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/fhir/R4/Patient?_count=1`, {
    headers: { authorization: `Bearer ${OPERATOR}` },
  });
  await res.arrayBuffer();
  return res.status;
}

describe('unbound subscription websockets', () => {
  let server: ServerApp;
  let port = 0;
  const sockets: RawWebSocket[] = [];

  beforeAll(async () => {
    ({ server, port } = await listening({ wsBindTimeoutMs: 300, wsMaxPerAddress: 50, headersTimeoutMs: 500 }));
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await server?.close();
  });

  test('a socket that never binds is closed by the server (1008), while REST reads go on', async () => {
    const opened = await Promise.all(Array.from({ length: 10 }, () => RawWebSocket.open(port, PATH)));
    for (const o of opened) expect(o.status).toBe(101);
    const open = opened.map((o) => o.socket as RawWebSocket);
    sockets.push(...open);
    expect(await restRead(port)).toBe(200);
    // Waits for the server's close, not for a time: without the bind timeout this never comes.
    await Promise.all(open.map((s) => s.closed));
    for (const s of open) expect(s.closeCode).toBe(1008);
    expect(await restRead(port)).toBe(200);
  });

  test('pings do not keep an unbound socket; a bound socket is kept past the bind timeout', async () => {
    const sub = await server.app.inject({
      method: 'POST',
      url: '/fhir/R4/Subscription',
      headers: { ...FHIR_JSON, authorization: `Bearer ${OPERATOR}` },
      payload: {
        resourceType: 'Subscription',
        status: 'requested',
        reason: 'ws',
        criteria: 'Patient',
        channel: { type: 'websocket' },
      },
    });
    expect(sub.statusCode, sub.body).toBe(201);
    const id = (sub.json() as Subscription).id as string;
    const tokenAnswer = await server.app.inject({
      method: 'GET',
      url: `/fhir/R4/Subscription/${id}/$get-ws-binding-token`,
      headers: { authorization: `Bearer ${OPERATOR}` },
    });
    expect(tokenAnswer.statusCode, tokenAnswer.body).toBe(200);
    const token = (tokenAnswer.json() as { parameter: { name: string; valueString?: string }[] }).parameter.find(
      (p) => p.name === 'token',
    )?.valueString;

    const bound = (await RawWebSocket.open(port, PATH)).socket as RawWebSocket;
    sockets.push(bound);
    bound.send(JSON.stringify({ type: 'bind-with-token', payload: { token } }));
    await bound.until((m) => m.includes('handshake'));
    // Opened after the bound one, so it times out after it would have.
    const pinging = (await RawWebSocket.open(port, PATH)).socket as RawWebSocket;
    sockets.push(pinging);
    pinging.send(JSON.stringify({ type: 'ping' }));
    await pinging.until((m) => m.includes('pong'));
    await pinging.closed;
    expect(pinging.closeCode).toBe(1008);
    expect(bound.isOpen).toBe(true);
    bound.send(JSON.stringify({ type: 'ping' }));
    await bound.until((m) => m.includes('pong'));
  });

  test('an upgrade request whose headers never end is closed after HEADERS_TIMEOUT_MS', async () => {
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(`GET ${PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n`);
    await closed;
    expect(Buffer.concat(chunks).toString('latin1')).toMatch(/^HTTP\/1\.1 408/);
  });
});

describe('subscription websockets per address', () => {
  let server: ServerApp;
  let port = 0;
  const sockets: RawWebSocket[] = [];

  beforeAll(async () => {
    ({ server, port } = await listening({ wsBindTimeoutMs: 60_000, wsMaxPerAddress: 3, wsMaxConnections: 5 }));
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await server?.close();
  });

  test('over WS_MAX_PER_ADDRESS the next upgrade is refused 429; a closed socket frees its place; REST reads go on', async () => {
    for (let i = 0; i < 3; i += 1) {
      const opened = await RawWebSocket.open(port, PATH);
      expect(opened.status).toBe(101);
      sockets.push(opened.socket as RawWebSocket);
    }
    const refused = await RawWebSocket.open(port, PATH);
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.body)).toMatchObject({
      resourceType: 'OperationOutcome',
      issue: [{ code: 'throttled' }],
    });
    expect(await restRead(port)).toBe(200);

    const first = sockets[0];
    first.destroy();
    await first.closed;
    // The server learns of the close asynchronously: ask until it has (a refusal costs nothing).
    let again = await RawWebSocket.open(port, PATH);
    for (let tries = 0; again.status === 429 && tries < 200; tries += 1) again = await RawWebSocket.open(port, PATH);
    expect(again.status).toBe(101);
    sockets.push(again.socket as RawWebSocket);
  });

  test('over WS_MAX_CONNECTIONS, from any address, the next upgrade is refused 503', async () => {
    // 127.0.0.1 holds 3 (the test above); two more clients bring the process to its 5.
    for (const from of ['127.0.0.2', '127.0.0.2']) {
      const opened = await RawWebSocket.open(port, PATH, { from });
      expect(opened.status, from).toBe(101);
      sockets.push(opened.socket as RawWebSocket);
    }
    const refused = await RawWebSocket.open(port, PATH, { from: '127.0.0.3' });
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.body)).toMatchObject({
      resourceType: 'OperationOutcome',
      issue: [{ code: 'transient' }],
    });
    expect(await restRead(port)).toBe(200);
  });
});
