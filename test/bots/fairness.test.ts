import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { FairSlots } from '../../src/bots/slots';
import { FHIR_JSON, serverApp } from '../helpers/server-app';
import { sandboxPids } from './sandbox-processes';

/**
 * The sandbox's slots are shared fairly: one project's long-running bots hold at most its share
 * (BOT_SLOTS_PER_PROJECT), wait beyond it (429 once its queue is full), and never keep another
 * project's bot from running.
 */

describe('FairSlots', () => {
  test('a freed slot goes to the next project in turn, not to whoever queued first', async () => {
    const slots = new FairSlots({ slots: 2, perProject: 2, queuePerProject: 10 });
    const held = [await slots.acquire('A'), await slots.acquire('A')];
    const served: string[] = [];
    for (const project of ['A', 'A', 'B', 'C']) {
      void slots.acquire(project).then((release) => {
        served.push(project);
        held.push(release);
      });
    }
    for (let turn = 1; turn <= 4; turn++) {
      (held.shift() as () => void)();
      await vi.waitFor(() => expect(served).toHaveLength(turn));
    }
    expect(served).toEqual(['A', 'B', 'C', 'A']);
    for (const release of held) release();
  });

  test('a project at its share waits while another starts at once; past its queue it is refused 429', async () => {
    const slots = new FairSlots({ slots: 4, perProject: 2, queuePerProject: 1 });
    await slots.acquire('A');
    await slots.acquire('A');
    let third = false;
    void slots.acquire('A').then(() => (third = true));
    await expect(slots.acquire('A')).rejects.toMatchObject({ status: 429, headers: { 'retry-after': '5' } });
    await slots.acquire('B');
    expect(third).toBe(false);
  });
});

describe('bots of two projects', () => {
  let server: ServerApp;
  let holder: Server;
  let origin = '';
  /** A's bots fetch here and wait until the test lets them go. */
  const held: ServerResponse[] = [];
  let holding = true;
  let heldChanged: () => void = () => undefined;
  const answer = (res: ServerResponse) => res.writeHead(200, { 'content-type': 'text/plain' }).end('go');

  beforeAll(async () => {
    holder = createServer((_req: IncomingMessage, res: ServerResponse) => {
      if (!holding) return answer(res);
      held.push(res);
      heldChanged();
    });
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(holder.address() as AddressInfo).port}`;
    server = await serverApp({
      botFetchAllow: [origin],
      outboundAllowPrivate: true,
      botSlotsPerProject: 8,
      botQueuePerProject: 9,
    });
  });
  afterAll(async () => {
    holding = false;
    for (const res of held.splice(0)) answer(res);
    await server?.close();
    expect(sandboxPids()).toEqual([]);
    holder.closeAllConnections();
    await new Promise((resolve) => holder.close(resolve));
  });

  const inject = (
    method: 'PUT' | 'POST',
    url: string,
    project: string,
    payload: object,
    headers: Record<string, string> = FHIR_JSON,
  ) => server.app.inject({ method, url: `/fhir/R4/${url}`, headers: { ...headers, 'x-project': project }, payload });
  async function project(name: string): Promise<string> {
    const res = await server.app.inject({
      method: 'POST',
      url: '/fhir/R4/Project/$init',
      headers: FHIR_JSON,
      payload: { resourceType: 'Parameters', parameter: [{ name: 'name', valueString: name }] },
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as string;
  }
  async function deploy(projectId: string, id: string, body: string): Promise<void> {
    expect(
      (await inject('PUT', `Bot/${id}`, projectId, { resourceType: 'Bot', id, name: id, timeout: 60 })).statusCode,
    ).toBeLessThan(300);
    const code = `export async function handler(medplum, event) { ${body} }`;
    const res = await inject(
      'POST',
      `Bot/${id}/$deploy`,
      projectId,
      { code, filename: `${id}.js` },
      { 'content-type': 'application/json' },
    );
    expect(res.statusCode, res.body).toBe(200);
  }
  const until = (count: number) =>
    new Promise<void>((resolve) => {
      heldChanged = () => held.length >= count && resolve();
      heldChanged();
    });

  test("project A's long bots past its share wait or are refused; project B's bot runs at once", async () => {
    const a = await project('fair A');
    const b = await project('fair B');
    await deploy(a, 'long', "await fetch(event.input.origin + '/hold'); return 'a done';");
    await deploy(b, 'quick', "return 'b done';");
    // 17 of A's: 8 run (its share of 16 slots) and 9 wait (its queue); an 18th is refused.
    let aSettled = 0;
    const aRuns = Array.from({ length: 17 }, () =>
      inject('POST', 'Bot/long/$execute', a, { origin }).then((res) => (aSettled++, res)),
    );
    await until(8);
    const quick = await inject('POST', 'Bot/quick/$execute', b, { x: 1 });
    expect(quick.statusCode, quick.body).toBe(200);
    expect(quick.body).toBe('b done');
    // B's bot finished while every one of A's was still running or waiting.
    expect(aSettled).toBe(0);
    expect(held).toHaveLength(8);
    const refused = await inject('POST', 'Bot/long/$execute', a, { origin });
    expect(refused.statusCode, refused.body).toBe(429);
    expect(refused.headers['retry-after']).toBe('5');
    expect(refused.json().issue[0].code).toBe('throttled');
    holding = false;
    for (const res of held.splice(0)) answer(res);
    const results = await Promise.all(aRuns);
    expect(results.map((res) => res.statusCode)).toEqual(Array(17).fill(200));
  });
});
