import { existsSync, mkdtempSync, statSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Basic, Bundle, OperationOutcome } from 'fhir/r4';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  freshSchema,
  hasPostgres,
  POSTGRES_SKIP_REASON,
  TEST_DATABASE_URL,
  testOnBothBackends,
  type TestSchema,
} from '../helpers/postgres';
import { freePort, startServer, waitForServer, type ServerProcess } from '../helpers/process';
import { FHIR_JSON, serverApp } from '../helpers/server-app';
import {
  basic,
  everyAcknowledgedWriteIsThere,
  JSON_HEADERS,
  stopServer,
  writeStream,
  type Acknowledged,
} from './write-stream';

/**
 * Nothing acknowledged is ever lost: not to SIGKILL in the middle of a stream of writes, not to
 * racing writers, not to a SIGTERM with requests in flight, and PostgreSQL going away costs
 * answers (503) for as long as it is away, never the process.
 */

/** How many acknowledged writes the crash test waits for before it kills the server. */
const KILL_AFTER_WRITES = 200;

/**
 * The search index agrees with the versions after the crash: each resource is found by the text
 * of its current version (its index rows were committed with it), and the index holds no row of a
 * resource that is not there (a count by search equals the resources that exist).
 */
async function indexMatchesVersions(base: string, acknowledged: Acknowledged[]): Promise<void> {
  const ids = [...new Set(acknowledged.map((w) => w.id))];
  for (const id of ids) {
    const current = (await (await fetch(`${base}/Basic/${id}`)).json()) as Basic;
    const found = (await (
      await fetch(`${base}/Basic?_id=${id}&code:text=${encodeURIComponent(current.code.text as string)}`)
    ).json()) as Bundle;
    expect(
      found.entry?.map((e) => e.resource?.id),
      `${id} by its current text`,
    ).toEqual([id]);
  }
  const counted = (await (await fetch(`${base}/Basic?code:text=writer&_summary=count`)).json()) as Bundle;
  const everything = (await (await fetch(`${base}/Basic?_summary=count`)).json()) as Bundle;
  expect(counted.total).toBe(everything.total);
  expect(everything.total).toBeGreaterThanOrEqual(ids.length);
}

async function killMidStream(env: Record<string, string>): Promise<void> {
  const port = await freePort();
  const first = startServer(env, port);
  let second: ServerProcess | undefined;
  try {
    await waitForServer(first);
    const stream = writeStream(first.base, 8);
    // Killed in full flow, once a fixed number of writes is acknowledged: however slow the machine
    // (the first write of a fresh server compiles the schema), there is always something to check,
    // and how much there is stays bounded.
    await stream.acknowledgedAtLeast(KILL_AFTER_WRITES);
    first.child.kill('SIGKILL');
    await first.exited;
    await stream.stop();
    second = startServer(env, port);
    await waitForServer(second);
    await everyAcknowledgedWriteIsThere(second.base, stream.acknowledged);
    await indexMatchesVersions(second.base, stream.acknowledged);
  } finally {
    await stopServer(first, 'SIGKILL');
    if (second) await stopServer(second, 'SIGTERM');
  }
}

describe('crash durability: SIGKILL in the middle of a stream of writes', () => {
  testOnBothBackends('every acknowledged write is kept', killMidStream, 60_000);
});

describe('graceful shutdown', () => {
  test('SIGTERM lets in-flight requests finish, closes storage cleanly and exits 0', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'fhir-term-'));
    const server = startServer({ DATA_DIR: dataDir }, await freePort());
    let exitCode: number | null;
    let statuses: PromiseSettledResult<number>[];
    try {
      await waitForServer(server);
      const inFlight = Array.from({ length: 30 }, (_, i) =>
        fetch(`${server.base}/Basic/t${i}`, {
          method: 'PUT',
          headers: JSON_HEADERS,
          body: JSON.stringify(basic(`t${i}`, `term ${i}`)),
        }).then((r) => r.status),
      );
      // Once the first write is answered the others are in the server's hands: stop it then.
      await Promise.race(inFlight);
      server.child.kill('SIGTERM');
      statuses = await Promise.allSettled(inFlight);
      exitCode = await server.exited;
    } finally {
      await stopServer(server, 'SIGKILL');
    }
    expect(exitCode).toBe(0);
    // Each request either completed (2xx) or was never accepted (connection refused); none half-answered.
    for (const s of statuses) if (s.status === 'fulfilled') expect(s.value).toBeLessThan(300);
    // A clean close checkpoints the write-ahead log into the database file.
    const wal = join(dataDir, 'fhir.sqlite-wal');
    expect(!existsSync(wal) || statSync(wal).size === 0).toBe(true);
    const answered = statuses.filter((s) => s.status === 'fulfilled').length;
    const again = startServer({ DATA_DIR: dataDir }, await freePort());
    try {
      await waitForServer(again);
      let stored = 0;
      for (let i = 0; i < 30; i++) if ((await fetch(`${again.base}/Basic/t${i}`)).status === 200) stored++;
      expect(stored).toBeGreaterThanOrEqual(answered);
    } finally {
      again.child.kill('SIGTERM');
      await again.exited;
    }
  }, 60_000);
});

function racingWriters(name: string, open: () => Promise<{ app: FastifyInstance; close: () => Promise<void> }>) {
  describe(`concurrent writers (${name})`, () => {
    let app: FastifyInstance;
    let close: () => Promise<void>;
    beforeAll(async () => {
      ({ app, close } = await open());
    });
    afterAll(() => close());

    const put = (id: string, marker: string, ifMatch?: string) =>
      app.inject({
        method: 'PUT',
        url: `/fhir/R4/Basic/${id}`,
        headers: { ...FHIR_JSON, ...(ifMatch ? { 'if-match': ifMatch } : {}) },
        payload: basic(id, marker),
      });

    test('50 parallel updates with the same If-Match: exactly one wins, 49 get 412', async () => {
      expect((await put('race', 'v1')).statusCode).toBe(201);
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => put('race', `racer ${i}`, 'W/"1"')));
      const codes = results.map((r) => r.statusCode);
      expect(codes.filter((c) => c === 200)).toHaveLength(1);
      expect(codes.filter((c) => c === 412)).toHaveLength(49);
      const winner = results.find((r) => r.statusCode === 200)?.json() as Basic;
      const history = await app.inject({ method: 'GET', url: '/fhir/R4/Basic/race/_history' });
      expect(history.json().entry.map((e: { resource: Basic }) => e.resource.meta?.versionId)).toEqual(['2', '1']);
      const current = (await app.inject({ method: 'GET', url: '/fhir/R4/Basic/race' })).json() as Basic;
      expect(current.code.text).toBe(winner.code.text);
    });

    test('50 clients each adding their mark with read, then If-Match, retrying on 412: no update is lost, no version skipped', async () => {
      expect(
        (
          await app.inject({
            method: 'PUT',
            url: '/fhir/R4/Basic/tally',
            headers: FHIR_JSON,
            payload: basic('tally', 'marks:'),
          })
        ).statusCode,
      ).toBe(201);
      await Promise.all(
        Array.from({ length: 50 }, async (_, i) => {
          for (;;) {
            const read = await app.inject({ method: 'GET', url: '/fhir/R4/Basic/tally' });
            const current = read.json() as Basic;
            const next = { ...current, code: { text: `${current.code.text}[${i}]` } };
            const res = await app.inject({
              method: 'PUT',
              url: '/fhir/R4/Basic/tally',
              headers: { ...FHIR_JSON, 'if-match': read.headers.etag as string },
              payload: next,
            });
            if (res.statusCode === 200) return;
            expect(res.statusCode).toBe(412);
          }
        }),
      );
      const final = (await app.inject({ method: 'GET', url: '/fhir/R4/Basic/tally' })).json() as Basic;
      expect(final.meta?.versionId).toBe('51');
      for (let i = 0; i < 50; i++) expect(final.code.text).toContain(`[${i}]`);
      const history = await app.inject({ method: 'GET', url: '/fhir/R4/Basic/tally/_history?_count=100' });
      const versions = history.json().entry.map((e: { resource: Basic }) => Number(e.resource.meta?.versionId));
      expect(versions).toEqual(Array.from({ length: 51 }, (_, i) => 51 - i));
    }, 60_000);
  });
}

racingWriters('SQLite', () => serverApp());
if (hasPostgres) {
  racingWriters('PostgreSQL', async () => {
    const schema = await freshSchema();
    const { app, close } = await serverApp({ databaseUrl: schema.url });
    return {
      app,
      close: async () => {
        await close();
        await schema.drop();
      },
    };
  });
}

/** A TCP proxy to PostgreSQL that a test can take down (dropping every connection) and bring back. */
class Outage {
  private server?: Server;
  private readonly sockets = new Set<Socket>();
  constructor(
    readonly port: number,
    private readonly target: { host: string; port: number },
  ) {}

  up(): Promise<void> {
    this.server = createServer((client) => {
      const upstream = connect(this.target.port, this.target.host);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => s.destroy());
      }
      client.pipe(upstream).pipe(client);
    });
    return new Promise((resolve) => this.server?.listen(this.port, '127.0.0.1', () => resolve()));
  }

  down(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

describe('PostgreSQL going away and coming back', () => {
  if (!hasPostgres) {
    test.skip(POSTGRES_SKIP_REASON, () => undefined);
    return;
  }
  let schema: TestSchema;
  let outage: Outage;
  let app: FastifyInstance;
  let close: () => Promise<void>;
  beforeAll(async () => {
    schema = await freshSchema();
    const real = new URL(TEST_DATABASE_URL as string);
    outage = new Outage(await freePort(), { host: real.hostname, port: Number(real.port || 5432) });
    await outage.up();
    const viaProxy = new URL(schema.url);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(outage.port);
    ({ app, close } = await serverApp({ databaseUrl: viaProxy.toString() }));
  });
  afterAll(async () => {
    await close();
    await outage.down();
    await schema.drop();
  });

  test('503 OperationOutcome while it is away, served again after, without a restart', async () => {
    const write = (marker: string) =>
      app.inject({ method: 'PUT', url: '/fhir/R4/Basic/outage', headers: FHIR_JSON, payload: basic('outage', marker) });
    expect((await write('before')).statusCode).toBe(201);
    await outage.down();
    for (const request of [write('during'), app.inject({ method: 'GET', url: '/fhir/R4/Basic/outage' })]) {
      const res = await request;
      expect(res.statusCode).toBe(503);
      expect(res.headers['retry-after']).toBeDefined();
      const outcome = res.json() as OperationOutcome;
      expect(outcome.issue[0].code).toBe('transient');
    }
    const validate = await app.inject({
      method: 'GET',
      url: '/fhir/R4/ValueSet/$validate-code?url=http://hl7.org/fhir/ValueSet/administrative-gender&system=http://hl7.org/fhir/administrative-gender&code=female',
    });
    expect(validate.statusCode).toBe(503);
    await outage.up();
    const read = await app.inject({ method: 'GET', url: '/fhir/R4/Basic/outage' });
    expect(read.statusCode).toBe(200);
    expect((read.json() as Basic).code.text).toBe('before');
    expect((await write('after')).statusCode).toBe(200);
  }, 30_000);
});
