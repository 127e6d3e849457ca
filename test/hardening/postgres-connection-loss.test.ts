import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  freshSchema,
  hasPostgres,
  POSTGRES_SKIP_REASON,
  TEST_DATABASE_URL,
  type TestSchema,
} from '../helpers/postgres';
import { freePort, startServer, waitForServer, type ServerProcess } from '../helpers/process';
import { basic, everyAcknowledgedWriteIsThere, JSON_HEADERS, stopServer, writeStream } from './write-stream';

/**
 * What a PostgreSQL restart, a failover, an idle-session timeout or a network reset does to a
 * server in full flow: its backends are terminated while writes are in flight, again and again.
 * The process must live through it, each write in flight answers 503 or succeeds (never half),
 * every acknowledged write is there afterwards, and the pool serves again without a restart.
 */

/** Rounds of killing every backend of the server; each waits for the server to have recovered. */
const KILL_ROUNDS = Number(process.env.KILL_ROUNDS ?? 100);
/** Writes acknowledged between two kills: proof that the pool recovered, and writes in flight for the next. */
const WRITES_BETWEEN_KILLS = 4;

describe('PostgreSQL backends terminated during concurrent writes', () => {
  if (!hasPostgres) {
    test.skip(POSTGRES_SKIP_REASON, () => undefined);
    return;
  }
  let schema: TestSchema;
  let admin: pg.Client;
  beforeAll(async () => {
    schema = await freshSchema();
    admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
  });
  afterAll(async () => {
    await admin?.end();
    await schema?.drop();
  });

  test('the process survives, in-flight writes get 503 or succeed, every acknowledged write is readable', async () => {
    // The server's connections carry a name of this test's own, so only they are terminated.
    const applicationName = `kill_${randomBytes(6).toString('hex')}`;
    const url = new URL(schema.url);
    url.searchParams.set('application_name', applicationName);
    const server: ServerProcess = startServer({ DATABASE_URL: url.toString(), LOG_LEVEL: 'warn' }, await freePort());
    try {
      await waitForServer(server);
      const stream = writeStream(server.base, 8);
      let terminated = 0;
      for (let round = 0; round < KILL_ROUNDS; round++) {
        await stream.acknowledgedAtLeast(stream.acknowledged.length + WRITES_BETWEEN_KILLS).catch((err: Error) => {
          throw new Error(`${err.message} (round ${round}); the server said: ${server.output().slice(-1500)}`);
        });
        const killed = await admin.query(
          'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()',
          [applicationName],
        );
        terminated += killed.rowCount ?? 0;
      }
      await stream.stop();

      expect(server.child.exitCode, server.output().slice(-2000)).toBeNull();
      expect(server.output()).not.toMatch(/Unhandled 'error' event/);
      expect(terminated).toBeGreaterThanOrEqual(KILL_ROUNDS);
      const answered = [...stream.statuses.keys()];
      for (const status of answered)
        expect(status === 503 || (status >= 200 && status < 300), `status ${status}`).toBe(true);
      // Writes really were caught in flight, and they were told to retry.
      expect(stream.statuses.get(503) ?? 0).toBeGreaterThan(0);

      await everyAcknowledgedWriteIsThere(server.base, stream.acknowledged);
      // Served normally after: a new resource written and read back, and metadata.
      const put = await fetch(`${server.base}/Basic/after-kills`, {
        method: 'PUT',
        headers: JSON_HEADERS,
        body: JSON.stringify(basic('after-kills', 'after')),
      });
      expect(put.status).toBe(201);
      const read = await fetch(`${server.base}/Basic/after-kills`);
      expect(read.status).toBe(200);
      expect((await fetch(`${server.base}/metadata`)).status).toBe(200);
      console.info(
        `connection loss: ${KILL_ROUNDS} rounds, ${terminated} backends terminated, ${stream.acknowledged.length} writes acknowledged, ` +
          `answers ${JSON.stringify(Object.fromEntries(stream.statuses))}`,
      );
    } finally {
      await stopServer(server, 'SIGTERM');
    }
  }, 120_000);
});
