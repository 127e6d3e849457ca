import type { CodeSystem, Parameters } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freshSchema, hasPostgres, POSTGRES_SKIP_REASON, type TestSchema } from '../helpers/postgres';
import { freePort, startServer, waitForServer, type ServerProcess } from '../helpers/process';
import { stopServer } from './write-stream';

/**
 * With FRESHNESS_CHECK=request, a CodeSystem write acknowledged by one process is seen by the next
 * $validate-code in every other process over the same PostgreSQL (issue 19, item 5). Process A takes N writes that each
 * add or remove one code; after each acknowledgement, process B is asked about that code at once.
 * Meanwhile B answers a steady stream of other terminology requests (so a refresh of its
 * terminology is nearly always in flight when the question arrives, and its answer cache holds
 * the previous answer) and A takes writes of another code system.
 */

/** 2,000 in the issue; 300 by default keeps the suite near a minute on a busy 2-core machine (FRESHNESS_WRITES=2000 for the full run). */
const WRITES = Number(process.env.FRESHNESS_WRITES ?? 300);
const SYSTEM = 'http://example.org/fresh/CodeSystem/flip';
const OTHER = 'http://example.org/fresh/CodeSystem/other';
const JSON_HEADERS = { 'content-type': 'application/fhir+json', accept: 'application/fhir+json' };

const codeSystem = (id: string, url: string, codes: string[]): CodeSystem => ({
  resourceType: 'CodeSystem',
  id,
  url,
  status: 'active',
  content: 'complete',
  concept: codes.map((code) => ({ code, display: code })),
});

async function put(server: ServerProcess, resource: CodeSystem): Promise<void> {
  const res = await fetch(`${server.base}/CodeSystem/${resource.id}`, {
    method: 'PUT',
    headers: JSON_HEADERS,
    body: JSON.stringify(resource),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`PUT ${resource.id}: ${res.status} ${text.slice(0, 300)}`);
}

async function isValid(server: ServerProcess, system: string, code: string): Promise<boolean> {
  const res = await fetch(`${server.base}/CodeSystem/$validate-code?url=${encodeURIComponent(system)}&code=${code}`, {
    headers: { accept: 'application/fhir+json' },
  });
  const body = (await res.json()) as Parameters;
  if (res.status !== 200) throw new Error(`validate-code: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  return body.parameter?.find((p) => p.name === 'result')?.valueBoolean === true;
}

/** Two server processes over a fresh PostgreSQL schema for the enclosing describe. */
function twoServers(freshnessCheck: 'request' | 'notify'): ServerProcess[] {
  let schema: TestSchema;
  const servers: ServerProcess[] = [];
  beforeAll(async () => {
    schema = await freshSchema();
    for (let i = 0; i < 2; i++)
      servers.push(
        startServer({ DATABASE_URL: schema.url, LOG_LEVEL: 'warn', FRESHNESS_CHECK: freshnessCheck }, await freePort()),
      );
    await Promise.all(servers.map((s) => waitForServer(s)));
  });
  afterAll(async () => {
    for (const server of servers) await stopServer(server, 'SIGTERM');
    await schema?.drop();
  });
  return servers;
}

describe('FRESHNESS_CHECK=request: terminology writes are seen at once by every process over PostgreSQL', () => {
  if (!hasPostgres) {
    test.skip(POSTGRES_SKIP_REASON, () => undefined);
    return;
  }
  const servers = twoServers('request');

  test(`${WRITES} acknowledged writes through A, each checked at once through B under traffic: no stale answer`, async () => {
    const [a, b] = servers;
    await put(a, codeSystem('flip', SYSTEM, ['always']));
    await put(a, codeSystem('other', OTHER, ['o0']));
    let done = false;
    // Background traffic, not synchronisation: B refreshing all the time, A writing elsewhere.
    const readers = Array.from({ length: 3 }, async () => {
      while (!done) await isValid(b, SYSTEM, 'always');
    });
    const writer = (async () => {
      for (let i = 1; !done; i++) await put(a, codeSystem('other', OTHER, [`o${i}`]));
    })();
    const stale: string[] = [];
    const took = { write: 0, check: 0 };
    try {
      for (let i = 0; i < WRITES; i++) {
        const present = i % 2 === 0;
        const start = performance.now();
        await put(a, codeSystem('flip', SYSTEM, present ? ['always', 'flip'] : ['always']));
        const written = performance.now();
        took.write += written - start;
        // Asked twice: the first answer comes from a refresh, the second may come from the answer cache.
        for (let ask = 0; ask < 2; ask++) {
          if ((await isValid(b, SYSTEM, 'flip')) !== present)
            stale.push(`write ${i}, ask ${ask}: B answered ${!present}`);
        }
        took.check += performance.now() - written;
      }
    } finally {
      done = true;
      await Promise.all([...readers, writer]);
    }
    process.stdout.write(
      `${WRITES} writes: ${(took.write / WRITES).toFixed(1)} ms per write through A, ${(took.check / WRITES / 2).toFixed(1)} ms per check through B, ${stale.length} stale\n`,
    );
    expect(stale).toEqual([]);
  }, 600_000);
});

/**
 * With FRESHNESS_CHECK=notify (the default), B learns of A's writes from PostgreSQL's notices
 * instead of asking per request: A's own client sees each write at once; B is asked again until it
 * answers as the write says, and how long that took after A's acknowledgement is reported (the
 * target is under 100 ms; the test only fails past 5 s, half the safety check's period, so it
 * fails when notices do not arrive).
 */
describe('FRESHNESS_CHECK=notify: another process learns of terminology writes from notices', () => {
  if (!hasPostgres) {
    test.skip(POSTGRES_SKIP_REASON, () => undefined);
    return;
  }
  const servers = twoServers('notify');

  test(`${Math.min(WRITES, 200)} writes through A: seen by A at once, by B after its notice`, async () => {
    const [a, b] = servers;
    await put(a, codeSystem('flip', SYSTEM, ['always']));
    let done = false;
    const readers = Array.from({ length: 2 }, async () => {
      while (!done) await isValid(b, SYSTEM, 'always');
    });
    const lags: number[] = [];
    const late: string[] = [];
    try {
      for (let i = 0; i < Math.min(WRITES, 200); i++) {
        const present = i % 2 === 0;
        await put(a, codeSystem('flip', SYSTEM, present ? ['always', 'flip'] : ['always']));
        const acknowledged = performance.now();
        if ((await isValid(a, SYSTEM, 'flip')) !== present) late.push(`write ${i}: A itself answered ${!present}`);
        while ((await isValid(b, SYSTEM, 'flip')) !== present && performance.now() - acknowledged < 5000);
        const lag = performance.now() - acknowledged;
        if (lag >= 5000) late.push(`write ${i}: B did not see it within 5 s`);
        lags.push(lag);
      }
    } finally {
      done = true;
      await Promise.all(readers);
    }
    lags.sort((x, y) => x - y);
    const at = (q: number) => lags[Math.min(lags.length - 1, Math.floor(q * lags.length))].toFixed(1);
    process.stdout.write(
      `${lags.length} writes through A: B answered as written after p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${at(1)} ms (from A's acknowledgement, including B's answer)\n`,
    );
    expect(late).toEqual([]);
  }, 600_000);
});
