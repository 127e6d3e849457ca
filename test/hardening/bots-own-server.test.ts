import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { FHIR_JSON, serverApp } from '../helpers/server-app';
import { sandboxPids } from '../bots/sandbox-processes';

/**
 * A bot posting a 4,000,000-deep body to its own server is refused before anything parses it:
 * the server's event loop is not held (it once was, 2 s per call). The bound is generous, for a
 * loaded 2-core machine; the stall it guards against was larger.
 */

const CALLS = 3;
const BOT = `export async function handler(medplum) {
  const deep = '['.repeat(4_000_000) + ']'.repeat(4_000_000);
  const statuses = [];
  for (let i = 0; i < ${CALLS}; i++) {
    const res = await fetch(medplum.fhirUrl('Patient'), { method: 'POST', headers: { 'content-type': 'application/fhir+json' }, body: deep });
    statuses.push(res.status);
  }
  return statuses;
}`;

describe("a bot's deep body to its own server", () => {
  let server: ServerApp;
  beforeAll(async () => {
    server = await serverApp();
  });
  afterAll(async () => {
    await server?.close();
    expect(sandboxPids()).toEqual([]);
  });

  test('is 400 each time, and the event loop is never held for a second', async () => {
    const inject = (
      method: 'PUT' | 'POST',
      url: string,
      payload: object,
      headers: Record<string, string> = FHIR_JSON,
    ) => server.app.inject({ method, url: `/fhir/R4/${url}`, headers, payload });
    expect(
      (await inject('PUT', 'Bot/deep', { resourceType: 'Bot', id: 'deep', name: 'deep', timeout: 120 })).statusCode,
    ).toBeLessThan(300);
    expect(
      (
        await inject(
          'POST',
          'Bot/deep/$deploy',
          { code: BOT, filename: 'deep.js' },
          { 'content-type': 'application/json' },
        )
      ).statusCode,
    ).toBe(200);
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    const res = await inject('POST', 'Bot/deep/$execute', { x: 1 });
    delay.disable();
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual(Array(CALLS).fill(400));
    const maxMs = delay.max / 1e6;
    console.log(`${CALLS} calls with a 4,000,000-deep body: the event loop's longest delay ${maxMs.toFixed(0)} ms`);
    expect(maxMs).toBeLessThan(1000);
  });
});
