import { request } from 'node:http';
import type { Bundle } from 'fhir/r4';
import { describe, expect } from 'vitest';
import { testOnBothBackends } from '../helpers/postgres';
import { freePort, startServer, waitForServer, type ServerProcess } from '../helpers/process';
import { stopServer } from './write-stream';

/**
 * A transaction is all or nothing even when the server is killed while it runs: SIGKILL once the
 * Bundle has been sent (the server is reading or writing it), restart on the same data, and find
 * either every one of its resources or none.
 */

const ENTRIES = 3000;

function bigTransaction(marker: string): Bundle {
  return {
    resourceType: 'Bundle',
    type: 'transaction',
    entry: Array.from({ length: ENTRIES }, (_, i) => ({
      fullUrl: `urn:uuid:00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
      resource: {
        resourceType: 'Basic',
        code: { text: `entry ${i}` },
        identifier: [{ system: 'http://example.org/crash', value: marker }],
      },
      request: { method: 'POST', url: 'Basic' },
    })),
  };
}

/** Sends the Bundle and resolves once every byte has left (the answer, if any, is not awaited). */
function sendAndForget(port: number, body: string): Promise<void> {
  return new Promise((resolve) => {
    const req = request({
      host: '127.0.0.1',
      port,
      path: '/fhir/R4',
      method: 'POST',
      headers: { 'content-type': 'application/fhir+json', 'content-length': Buffer.byteLength(body) },
    });
    req.on('error', () => undefined);
    req.on('response', (res) => res.resume());
    req.end(body, () => resolve());
  });
}

async function count(base: string, marker: string): Promise<number> {
  const res = await fetch(`${base}/Basic?identifier=http://example.org/crash|${marker}&_summary=count`);
  return ((await res.json()) as Bundle).total as number;
}

async function crashDuringTransactions(env: Record<string, string>): Promise<void> {
  const port = await freePort();
  const outcomes: number[] = [];
  for (let round = 0; round < 3; round++) {
    const marker = `round-${round}`;
    const server: ServerProcess = startServer(env, port);
    let again: ServerProcess | undefined;
    try {
      await waitForServer(server);
      await sendAndForget(port, JSON.stringify(bigTransaction(marker)));
      server.child.kill('SIGKILL');
      await server.exited;
      again = startServer(env, port);
      await waitForServer(again);
      const found = await count(again.base, marker);
      expect([0, ENTRIES], `round ${round}: ${found} of ${ENTRIES} resources`).toContain(found);
      outcomes.push(found);
    } finally {
      await stopServer(server, 'SIGKILL');
      if (again) await stopServer(again, 'SIGTERM');
    }
  }
  // Whatever the timing, every round left all or nothing.
  expect(outcomes).toHaveLength(3);
}

describe('SIGKILL during a large transaction', () => {
  testOnBothBackends(
    'all or nothing after restart',
    (env) => crashDuringTransactions({ ...env, BODY_LIMIT: '64mb' }),
    180_000,
  );
});
