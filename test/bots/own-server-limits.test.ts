import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { FHIR_JSON, serverApp } from '../helpers/server-app';
import { sandboxPids } from './sandbox-processes';

/**
 * A bot's calls to its own server are answered in-process, not over HTTP: they meet the HTTP
 * layer's body rules all the same (BODY_LIMIT, the depth limit, no NUL, no prototype keys), with
 * the same answers, whether they come through the client or through fetch.
 */

/** The bodies, built the same way here and in the bot (which gets their source). */
const BODIES: Record<string, () => string> = {
  deep: () => '['.repeat(4_000_000) + ']'.repeat(4_000_000),
  large: () => JSON.stringify({ resourceType: 'Patient', name: [{ family: 'x'.repeat(11 * 1024 * 1024) }] }),
  proto: () => '{"resourceType":"Patient","__proto__":{"active":true}}',
};

/** For each body, what fetch and the client get back: [status, the issue's text]. */
const BOT = `export async function handler(medplum) {
  const bodies = { ${Object.entries(BODIES)
    .map(([name, build]) => `${name}: ${build.toString()}`)
    .join(', ')} };
  const viaFetch = async (body) => {
    const res = await fetch(medplum.fhirUrl('Patient'), { method: 'POST', headers: { 'content-type': 'application/fhir+json' }, body });
    return [res.status, (await res.json()).issue?.[0]?.details?.text];
  };
  const viaClient = async (resource) => {
    try { await medplum.createResource(resource); return ['created']; } catch (err) { return [err.status, err.outcome?.issue?.[0]?.details?.text]; }
  };
  let nested = { resourceType: 'Patient' };
  for (let i = 0; i < 100; i++) nested = { resourceType: 'Patient', contained: [nested] };
  return {
    fetch: { deep: await viaFetch(bodies.deep()), large: await viaFetch(bodies.large()), proto: await viaFetch(bodies.proto()) },
    client: { large: await viaClient(JSON.parse(bodies.large())), nested: await viaClient(nested) },
  };
}`;

describe("a bot's calls to its own server", () => {
  let server: ServerApp;
  beforeAll(async () => {
    server = await serverApp();
  });
  afterAll(async () => {
    await server?.close();
    expect(sandboxPids()).toEqual([]);
  });

  /** What an HTTP client gets for the same body. */
  async function overHttp(body: string): Promise<[number, string]> {
    const res = await server.app.inject({ method: 'POST', url: '/fhir/R4/Patient', headers: FHIR_JSON, payload: body });
    return [res.statusCode, res.json().issue?.[0]?.details?.text];
  }

  test('meet the HTTP limits: the same 4xx and outcome as over HTTP, and the server keeps answering', async () => {
    const inject = (
      method: 'PUT' | 'POST',
      url: string,
      payload: object,
      headers: Record<string, string> = FHIR_JSON,
    ) => server.app.inject({ method, url: `/fhir/R4/${url}`, headers, payload });
    expect(
      (await inject('PUT', 'Bot/limits', { resourceType: 'Bot', id: 'limits', name: 'limits', timeout: 60 }))
        .statusCode,
    ).toBeLessThan(300);
    const deployed = await inject(
      'POST',
      'Bot/limits/$deploy',
      { code: BOT, filename: 'limits.js' },
      { 'content-type': 'application/json' },
    );
    expect(deployed.statusCode, deployed.body).toBe(200);
    const res = await inject('POST', 'Bot/limits/$execute', { x: 1 });
    expect(res.statusCode, res.body).toBe(200);
    const answer = res.json();

    const http: Record<string, [number, string]> = {};
    for (const [name, build] of Object.entries(BODIES)) http[name] = await overHttp(build());
    expect(http.deep[0]).toBe(400);
    expect(http.large[0]).toBe(413);
    expect(http.proto[0]).toBe(400);
    expect(answer.fetch).toEqual(http);
    expect(answer.client.large).toEqual(http.large);
    expect(answer.client.nested).toEqual([400, 'The request body is nested more than 64 levels deep']);
    expect((await server.app.inject({ method: 'GET', url: '/fhir/R4/metadata' })).statusCode).toBe(200);
  });
});
