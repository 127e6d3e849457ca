import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ERRORS } from '../../src/fhir/errors';
import { FHIR, parameters, testApp, type TestApp } from '../helpers/app';

let t: TestApp;
beforeAll(async () => {
  t = await testApp({ config: { bodyLimit: 64 * 1024, logLevel: 'info' } });
});
afterAll(() => t.close());

/** Every failure is an OperationOutcome, as application/fhir+json, with an error issue. */
function expectOutcome(
  res: { statusCode: number; headers: Record<string, unknown>; body: string },
  status: number,
  code?: string,
) {
  expect(res.statusCode).toBe(status);
  expect(String(res.headers['content-type'])).toMatch(/^application\/fhir\+json/);
  const outcome = JSON.parse(res.body);
  expect(outcome.resourceType).toBe('OperationOutcome');
  expect(outcome.issue[0].severity).toBe('error');
  expect(typeof outcome.issue[0].details.text).toBe('string');
  if (code) expect(outcome.issue[0].code).toBe(code);
  expect(res.body).not.toMatch(/"stack"|at .*\.ts:\d+|node_modules|FST_/);
  return outcome.issue[0].details.text as string;
}

describe('every failure answers with an OperationOutcome', () => {
  test('unknown route', async () => {
    const text = expectOutcome(await t.app.inject({ method: 'GET', url: '/nowhere' }), 404, 'not-found');
    expect(text).toBe('There is no GET /nowhere on this server');
  });

  test('unknown resource type', async () => {
    expectOutcome(await t.app.inject({ method: 'GET', url: '/fhir/R4/Unicorn/1' }), 404, 'not-supported');
    expectOutcome(await t.app.inject({ method: 'POST', url: '/fhir/R4/Unicorn', headers: FHIR, payload: {} }), 404);
  });

  test('bad JSON', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/fhir/R4/$echo',
      headers: FHIR,
      payload: '{"resourceType": "Parameters",',
    });
    expect(expectOutcome(res, 400, 'structure')).toMatch(/^The request body is not valid JSON/);
  });

  test('an empty body where one is needed', async () => {
    expectOutcome(
      await t.app.inject({ method: 'POST', url: '/fhir/R4/$echo', headers: FHIR, payload: '' }),
      400,
      'required',
    );
  });

  test('JSON nested too deep is refused before anything walks it', async () => {
    const deep = '['.repeat(5000) + ']'.repeat(5000);
    expect(
      expectOutcome(await t.app.inject({ method: 'POST', url: '/fhir/R4/$echo', headers: FHIR, payload: deep }), 400),
    ).toMatch(/nested more than/);
  });

  test('prototype-poisoning keys are refused', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/fhir/R4/$echo',
      headers: FHIR,
      payload: '{"resourceType":"Parameters","__proto__":{"x":1}}',
    });
    expectOutcome(res, 400);
  });

  test('a body over BODY_LIMIT is 413', async () => {
    const big = JSON.stringify(parameters({ name: 'text', valueString: 'x'.repeat(70 * 1024) }));
    expectOutcome(
      await t.app.inject({ method: 'POST', url: '/fhir/R4/$echo', headers: FHIR, payload: big }),
      413,
      'too-costly',
    );
  });

  test.each(['text/plain', 'application/xml', 'application/fhir+xml', 'multipart/form-data'])(
    'Content-Type %s is 415',
    async (type) => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/fhir/R4/$echo',
        headers: { 'content-type': type },
        payload: 'x',
      });
      expectOutcome(res, 415, 'not-supported');
    },
  );

  test('a POST without any Content-Type is 415', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/fhir/R4/$echo', payload: Buffer.from('{}') });
    expectOutcome(res, 415);
  });

  test('asking for XML only is 406', async () => {
    expectOutcome(
      await t.app.inject({ method: 'GET', url: '/fhir/R4/metadata', headers: { accept: 'application/fhir+xml' } }),
      406,
    );
    expectOutcome(await t.app.inject({ method: 'GET', url: '/fhir/R4/metadata?_format=xml' }), 406);
    expect(
      (
        await t.app.inject({
          method: 'GET',
          url: '/fhir/R4/metadata',
          headers: { accept: 'application/fhir+json; fhirVersion=4.0' },
        })
      ).statusCode,
    ).toBe(200);
  });

  test('a method a path does not take is 405 with Allow', async () => {
    const res = await t.app.inject({ method: 'DELETE', url: '/fhir/R4/Patient' });
    expectOutcome(res, 405);
    expect(res.headers.allow).toBe('GET, POST');
  });

  test('an unexpected error is 500, logged with its detail on the server only', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/fhir/R4/$misbehave',
      headers: FHIR,
      payload: parameters({ name: 'how', valueCode: 'throw' }),
    });
    expectOutcome(res, 500, 'exception');
    expect(res.body).not.toContain('secret');
    expect(t.logs.join('')).toContain('secret internal detail');
  });

  test('an output that breaks its definition is logged with the reason', async () => {
    await t.app.inject({
      method: 'POST',
      url: '/fhir/R4/$misbehave',
      headers: FHIR,
      payload: parameters({ name: 'how', valueCode: 'undeclared' }),
    });
    expect(t.logs.join('')).toContain("'surprise' is not an output of the definition");
  });

  test('the request id is echoed and logged, one line per request', async () => {
    const before = t.logs.length;
    const res = await t.app.inject({ method: 'GET', url: '/fhir/R4/metadata', headers: { 'x-request-id': 'abc-123' } });
    expect(res.headers['x-request-id']).toBe('abc-123');
    const lines = t.logs.slice(before).map((l) => JSON.parse(l));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ reqId: 'abc-123', method: 'GET', url: '/fhir/R4/metadata', status: 200 });
  });

  test('malformed HTTP gets an OperationOutcome, not a default body', async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = t.app.server.address() as { port: number };
    const raw = await new Promise<string>((resolve) => {
      const socket = connect(port, '127.0.0.1', () =>
        socket.write('GET /fhir/R4/metadata HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n'),
      );
      let data = '';
      socket.on('data', (d) => (data += d));
      socket.on('end', () => resolve(data));
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400/);
    expect(raw).toContain('application/fhir+json');
    expect(raw).toContain('"resourceType":"OperationOutcome"');
  });
});

describe('the error catalogue', () => {
  test('every code has a 4xx/5xx status, an issue code and a message', () => {
    for (const [code, entry] of Object.entries(ERRORS)) {
      expect(code).toMatch(/^ERR_[A-Z]+_[A-Z_]+$/);
      expect(entry.status).toBeGreaterThanOrEqual(400);
      expect(entry.status).toBeLessThan(600);
      expect(entry.issue).toMatch(/^[a-z-]+$/);
    }
  });

  test('docs/errors.md documents every code with its status and issue code', () => {
    const catalogue = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
    for (const [code, entry] of Object.entries(ERRORS)) {
      expect(catalogue).toContain(`| \`${code}\` | ${entry.status} | \`${entry.issue}\` |`);
    }
  });
});
