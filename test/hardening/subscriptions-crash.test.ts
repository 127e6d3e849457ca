import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Patient } from 'fhir/r4';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freshSchema, hasPostgres, POSTGRES_SKIP_REASON, type TestSchema } from '../helpers/postgres';
import { freePort, startServer, until, waitForServer, type ServerProcess } from '../helpers/process';
import { Receiver } from '../helpers/receiver';
import { stopServer } from './write-stream';
import { serverApp } from '../helpers/server-app';

/**
 * Subscriptions' delivery is durable: the job is written in the transaction of the write it is
 * about, so a server killed (SIGKILL) after the commit and before the delivery delivers after
 * its restart. The first process runs no workers (JOB_WORKERS=0), so the kill always falls
 * between the two. And two processes over one PostgreSQL deliver each event once.
 */

const JSON_HEADERS = { 'content-type': 'application/fhir+json' };

async function post(base: string, type: string, body: object): Promise<{ id: string }> {
  const res = await fetch(`${base}/${type}`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(body) });
  if (res.status !== 201) throw new Error(`${type}: ${res.status} ${await res.text()}`);
  return (await res.json()) as { id: string };
}

function subscription(endpoint: string, tag: string) {
  return {
    resourceType: 'Subscription',
    status: 'requested',
    reason: 'crash test',
    criteria: `Patient?identifier=urn:crash|${tag}`,
    channel: { type: 'rest-hook', endpoint, payload: 'application/fhir+json' },
  };
}

const patient = (tag: string): Patient => ({
  resourceType: 'Patient',
  identifier: [{ system: 'urn:crash', value: tag }],
});

function crashSuite(name: string, env: () => Record<string, string>) {
  test(`${name}: SIGKILL between commit and delivery, and the delivery still happens after restart`, async () => {
    const receiver = await new Receiver().start();
    const port = await freePort();
    let first: ServerProcess | undefined;
    let second: ServerProcess | undefined;
    try {
      first = startServer({ ...env(), JOB_WORKERS: '0', OUTBOUND_ALLOW_PRIVATE: 'true' }, port);
      await waitForServer(first, 120_000);
      await post(first.base, 'Subscription', subscription(receiver.url, 'crash'));
      const created = await post(first.base, 'Patient', patient('crash'));
      first.child.kill('SIGKILL');
      await first.exited;
      expect(receiver.received).toHaveLength(0);
      second = startServer({ ...env(), JOB_WORKERS: '1', OUTBOUND_ALLOW_PRIVATE: 'true' }, port);
      await waitForServer(second, 120_000);
      const [got] = await receiver.until((r) => r.length >= 1);
      expect(got.url).toBe(`/hook/Patient/${created.id}`);
    } finally {
      if (first) await stopServer(first, 'SIGKILL');
      if (second) await stopServer(second, 'SIGTERM');
      await receiver.stop();
    }
  });
}

describe('subscription delivery across a crash', () => {
  let dir: string;
  let schema: TestSchema | undefined;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'subs-crash-'));
    if (hasPostgres) schema = await freshSchema();
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await schema?.drop();
  });

  crashSuite('SQLite', () => ({ DATA_DIR: dir }));
  if (hasPostgres) crashSuite('PostgreSQL', () => ({ DATABASE_URL: (schema as TestSchema).url }));
  else test.skip(POSTGRES_SKIP_REASON, () => undefined);
});

describe.skipIf(!hasPostgres)('two processes over one PostgreSQL', () => {
  test('each event is delivered once, whichever process took the write', async () => {
    const schema = await freshSchema();
    const receiver = await new Receiver().start();
    const servers: ServerProcess[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        const server = startServer(
          { DATABASE_URL: schema.url, JOB_WORKERS: '2', OUTBOUND_ALLOW_PRIVATE: 'true' },
          await freePort(),
        );
        servers.push(server);
      }
      for (const server of servers) await waitForServer(server, 120_000);
      // Created through one process; the other must see it at its next write (the change mark).
      await post(servers[0].base, 'Subscription', subscription(receiver.url, 'pair'));
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) ids.push((await post(servers[i % 2].base, 'Patient', patient('pair'))).id);
      await receiver.until((r) => r.length >= ids.length);
      // Every job is finished: nothing more can arrive.
      const db = new pg.Client({ connectionString: schema.url });
      await db.connect();
      try {
        for (;;) {
          const { rows } = await db.query(
            "SELECT COUNT(*)::int AS n FROM jobs WHERE kind = 'subscription-delivery' AND state IN ('queued', 'running')",
          );
          if (rows[0].n === 0) break;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      } finally {
        await db.end();
      }
      const delivered = receiver.received.map((r) => r.url.slice('/hook/Patient/'.length)).sort();
      expect(delivered).toEqual([...ids].sort());
    } finally {
      for (const server of servers) await stopServer(server, 'SIGTERM');
      await receiver.stop();
      await schema.drop();
    }
  });
});

describe.skipIf(!hasPostgres)('websocket fan-out over one PostgreSQL', () => {
  test('a notification reaches a socket held by a process other than the one that delivered it (NOTIFY)', async () => {
    const schema = await freshSchema();
    const writer = startServer({ DATABASE_URL: schema.url, JOB_WORKERS: '1' }, await freePort());
    let holder: Awaited<ReturnType<typeof serverApp>> | undefined;
    try {
      await waitForServer(writer, 120_000);
      // The socket's process runs no workers: only the writer's worker delivers.
      holder = await serverApp({ databaseUrl: schema.url, jobWorkers: 0 });
      const sub = await post(writer.base, 'Subscription', {
        resourceType: 'Subscription',
        status: 'requested',
        reason: 'ws',
        criteria: 'Patient?identifier=urn:crash|ws',
        channel: { type: 'websocket' },
      });
      const tokenRes = await holder.app.inject({
        method: 'GET',
        url: `/fhir/R4/Subscription/${sub.id}/$get-ws-binding-token`,
      });
      expect(tokenRes.statusCode, tokenRes.body).toBe(200);
      const token = (tokenRes.json() as { parameter: { name: string; valueString?: string }[] }).parameter.find(
        (p) => p.name === 'token',
      )?.valueString;
      const socket = await holder.app.injectWS('/ws/subscriptions-r4');
      const messages: { entry?: { resource: { type?: string; id?: string } }[] }[] = [];
      socket.on('message', (data: Buffer) => messages.push(JSON.parse(data.toString())));
      try {
        socket.send(JSON.stringify({ type: 'bind-with-token', payload: { token } }));
        await until(() => messages.some((m) => m.entry?.[0].resource.type === 'handshake'), 'the handshake', 30_000);
        const created = await post(writer.base, 'Patient', patient('ws'));
        await until(
          () => messages.some((m) => m.entry?.[0].resource.type === 'event-notification'),
          'the event notification',
          30_000,
        );
        const event = messages.find((m) => m.entry?.[0].resource.type === 'event-notification');
        expect(event?.entry?.[1].resource.id).toBe(created.id);
      } finally {
        socket.terminate();
      }
    } finally {
      await holder?.close();
      await stopServer(writer, 'SIGTERM');
      await schema.drop();
    }
  });
});
