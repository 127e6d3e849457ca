import type { Bundle, Resource } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { FHIR_JSON, serverApp } from '../helpers/server-app';

/**
 * One front door: an operation answers alike whether it comes over HTTP, as an entry of a batch
 * or transaction Bundle, or from a bot's fetch of this server's API (all three go through the
 * REST core's operation interaction). Project/$init is the operation that answers a resource it
 * created (`created`): 201 with the Location of the new version, whatever the door.
 */

const BASE = '/fhir/R4';

/** The Parameters of `Project/$init` for a project named `name` (no owner: an operator's call). */
function initParameters(name: string) {
  return { resourceType: 'Parameters', parameter: [{ name: 'name', valueString: name }] };
}

/** What a door answered, with the Location relative to the FHIR base (a Bundle entry's form). */
interface Answer {
  status: number;
  location?: string;
  resource: Resource;
}

describe('an operation answers alike through every door', () => {
  let server: ServerApp;
  let base: string;

  beforeAll(async () => {
    server = await serverApp();
    const metadata = await server.app.inject({ method: 'GET', url: `${BASE}/metadata` });
    base = (metadata.json() as { implementation?: { url?: string } }).implementation?.url ?? `http://localhost${BASE}`;
    const bot = await server.app.inject({
      method: 'PUT',
      url: `${BASE}/Bot/init-door`,
      headers: FHIR_JSON,
      payload: { resourceType: 'Bot', id: 'init-door', name: 'init-door', runAsUser: true },
    });
    expect(bot.statusCode, bot.body).toBeLessThan(300);
    // The bot calls the operation with fetch, as any HTTP client would, and hands back what it saw.
    const code = `export async function handler(medplum, event) {
      const res = await fetch(medplum.fhirUrl('Project', '$init'), { method: 'POST', headers: { 'content-type': 'application/fhir+json' }, body: JSON.stringify(event.input) });
      return { status: res.status, location: res.headers.get('location'), resource: await res.json() };
    }`;
    const deployed = await server.app.inject({
      method: 'POST',
      url: `${BASE}/Bot/init-door/$deploy`,
      headers: { 'content-type': 'application/json' },
      payload: { code, filename: 'init-door.js' },
    });
    expect(deployed.statusCode, deployed.body).toBe(200);
  });
  afterAll(() => server?.close());

  const relative = (location: string | null | undefined) =>
    location ? location.replace(`${base}/`, '').replace(/^https?:\/\/[^/]+\/fhir\/R4\//, '') : undefined;

  async function overHttp(name: string): Promise<Answer> {
    const res = await server.app.inject({
      method: 'POST',
      url: `${BASE}/Project/$init`,
      headers: FHIR_JSON,
      payload: initParameters(name),
    });
    return {
      status: res.statusCode,
      location: relative(res.headers.location as string | undefined),
      resource: res.json() as Resource,
    };
  }

  async function asBundleEntry(name: string, type: 'batch' | 'transaction'): Promise<Answer> {
    const bundle = {
      resourceType: 'Bundle',
      type,
      entry: [{ resource: initParameters(name), request: { method: 'POST', url: 'Project/$init' } }],
    };
    const res = await server.app.inject({ method: 'POST', url: BASE, headers: FHIR_JSON, payload: bundle });
    expect(res.statusCode, res.body).toBe(200);
    const entry = (res.json() as Bundle).entry?.[0];
    return {
      status: Number.parseInt(entry?.response?.status ?? '0', 10),
      location: relative(entry?.response?.location),
      resource: entry?.resource as Resource,
    };
  }

  async function fromBot(name: string): Promise<Answer> {
    const res = await server.app.inject({
      method: 'POST',
      url: `${BASE}/Bot/init-door/$execute`,
      headers: FHIR_JSON,
      payload: initParameters(name),
    });
    expect(res.statusCode, res.body).toBe(200);
    const seen = res.json() as { status: number; location: string | null; resource: Resource };
    return { status: seen.status, location: relative(seen.location), resource: seen.resource };
  }

  const doors: [string, (name: string) => Promise<Answer>][] = [
    ['HTTP', overHttp],
    ['a batch entry', (name) => asBundleEntry(name, 'batch')],
    ['a transaction entry', (name) => asBundleEntry(name, 'transaction')],
    ['a bot', fromBot],
  ];

  test.each(doors)('Project/$init through %s: 201, and the Location of the new Project', async (door, call) => {
    const answer = await call(`through ${door}`);
    expect(answer.status).toBe(201);
    expect(answer.resource.resourceType).toBe('Project');
    expect(answer.location).toBe(`Project/${answer.resource.id}/_history/${answer.resource.meta?.versionId ?? 1}`);
    const stored = await server.app.inject({ method: 'GET', url: `${BASE}/${answer.location}` });
    expect(stored.statusCode, stored.body).toBe(200);
  });

  test('every door answers the same status and the same headers', async () => {
    const answers = await Promise.all(doors.map(([door, call]) => call(`alike ${door}`)));
    const shapes = answers.map((a) => ({
      status: a.status,
      location: a.location?.replace(a.resource.id as string, '{id}'),
    }));
    for (const shape of shapes) expect(shape).toEqual(shapes[0]);
  });
});
