import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { describe, expect, test } from 'vitest';
import { testOnBothBackends } from '../helpers/postgres';
import { freePort, startServer, until, waitForServer, type ServerProcess } from '../helpers/process';

/**
 * WORKERS=2 (src/cluster.ts): a primary and two server processes sharing the port. Each request
 * below goes on a new connection, which the primary hands to the next worker, so both answer.
 */

/** One request on a connection of its own (closed after it). */
function once(url: string, method = 'GET', body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method,
        agent: false,
        headers: {
          connection: 'close',
          accept: 'application/fhir+json',
          ...(body ? { 'content-type': 'application/fhir+json' } : {}),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The pids of a process's children (the workers of a primary). */
function childrenOf(pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
}

const codeSystem = (codes: string[]) =>
  JSON.stringify({
    resourceType: 'CodeSystem',
    id: 'wk',
    url: 'http://example.org/workers',
    status: 'active',
    content: 'complete',
    concept: codes.map((code) => ({ code })),
  });

describe('WORKERS=2: two server processes behind one port', () => {
  testOnBothBackends(
    "both workers serve, each sees the other's writes, a killed worker is replaced, SIGTERM stops all",
    async (storage) => {
      const server: ServerProcess = startServer({ ...storage, WORKERS: '2', LOG_LEVEL: 'warn' }, await freePort());
      try {
        await waitForServer(server);
        const primary = server.child.pid as number;
        await until(() => childrenOf(primary).length === 2, 'two workers running');

        // Written through whichever worker takes the connection; asked through both, each on a new
        // connection (round-robin), until all eight agree (the other worker learns of it by notice).
        expect((await once(`${server.base}/CodeSystem/wk`, 'PUT', codeSystem(['a']))).status).toBe(201);
        const validates = async (code: string) => {
          const answers = await Promise.all(
            Array.from({ length: 8 }, () =>
              once(`${server.base}/CodeSystem/$validate-code?url=http://example.org/workers&code=${code}`),
            ),
          );
          return answers.every((a) => a.status === 200 && JSON.parse(a.body).parameter[0].valueBoolean === true);
        };
        await until(() => validates('a'), 'code a valid through both workers', 5000);
        expect((await once(`${server.base}/CodeSystem/wk`, 'PUT', codeSystem(['b']))).status).toBe(200);
        await until(() => validates('b'), 'code b valid through both workers', 5000);

        // A worker that dies is replaced; the server keeps answering meanwhile.
        const [victim, survivor] = childrenOf(primary);
        process.kill(victim, 'SIGKILL');
        await until(() => {
          const now = childrenOf(primary);
          return now.length === 2 && !now.includes(victim) && now.includes(survivor);
        }, 'a new worker in place of the killed one');
        await until(
          async () =>
            (
              await Promise.all(
                Array.from({ length: 4 }, () => once(`${server.base}/metadata`).catch(() => ({ status: 0 }))),
              )
            ).every((r) => r.status === 200),
          'every connection answered',
        );
        expect(await validates('b')).toBe(true);

        const workers = childrenOf(primary);
        server.child.kill('SIGTERM');
        expect(await server.exited, server.output()).toBe(0);
        for (const pid of workers) expect(() => process.kill(pid, 0)).toThrow();
      } finally {
        if (server.child.exitCode === null) server.child.kill('SIGKILL');
        await server.exited;
      }
    },
    120_000,
  );

  test('a first worker that cannot start (storage unreachable) ends the server with code 1, not a restart loop', async () => {
    const server = startServer(
      { WORKERS: '2', DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none', LOG_LEVEL: 'warn' },
      await freePort(),
    );
    try {
      expect(await server.exited, server.output()).toBe(1);
      expect(server.output()).toContain('the first worker stopped before it listened');
    } finally {
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
    }
  }, 60_000);
});
