import { connect } from 'node:net';
import type { OperationOutcome } from 'fhir/r4';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { freePort, startServer, waitForServer } from '../helpers/process';
import { FHIR_JSON, onBothBackends, putResource, serverApp } from '../helpers/server-app';
import { stopServer } from './write-stream';

/** What is refused at the edge, before it can cost the server time or reach the storage. */

const outcome = (body: string) => JSON.parse(body) as OperationOutcome;

/**
 * A POST over a raw socket, reading the answer even when the server gives it (and closes) before
 * the body has been sent in full, which is what a refusal of a body still arriving looks like;
 * fetch reports EPIPE then instead of the answer.
 */
function postEarly(
  port: number,
  path: string,
  body: string,
): Promise<{ status: number; body: string; answeredAt: number }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    // When the answer's first bytes arrived (the socket closes later: the client is still writing).
    let answeredAt = 0;
    socket.on('connect', () => {
      socket.write(
        `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/fhir+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`,
      );
      socket.write(body);
    });
    socket.on('data', (chunk) => {
      answeredAt ||= Date.now();
      received += chunk;
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      const match = /^HTTP\/1\.1 (\d{3})[^]*?\r\n\r\n([^]*)$/.exec(received);
      if (!match) return reject(new Error(`no answer: ${received.slice(0, 200)}`));
      resolve({ status: Number(match[1]), body: match[2], answeredAt });
    });
  });
}

describe('a 10 MB deeply nested body', () => {
  test('is refused as too deep before it is parsed, and a parallel request is answered', async () => {
    const port = await freePort();
    const server = startServer({ LOG_LEVEL: 'warn', DATA_DIR: ':memory:' }, port);
    try {
      await waitForServer(server);
      // Unterminated, as an attacker sends it: a parser meets the end only after walking it all, so
      // only a refusal before parsing names the depth (JSON.parse would say the input ended).
      const body = '['.repeat(10_000_000);
      const started = Date.now();
      const [nested, metadata] = await Promise.all([
        postEarly(port, '/fhir/R4/ValueSet/$validate-code', body).then((answer) => ({
          ...answer,
          ms: answer.answeredAt - started,
        })),
        fetch(`${server.base}/metadata`).then(async (r) => ({
          status: r.status,
          type: ((await r.json()) as { resourceType: string }).resourceType,
        })),
      ]);
      expect(nested.status).toBe(400);
      expect(outcome(nested.body).issue[0].details?.text).toBe('The request body is nested more than 64 levels deep');
      expect(metadata).toEqual({ status: 200, type: 'CapabilityStatement' });
      // And on a resource route too.
      const put = await postEarly(port, '/fhir/R4/Basic', body);
      expect(put.status).toBe(400);
      expect(outcome(put.body).issue[0].code).toBe('structure');
      console.info(`10 MB nested body answered 400 ${nested.ms} ms after its first byte was sent (loopback)`);
    } finally {
      await stopServer(server, 'SIGTERM');
    }
  }, 60_000);
});

describe('paging an expansion', () => {
  let app: FastifyInstance;
  let close: () => Promise<void>;
  beforeAll(async () => {
    ({ app, close } = await serverApp());
  });
  afterAll(() => close());
  const gender = 'url=http://hl7.org/fhir/ValueSet/administrative-gender';

  test.each(['count=-1', 'offset=-1', 'count=-2147483648&offset=0', 'offset=-3&count=2'])(
    'a negative %s is 400 naming it',
    async (paging) => {
      const res = await app.inject({ method: 'GET', url: `/fhir/R4/ValueSet/$expand?${gender}&${paging}` });
      expect(res.statusCode, res.body).toBe(400);
      const name = /(count|offset)=-/.exec(paging)?.[1];
      expect(outcome(res.body).issue[0].details?.text).toMatch(
        new RegExp(`^Parameter '${name}' value '-\\d+' is not a valid integer of 0 or more$`),
      );
    },
  );

  test('in a POST as well; 0 and positive values page as before', async () => {
    const post = await app.inject({
      method: 'POST',
      url: '/fhir/R4/ValueSet/$expand',
      headers: FHIR_JSON,
      payload: {
        resourceType: 'Parameters',
        parameter: [
          { name: 'url', valueUri: 'http://hl7.org/fhir/ValueSet/administrative-gender' },
          { name: 'offset', valueInteger: -1 },
        ],
      },
    });
    expect(post.statusCode).toBe(400);
    const page = await app.inject({ method: 'GET', url: `/fhir/R4/ValueSet/$expand?${gender}&offset=1&count=2` });
    expect(page.statusCode).toBe(200);
    expect(page.json().expansion.contains.map((c: { code: string }) => c.code)).toEqual(['female', 'other']);
    const none = await app.inject({ method: 'GET', url: `/fhir/R4/ValueSet/$expand?${gender}&count=0` });
    expect(none.json().expansion).toMatchObject({ total: 4 });
    expect(none.json().expansion.contains).toBeUndefined();
  });
});

function nulSuite(name: string, open: () => Promise<{ app: FastifyInstance; close: () => Promise<void> }>) {
  describe(`a NUL character (${name})`, () => {
    let app: FastifyInstance;
    let close: () => Promise<void>;
    const vs = {
      resourceType: 'ValueSet',
      id: 'nul-vs',
      url: 'http://example.org/nul',
      version: '1',
      status: 'active',
    } as const;
    beforeAll(async () => {
      ({ app, close } = await open());
      await putResource(app, vs);
    });
    afterAll(() => close());

    const expectRefused = (res: { statusCode: number; body: string }) => {
      expect(res.statusCode, res.body).toBe(400);
      const issue = outcome(res.body).issue[0];
      expect(issue.details?.text).toMatch(/NUL character/);
    };

    test.each([
      '/fhir/R4/ValueSet?url=http://example.org/nul%00',
      '/fhir/R4/ValueSet?version=1%00',
      '/fhir/R4/ValueSet?_id=nul-vs%00',
      '/fhir/R4/ValueSet/nul%00vs',
      '/fhir/R4/ValueSet/nul-vs/_history/1%00',
      '/fhir/R4/ValueSet/$validate-code?url=http://example.org/nul%00&code=x&system=http://x',
      '/fhir/R4/ValueSet/$expand?url=http://example.org/nul&filter=a%00',
      '/fhir/R4/CodeSystem/$lookup?system=http://x%00&code=y',
    ])('in the URL %s is 400', async (url) => {
      expectRefused(await app.inject({ method: 'GET', url }));
    });

    test('in a POSTed operation parameter or a resource body is 400, and nothing changes', async () => {
      const params = {
        resourceType: 'Parameters',
        parameter: [
          { name: 'url', valueUri: 'http://example.org/nul\u0000' },
          { name: 'code', valueCode: 'x' },
        ],
      };
      expectRefused(
        await app.inject({
          method: 'POST',
          url: '/fhir/R4/ValueSet/$validate-code',
          headers: FHIR_JSON,
          payload: JSON.stringify(params),
        }),
      );
      const changed = { ...vs, url: 'http://example.org/nul\u0000x' };
      expectRefused(
        await app.inject({
          method: 'PUT',
          url: '/fhir/R4/ValueSet/nul-vs',
          headers: FHIR_JSON,
          payload: JSON.stringify(changed),
        }),
      );
      expectRefused(
        await app.inject({
          method: 'POST',
          url: '/fhir/R4/ValueSet',
          headers: FHIR_JSON,
          payload: JSON.stringify({ ...changed, id: undefined }),
        }),
      );
      const read = await app.inject({ method: 'GET', url: '/fhir/R4/ValueSet/nul-vs' });
      expect(read.statusCode).toBe(200);
      expect(read.json()).toMatchObject({ url: 'http://example.org/nul', meta: { versionId: '1' } });
    });

    test('written as an escaped backslash followed by u0000 is text, not a NUL, and is stored', async () => {
      const text = {
        ...vs,
        id: 'not-nul',
        url: 'http://example.org/not-nul',
        description: 'a literal \\u0000 in prose',
      };
      await putResource(app, text);
      const read = await app.inject({ method: 'GET', url: '/fhir/R4/ValueSet/not-nul' });
      expect(read.json().description).toBe('a literal \\u0000 in prose');
    });
  });
}

onBothBackends((backend, open) =>
  nulSuite(backend, async () => {
    const { server, cleanup } = await open();
    return { app: server.app, close: cleanup };
  }),
);
