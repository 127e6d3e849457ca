import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { freePort, startServer, waitForServer } from '../helpers/process';
import { RawWebSocket } from '../helpers/raw-websocket';
import { stopServer } from './write-stream';

/**
 * Unbound subscription websockets cannot starve the server of descriptors: 450 upgrades from 30
 * loopback addresses (15 each, under the per-address cap), against a server limited to 400
 * descriptors. Each is refused (503 over WS_MAX_CONNECTIONS) or closed by the server when it has
 * not bound within WS_BIND_TIMEOUT_MS; legitimate reads meanwhile all succeed. Before the limits,
 * the same sockets stayed open and 50 of 50 reads failed.
 */

const TOKEN = 'websocket-flood-token-0123456789';
const DESCRIPTOR_LIMIT = 400;
const SOCKETS = 450;
const ADDRESSES = 30;
const WAVES = 10;
/** Small, so the test finishes quickly: the default is 10 s. */
const BIND_TIMEOUT_MS = 2000;
const MAX_CONNECTIONS = 200;

/** `dropped`: the connection closed without an HTTP answer (what a server out of descriptors does). */
type Outcome =
  { kind: 'refused'; status: number } | { kind: 'closed'; code?: number } | { kind: 'dropped'; reason: string };

function descriptorsOf(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

describe('unbound websockets against a 400-descriptor limit', () => {
  test('450 unbound sockets from 30 addresses: refused or closed by the server; legitimate reads keep succeeding', async () => {
    const port = await freePort();
    const server = startServer(
      {
        AUTH_TOKENS: TOKEN,
        DATA_DIR: mkdtempSync(join(tmpdir(), 'fhir-ws-')),
        LOG_LEVEL: 'warn',
        WS_BIND_TIMEOUT_MS: String(BIND_TIMEOUT_MS),
        WS_MAX_CONNECTIONS: String(MAX_CONNECTIONS),
      },
      port,
      { wrap: ['prlimit', `--nofile=${DESCRIPTOR_LIMIT}:${DESCRIPTOR_LIMIT}`, '--'] },
    );
    const sockets: RawWebSocket[] = [];
    try {
      await waitForServer(server);
      const pid = server.child.pid as number;
      const auth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/fhir+json' };
      const put = await fetch(`${server.base}/Basic/legit`, {
        method: 'PUT',
        headers: auth,
        body: JSON.stringify({ resourceType: 'Basic', id: 'legit', code: { text: 'read me' } }),
      });
      expect(put.status).toBeLessThan(300);
      const baseline = descriptorsOf(pid);

      const outcomes: Promise<Outcome>[] = [];
      let attackOver = false;
      const attack = (async () => {
        // In waves, each once the last has been answered: the sockets are held over time, as an
        // attacker holds them, not a burst no accept queue could take.
        for (let wave = 0; wave < WAVES; wave++) {
          const answers = Array.from({ length: SOCKETS / WAVES }, (_, i) => {
            const from = `127.0.0.${10 + ((wave * (SOCKETS / WAVES) + i) % ADDRESSES)}`;
            return RawWebSocket.open(port, '/ws/subscriptions-r4', { from });
          });
          for (const answer of answers) {
            outcomes.push(
              answer.then(
                async ({ status, socket }): Promise<Outcome> => {
                  if (!socket) return { kind: 'refused', status };
                  sockets.push(socket);
                  await socket.closed;
                  return { kind: 'closed', code: socket.closeCode };
                },
                (err: Error): Outcome => ({ kind: 'dropped', reason: err.message }),
              ),
            );
          }
          await Promise.allSettled(answers);
        }
        await Promise.all(outcomes);
        attackOver = true;
      })();

      const failures: string[] = [];
      let reads = 0;
      let peakDescriptors = baseline;
      while (!attackOver) {
        try {
          const read = await fetch(`${server.base}/Basic/legit`, { headers: auth });
          if (read.status !== 200) failures.push(`read ${reads}: ${read.status}`);
          await read.arrayBuffer();
        } catch (err) {
          failures.push(`read ${reads}: ${(err as Error).message}`);
        }
        reads++;
        peakDescriptors = Math.max(peakDescriptors, descriptorsOf(pid));
      }
      await attack;
      const results = await Promise.all(outcomes);

      expect(failures).toEqual([]);
      expect(reads).toBeGreaterThan(0);
      expect(results).toHaveLength(SOCKETS);
      expect(results.filter((r) => r.kind === 'dropped')).toEqual([]);
      const refused = results.filter((r) => r.kind === 'refused');
      const closed = results.filter((r) => r.kind === 'closed');
      for (const r of refused) expect(r.status).toBe(503);
      // Closed by the server for not binding: the close frame says so (1008), unless the cut came first.
      for (const r of closed) expect([1008, undefined]).toContain(r.code);
      expect(closed.filter((r) => r.code === 1008).length).toBeGreaterThan(0);
      expect(peakDescriptors).toBeLessThan(DESCRIPTOR_LIMIT);
      expect(server.child.exitCode).toBeNull();
      console.info(
        `unbound websockets: ${closed.length} upgraded and closed by the server, ${refused.length} refused 503; ` +
          `${reads} legitimate reads meanwhile, none failed; descriptors ${baseline} at rest, ${peakDescriptors} at peak (limit ${DESCRIPTOR_LIMIT})`,
      );
    } finally {
      for (const socket of sockets) socket.destroy();
      await stopServer(server, 'SIGTERM');
    }
  }, 90_000);
});
