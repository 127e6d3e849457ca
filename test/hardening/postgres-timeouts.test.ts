import { connect, createServer, type Server, type Socket } from 'node:net';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import type { OperationOutcome } from 'fhir/r4';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  freshSchema,
  hasPostgres,
  POSTGRES_SKIP_REASON,
  TEST_DATABASE_URL,
  type TestSchema,
} from '../helpers/postgres';
import { freePort } from '../helpers/process';
import { FHIR_JSON, serverApp } from '../helpers/server-app';

/**
 * A PostgreSQL that is slow or silent never holds a request for longer than the store's statement
 * time (DATABASE_STATEMENT_TIMEOUT_MS, 500 ms here): a statement waiting on another session's lock
 * is cancelled by the database, and a database that answers nothing at all is given up by the
 * client 2 s later; either answers 503 `timeout` with Retry-After, and the next request after is served.
 */

const STATEMENT_MS = 500;
/** Generous for a busy machine: the 500 ms (or 2.5 s) the server waits, and the rest. */
const ANSWER_WITHIN_MS = 10_000;

/** The answer, or 'no answer' once `ms` passed (the request is left to finish on its own). */
async function answerWithin(
  request: Promise<LightMyRequestResponse>,
  ms: number,
): Promise<LightMyRequestResponse | 'no answer'> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<'no answer'>((resolve) => (timer = setTimeout(() => resolve('no answer'), ms)));
  try {
    return await Promise.race([request, bound]);
  } finally {
    clearTimeout(timer);
  }
}

function expectTimeoutAnswer(answer: LightMyRequestResponse | 'no answer'): void {
  expect(answer, 'the request was still waiting').not.toBe('no answer');
  const res = answer as LightMyRequestResponse;
  expect(res.statusCode, res.body).toBe(503);
  expect(res.headers['retry-after']).toBeDefined();
  const outcome = res.json() as OperationOutcome;
  expect(outcome.resourceType).toBe('OperationOutcome');
  expect(outcome.issue[0].code).toBe('timeout');
}

/** A TCP proxy to PostgreSQL that can go silent: connections stay open, nothing passes either way. */
class BlackHole {
  private server?: Server;
  private readonly sockets = new Set<Socket>();
  private silent = false;
  constructor(
    readonly port: number,
    private readonly target: { host: string; port: number },
  ) {}

  start(): Promise<void> {
    this.server = createServer((client) => {
      const upstream = connect(this.target.port, this.target.host);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => s.destroy());
      }
      client.on('data', (d) => this.silent || upstream.write(d));
      upstream.on('data', (d) => this.silent || client.write(d));
      client.on('end', () => upstream.end());
      upstream.on('end', () => client.end());
    });
    return new Promise((resolve) => this.server?.listen(this.port, '127.0.0.1', () => resolve()));
  }

  /** From now on every byte is dropped, as a route that black-holes packets would. */
  goSilent(): void {
    this.silent = true;
  }

  /** Back to normal; the connections that went silent are closed (their sessions are gone). */
  restore(): void {
    for (const s of this.sockets) s.destroy();
    this.silent = false;
  }

  stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

describe('PostgreSQL statement and client timeouts', () => {
  if (!hasPostgres) {
    test.skip(POSTGRES_SKIP_REASON, () => undefined);
    return;
  }
  let schema: TestSchema;
  let proxy: BlackHole;
  let app: FastifyInstance;
  let close: () => Promise<void>;

  beforeAll(async () => {
    schema = await freshSchema();
    const real = new URL(TEST_DATABASE_URL as string);
    proxy = new BlackHole(await freePort(), { host: real.hostname, port: Number(real.port || 5432) });
    await proxy.start();
    const viaProxy = new URL(schema.url);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    ({ app, close } = await serverApp({ databaseUrl: viaProxy.toString(), databaseStatementTimeoutMs: STATEMENT_MS }));
  });

  afterAll(async () => {
    await close?.();
    await proxy?.stop();
    await schema?.drop();
  });

  const read = () => app.inject({ method: 'GET', url: '/fhir/R4/Basic/slow' });
  const write = (text: string) =>
    app.inject({
      method: 'PUT',
      url: '/fhir/R4/Basic/slow',
      headers: FHIR_JSON,
      payload: { resourceType: 'Basic', id: 'slow', code: { text } },
    });

  test("a statement waiting on another session's lock answers 503 timeout, and the next is served", async () => {
    expect((await write('before')).statusCode).toBe(201);
    const locker = new pg.Client({ connectionString: schema.url });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE resources IN ACCESS EXCLUSIVE MODE');
      expectTimeoutAnswer(await answerWithin(read(), ANSWER_WITHIN_MS));
      expectTimeoutAnswer(await answerWithin(write('during'), ANSWER_WITHIN_MS));
      await locker.query('ROLLBACK');
    } finally {
      await locker.end();
    }
    const after = await read();
    expect(after.statusCode).toBe(200);
    expect(after.json().code.text).toBe('before');
  }, 60_000);

  test('a database that answers nothing answers 503 timeout, and the next is served once it is back', async () => {
    expect((await write('before silence')).statusCode).toBeLessThan(300);
    proxy.goSilent();
    try {
      const started = Date.now();
      expectTimeoutAnswer(await answerWithin(read(), ANSWER_WITHIN_MS));
      console.log(
        `a read against a silent database answered 503 after ${Date.now() - started} ms (statement timeout ${STATEMENT_MS} ms)`,
      );
    } finally {
      proxy.restore();
    }
    const after = await read();
    expect(after.statusCode).toBe(200);
    expect(after.json().code.text).toBe('before silence');
  }, 60_000);
});
