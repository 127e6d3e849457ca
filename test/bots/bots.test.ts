import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AuditEvent, Bundle, Observation, Patient, Resource } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { executeBot } from '../../src/bots/service';
import { internalContext } from '../../src/context/request-context';
import { FHIR_JSON, onBothBackends, serverApp, type OpenServer } from '../helpers/server-app';

/**
 * Bots end to end, on both backends: $deploy from TypeScript, $execute with every input kind, the
 * bot's client acting inside the server as the bot, AuditEvents, and hostile code that must fail
 * cleanly while the server keeps answering.
 */

const HELLO_TS = `
import { BotEvent, MedplumClient } from '@medplum/core';
import type { Patient } from '@medplum/fhirtypes';

export async function handler(medplum: MedplumClient, event: BotEvent<Patient>): Promise<boolean> {
  const patient = event.input as Patient;
  const firstName: string | undefined = patient.name?.[0]?.given?.[0];
  const lastName: string | undefined = patient.name?.[0]?.family;
  console.log(\`Hello \${firstName} \${lastName}\`);
  return true;
}
`;

const BMI_TS = `
import { MedplumClient, BotEvent, createReference } from '@medplum/core';
import type { Observation, Patient } from '@medplum/fhirtypes';

export async function handler(medplum: MedplumClient, event: BotEvent<Patient>): Promise<Observation> {
  const patient = event.input as Patient;
  const subject = 'Patient/' + patient.id;
  const latest = (code: string) => medplum.searchOne('Observation', { subject, code: 'http://loinc.org|' + code, _sort: '-date' });
  const height = await latest('8302-2');
  const weight = await latest('29463-7');
  if (!height || !weight) throw new Error('height and weight are needed');
  const metres = (height.valueQuantity?.value as number) / 100;
  const bmi = Math.round(((weight.valueQuantity?.value as number) / (metres * metres)) * 10) / 10;
  console.log('BMI', bmi);
  return medplum.createResource<Observation>({
    resourceType: 'Observation',
    status: 'final',
    code: { coding: [{ system: 'http://loinc.org', code: '39156-5', display: 'Body mass index (BMI) [Ratio]' }] },
    subject: createReference(patient),
    effectiveDateTime: new Date().toISOString(),
    valueQuantity: { value: bmi, unit: 'kg/m2', system: 'http://unitsofmeasure.org', code: 'kg/m2' },
  });
}
`;

const HOSTILE: [string, string][] = [
  ['while(true){}', 'while (true) {}'],
  ['a promise that never settles', 'await new Promise(() => {});'],
  ['a 1 GB allocation', 'const big = new Uint8Array(1024 * 1024 * 1024); big.fill(1); return big.length;'],
  [
    '1 GB of heap',
    'const keep = []; for (let i = 0; i < 1024; i++) keep.push(new Array(128 * 1024).fill(i + 0.5)); return keep.length;',
  ],
  ["require('fs')", "const fs = require('fs'); return fs.readFileSync('/etc/passwd', 'utf8');"],
  ['process.env', 'return process.env;'],
  [
    "globalThis.constructor.constructor('return process')()",
    "const p = globalThis.constructor.constructor('return process')(); return p.env;",
  ],
  ['await null, then loop forever', 'await null; while (true) {}'],
];

/** Seconds each hostile bot may run (Bot.timeout). */
const HOSTILE_TIMEOUT_S = 2;

function suite(name: string, open: () => Promise<OpenServer>) {
  describe(`bots (${name})`, () => {
    let server: ServerApp;
    let cleanup: () => Promise<void>;
    const inject = (method: string, url: string, payload?: unknown, headers: Record<string, string> = {}) =>
      server.app.inject({
        method: method as 'GET',
        url: `/fhir/R4/${url}`,
        headers: { ...(payload !== undefined && typeof payload !== 'string' ? FHIR_JSON : {}), ...headers },
        payload: payload as object,
      });
    const put = async (resource: Resource, headers: Record<string, string> = {}) => {
      const res = await inject('PUT', `${resource.resourceType}/${resource.id}`, resource, headers);
      expect(res.statusCode, res.body).toBeLessThan(300);
      return res.json() as Resource;
    };
    async function deployBot(
      id: string,
      code: string,
      options: { filename?: string; timeout?: number; headers?: Record<string, string>; extra?: object } = {},
    ) {
      await put(
        { resourceType: 'Bot', id, name: id, timeout: options.timeout, ...options.extra } as Resource,
        options.headers,
      );
      const res = await inject(
        'POST',
        `Bot/${id}/$deploy`,
        { code, filename: options.filename ?? 'index.ts' },
        { 'content-type': 'application/json', ...options.headers },
      );
      expect(res.statusCode, res.body).toBe(200);
      return res.json() as { executableCode?: { url?: string; contentType?: string } };
    }

    beforeAll(async () => {
      ({ server, cleanup } = await open());
      await deployBot('alive', "export async function handler() { return 'alive'; }", { filename: 'alive.js' });
    });
    afterAll(() => cleanup?.());

    test('hello patient: deployed from TypeScript, logs the name, returns true; the AuditEvent holds the log', async () => {
      const bot = await deployBot('hello', HELLO_TS);
      expect(bot.executableCode?.contentType).toBe('application/javascript');
      const binary = await inject('GET', bot.executableCode?.url as string);
      expect(binary.statusCode).toBe(200);
      expect(Buffer.from(binary.json().data, 'base64').toString()).toContain('exports');
      const patient: Patient = { resourceType: 'Patient', name: [{ given: ['Peter'], family: 'Chalmers' }] };
      const res = await inject('POST', 'Bot/hello/$execute', patient);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['content-type']).toContain('application/json');
      expect(res.json()).toBe(true);
      // The AuditEvent is written beside the answer: wait for it.
      let events: AuditEvent[] = [];
      for (let tries = 0; events.length === 0 && tries < 200; tries++) {
        if (tries > 0) await new Promise((resolve) => setTimeout(resolve, 25));
        const audit = await inject('GET', 'AuditEvent?entity=Bot/hello');
        events = ((audit.json() as Bundle).entry ?? []).map((e) => e.resource as AuditEvent);
      }
      expect(events).toHaveLength(1);
      expect(events[0].outcome).toBe('0');
      expect(events[0].outcomeDesc).toContain('Hello Peter Chalmers');
    });

    test('a Subscription whose endpoint is Bot/[id] runs the bot once per matching create, with the resource as input', async () => {
      await deployBot('on-patient', HELLO_TS);
      const tag = randomUUID();
      const sub = await inject('POST', 'Subscription', {
        resourceType: 'Subscription',
        status: 'requested',
        reason: 'run a bot',
        criteria: `Patient?identifier=urn:botsub|${tag}`,
        channel: { type: 'rest-hook', endpoint: 'Bot/on-patient' },
      });
      expect(sub.statusCode, sub.body).toBe(201);
      const refused = await inject('POST', 'Subscription', {
        resourceType: 'Subscription',
        status: 'requested',
        reason: 'x',
        criteria: 'Patient',
        channel: { type: 'rest-hook', endpoint: 'Bot/not a bot' },
      });
      expect(refused.statusCode).toBe(400);
      for (const [given, value] of [
        ['Ada', tag],
        ['Grace', tag],
        ['Nobody', 'other'],
      ]) {
        const created = await inject('POST', 'Patient', {
          resourceType: 'Patient',
          identifier: [{ system: 'urn:botsub', value }],
          name: [{ given: [given], family: 'Sub' }],
        });
        expect(created.statusCode, created.body).toBe(201);
      }
      // Each run writes its AuditEvent beside its answer: wait for the deliveries to be done, then count.
      const deliveries = async () =>
        server.core.repository.store.query<{ state: string; input: string }>(
          "SELECT state, input FROM jobs WHERE kind = 'subscription-delivery'",
          [],
        );
      for (;;) {
        const mine = (await deliveries()).filter((j) => j.input.includes(`"${(sub.json() as Resource).id}"`));
        if (mine.length === 2 && mine.every((j) => j.state === 'done')) break;
        expect(mine.some((j) => j.state === 'dead')).toBe(false);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      let logs: string[] = [];
      for (let tries = 0; logs.length < 2 && tries < 400; tries++) {
        if (tries > 0) await new Promise((resolve) => setTimeout(resolve, 25));
        const audit = await inject('GET', 'AuditEvent?entity=Bot/on-patient');
        logs = ((audit.json() as Bundle).entry ?? []).map((e) => (e.resource as AuditEvent).outcomeDesc ?? '');
      }
      expect(logs.map((l) => /Hello \w+ Sub/.exec(l)?.[0]).sort()).toEqual(['Hello Ada Sub', 'Hello Grace Sub']);
    });

    test("the bot's own ProjectMembership is created at deploy, once", async () => {
      await deployBot('hello', HELLO_TS);
      const members = await inject('GET', 'ProjectMembership?user=Bot/hello');
      expect((members.json() as Bundle).entry).toHaveLength(1);
    });

    test('BMI: reads the latest height and weight through its client and creates a BMI Observation', async () => {
      await put({ resourceType: 'Patient', id: 'bmi-patient', name: [{ family: 'Mass' }] } as Patient);
      const obs = (id: string, code: string, value: number, unit: string, date: string): Observation => ({
        resourceType: 'Observation',
        id,
        status: 'final',
        code: { coding: [{ system: 'http://loinc.org', code }] },
        subject: { reference: 'Patient/bmi-patient' },
        effectiveDateTime: date,
        valueQuantity: { value, unit, system: 'http://unitsofmeasure.org', code: unit },
      });
      await put(obs('h-old', '8302-2', 150, 'cm', '2020-01-01'));
      await put(obs('h-new', '8302-2', 180, 'cm', '2024-01-01'));
      await put(obs('w-old', '29463-7', 60, 'kg', '2020-01-01'));
      await put(obs('w-new', '29463-7', 81, 'kg', '2024-01-01'));
      await deployBot('bmi', BMI_TS);
      const patient = (await inject('GET', 'Patient/bmi-patient')).json() as Patient;
      const res = await inject('POST', 'Bot/bmi/$execute', patient);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['content-type']).toContain('application/fhir+json');
      const created = res.json() as Observation;
      expect(created.id).toBeTruthy();
      expect(created.valueQuantity?.value).toBe(25);
      const found = await inject('GET', 'Observation?code=http://loinc.org|39156-5&subject=Patient/bmi-patient');
      expect(((found.json() as Bundle).entry ?? []).map((e) => e.resource?.id)).toEqual([created.id]);
    });

    test('JavaScript, GET with query parameters, identifier lookup, text and HL7 v2 mirrored, secrets', async () => {
      const code = `export async function handler(medplum, event) {
        if (event.contentType === 'x-application/hl7-v2+er7') return event.input.replace('MSH', 'ACK');
        if (event.contentType === 'text/plain') return 'you said ' + event.input;
        return { input: event.input, contentType: event.contentType, secret: event.secrets.GREETING && event.secrets.GREETING.valueString, bot: event.bot.reference };
      }`;
      await deployBot('echo', code, {
        filename: 'echo.js',
        extra: { identifier: [{ system: 'urn:bots', value: 'echo' }] },
      });
      const get = await inject('GET', 'Bot/echo/$execute?a=1&b=two');
      expect(get.statusCode, get.body).toBe(200);
      expect(get.json()).toMatchObject({ input: { a: '1', b: 'two' }, secret: 'hello from config', bot: 'Bot/echo' });
      const byIdentifier = await inject(
        'POST',
        'Bot/$execute?identifier=urn:bots|echo',
        { x: 1 },
        { 'content-type': 'application/json' },
      );
      expect(byIdentifier.statusCode, byIdentifier.body).toBe(200);
      expect(byIdentifier.json()).toMatchObject({ input: { x: 1 }, contentType: 'application/json' });
      const text = await inject('POST', 'Bot/echo/$execute', 'hi', { 'content-type': 'text/plain' });
      expect(text.statusCode, text.body).toBe(200);
      expect(text.headers['content-type']).toContain('text/plain');
      expect(text.body).toBe('you said hi');
      const hl7 = await inject('POST', 'Bot/echo/$execute', 'MSH|^~\\&|A', {
        'content-type': 'x-application/hl7-v2+er7',
      });
      expect(hl7.statusCode, hl7.body).toBe(200);
      expect(hl7.headers['content-type']).toContain('x-application/hl7-v2+er7');
      expect(hl7.body).toBe('ACK|^~\\&|A');
      expect((await inject('POST', 'Bot/$execute?identifier=urn:bots|nobody', { x: 1 })).statusCode).toBe(404);
    });

    test('text bodies stay 415 outside raw operations', async () => {
      expect((await inject('POST', 'Patient', 'hi', { 'content-type': 'text/plain' })).statusCode).toBe(415);
    });

    test('a syntax error is 400 with its line, and changes nothing', async () => {
      await put({ resourceType: 'Bot', id: 'broken', name: 'broken' } as Resource);
      const res = await inject('POST', 'Bot/broken/$deploy', {
        resourceType: 'Parameters',
        parameter: [
          { name: 'code', valueString: 'export async function handler() {\n  return (1 +;\n}' },
          { name: 'filename', valueString: 'broken.ts' },
        ],
      });
      expect(res.statusCode).toBe(400);
      expect(res.json().issue[0].details.text).toMatch(/line 2/);
      const bot = (await inject('GET', 'Bot/broken')).json();
      expect(bot.executableCode).toBeUndefined();
      expect(bot.meta.versionId).toBe('1');
      const run = await inject('POST', 'Bot/broken/$execute', { x: 1 });
      expect(run.statusCode).toBe(400);
      expect(run.json().issue[0].details.text).toContain('deploy it first');
    });

    test('a Binary changed behind the bot is not run (its hash no longer matches)', async () => {
      const bot = await deployBot('tamper', "export async function handler() { return 'deployed'; }", {
        filename: 'tamper.js',
      });
      expect((await inject('POST', 'Bot/tamper/$execute', { x: 1 })).body).toBe('deployed');
      const id = (bot.executableCode?.url as string).split('/')[1];
      await put({
        resourceType: 'Binary',
        id,
        contentType: 'application/javascript',
        data: Buffer.from("exports.handler = async () => 'swapped';").toString('base64'),
      } as Resource);
      const res = await inject('POST', 'Bot/tamper/$execute', { x: 1 });
      expect(res.statusCode).toBe(400);
      expect(res.json().issue[0].details.text).toContain('no longer holds the code deployed');
    });

    test('a thrown error is 400 with the message and the log', async () => {
      await deployBot(
        'thrower',
        "export async function handler() { console.log('about to fail'); throw new Error('no such thing'); }",
        { filename: 'thrower.js' },
      );
      const res = await inject('POST', 'Bot/thrower/$execute', { x: 1 });
      expect(res.statusCode).toBe(400);
      const issue = res.json().issue[0];
      expect(issue.details.text).toContain('no such thing');
      expect(issue.diagnostics).toContain('about to fail');
    });

    test.each(HOSTILE)(
      '%s fails cleanly with 400 within timeout + 1 s while the server keeps answering',
      async (label, body) => {
        const id = `hostile-${HOSTILE.findIndex(([l]) => l === label)}`;
        await deployBot(id, `export async function handler(medplum, event) { ${body} }`, {
          filename: `${id}.js`,
          timeout: HOSTILE_TIMEOUT_S,
        });
        // A client asking for the CapabilityStatement about every 10 ms while the bot runs (paced, so
        // that the loop itself does not starve the process it measures on a loaded machine).
        let running = true;
        const latencies: number[] = [];
        const loop = (async () => {
          while (running) {
            const asked = Date.now();
            const res = await inject('GET', 'metadata');
            if (res.statusCode === 200) latencies.push(Date.now() - asked);
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
        })();
        const started = Date.now();
        const res = await inject('POST', `Bot/${id}/$execute`, { x: 1 });
        const elapsed = Date.now() - started;
        running = false;
        await loop;
        expect(res.statusCode, res.body).toBe(400);
        expect(res.json().resourceType).toBe('OperationOutcome');
        expect(elapsed).toBeLessThan((HOSTILE_TIMEOUT_S + 1) * 1000);
        expect(latencies.length).toBeGreaterThan(0);
        latencies.sort((a, b) => a - b);
        console.log(
          `${label}: ${latencies.length} GET /metadata answered meanwhile, p99 ${latencies[Math.floor(latencies.length * 0.99)]} ms`,
        );
        // The sandbox is still usable afterwards.
        expect((await inject('POST', 'Bot/alive/$execute', { x: 1 })).body).toBe('alive');
      },
    );

    test('executeBot runs a bot with an input resource for other parts of the server', async () => {
      const answer = await executeBot(
        server.services,
        { reference: 'Bot/hello' },
        { resourceType: 'Patient', name: [{ given: ['Sub'], family: 'Scription' }] },
        internalContext(),
      );
      expect(answer).toMatchObject({ kind: 'json', value: 'true' });
      expect(answer.log).toContain('Hello Sub Scription');
    });

    test('executeBot runs a runAsUser bot as the bot itself: no user called, and the server is no user', async () => {
      const code = `export async function handler(medplum) {
        try {
          await medplum.createResource({ resourceType: 'AccessPolicy', name: 'made by a bot', resource: [{ resourceType: 'Patient' }] });
          return 'created';
        } catch (err) {
          return 'refused: ' + err.status;
        }
      }`;
      await deployBot('as-user', code, { filename: 'as-user.js', extra: { runAsUser: true } });
      // Called by an operator, runAsUser runs it as that operator, who may manage access policies.
      expect((await inject('POST', 'Bot/as-user/$execute', { x: 1 })).body).toBe('created');
      // From inside the server, as its own membership, which may not.
      const answer = await executeBot(server.services, 'Bot/as-user', { resourceType: 'Patient' }, internalContext());
      expect(answer).toMatchObject({ kind: 'text', value: 'refused: 403' });
    });

    test("takes this server's absolute URLs as Medplum's client does: FHIR below the base as the bot, metadata for anyone, nothing else", async () => {
      await put({ resourceType: 'Patient', id: 'abs1', name: [{ family: 'Absolute' }] } as Resource);
      const code = `export async function handler(medplum) {
        const base = medplum.getBaseUrl();
        const origin = base.slice(0, base.indexOf('/', base.indexOf('//') + 2));
        const read = await medplum.get(medplum.fhirUrl('Patient', 'abs1'));
        const search = await medplum.get(medplum.fhirUrl('Patient') + '?family=Absolute');
        const created = await medplum.post(medplum.fhirUrl('Observation'), { resourceType: 'Observation', status: 'final', code: { text: 'absolute' } });
        const metadata = await medplum.get(medplum.fhirUrl('metadata'));
        const relativeMetadata = await medplum.get('metadata');
        const fetched = await fetch(base + '/metadata');
        const smart = await fetch(origin + '/.well-known/smart-configuration');
        // Not a way to act as someone else: a server without tokens takes a tokenless caller for an operator.
        const me = await fetch(origin + '/auth/me');
        let elsewhere;
        try { await medplum.get('http://example.com/fhir/R4/Patient'); } catch (err) { elsewhere = [err.status, err.message]; }
        return {
          read: read.name[0].family,
          search: search.entry.map((e) => e.resource.id),
          created: created.resourceType + ':' + typeof created.id,
          metadata: metadata.resourceType,
          relativeMetadata: relativeMetadata.resourceType,
          fetched: [fetched.status, (await fetched.json()).resourceType],
          smart: [smart.status, typeof (await smart.json()).token_endpoint],
          me: me.status,
          elsewhere,
        };
      }`;
      await deployBot('absolute', code, { filename: 'absolute.js' });
      const res = await inject('POST', 'Bot/absolute/$execute', {}, { 'content-type': 'application/json' });
      expect(res.statusCode, res.body).toBe(200);
      const answer = res.json();
      expect(answer).toEqual({
        read: 'Absolute',
        search: ['abs1'],
        created: 'Observation:string',
        metadata: 'CapabilityStatement',
        relativeMetadata: 'CapabilityStatement',
        fetched: [200, 'CapabilityStatement'],
        smart: [200, 'string'],
        me: 401,
        elsewhere: [404, expect.stringContaining('There is no GET http://example.com/fhir/R4/Patient')],
      });
    });

    test('bots of project A cannot read project B through their client', async () => {
      const init = async (projectName: string) => {
        const res = await inject('POST', 'Project/$init', {
          resourceType: 'Parameters',
          parameter: [{ name: 'name', valueString: projectName }],
        });
        expect(res.statusCode, res.body).toBe(201);
        return res.json().id as string;
      };
      const a = await init('bots A');
      const b = await init('bots B');
      await put({ resourceType: 'Patient', id: 'secret-b', name: [{ family: 'Secret' }] } as Patient, {
        'x-project': b,
      });
      await put({ resourceType: 'Patient', id: 'mine-a', name: [{ family: 'Mine' }] } as Patient, { 'x-project': a });
      const spy = `export async function handler(medplum) {
        const found = (await medplum.searchResources('Patient', {})).map((p) => p.id);
        let read;
        try { read = await medplum.readResource('Patient', 'secret-b'); } catch (err) { read = 'refused: ' + err.status; }
        return { found, read };
      }`;
      await deployBot('spy', spy, { filename: 'spy.js', headers: { 'x-project': a } });
      const res = await inject('POST', 'Bot/spy/$execute', { x: 1 }, { 'x-project': a });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual({ found: ['mine-a'], read: 'refused: 404' });
    });
  });
}

onBothBackends(suite, { botSecrets: { '*': { GREETING: 'hello from config' } } });

describe('bot fetch', () => {
  let server: ServerApp;
  let other: Server;
  let origin = '';
  beforeAll(async () => {
    other = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'x-seen-method': req.method ?? '' });
      res.end(JSON.stringify({ from: 'the allowed origin', path: req.url }));
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
    server = await serverApp({ botFetchAllow: [origin], outboundAllowPrivate: true });
  });
  afterAll(async () => {
    await server?.close();
    await new Promise((resolve) => other.close(resolve));
  });

  test('reaches this server as the bot, the allowed origins, and nothing else', async () => {
    const inject = (method: string, url: string, payload?: object) =>
      server.app.inject({ method: method as 'GET', url: `/fhir/R4/${url}`, headers: FHIR_JSON, payload });
    expect(
      (await inject('PUT', 'Patient/p1', { resourceType: 'Patient', id: 'p1', name: [{ family: 'Fetched' }] }))
        .statusCode,
    ).toBeLessThan(300);
    expect(
      (await inject('PUT', 'Bot/fetcher', { resourceType: 'Bot', id: 'fetcher', name: 'fetcher' })).statusCode,
    ).toBeLessThan(300);
    const code = `export async function handler(medplum, event) {
      const own = await fetch(medplum.fhirUrl('Patient', 'p1'));
      const allowed = await fetch(event.input.origin + '/hello', { method: 'POST', body: 'x' });
      let refused;
      try { await fetch('http://example.com/'); } catch (err) { refused = err.message; }
      return { own: [own.status, (await own.json()).name[0].family], allowed: [allowed.status, (await allowed.json()).path, allowed.headers.get('X-Seen-Method')], refused };
    }`;
    expect(
      (
        await inject('POST', 'Bot/fetcher/$deploy', {
          resourceType: 'Parameters',
          parameter: [
            { name: 'code', valueString: code },
            { name: 'filename', valueString: 'fetcher.js' },
          ],
        })
      ).statusCode,
    ).toBe(200);
    const res = await server.app.inject({
      method: 'POST',
      url: '/fhir/R4/Bot/fetcher/$execute',
      headers: { 'content-type': 'application/json' },
      payload: { origin },
    });
    expect(res.statusCode, res.body).toBe(200);
    const answer = res.json();
    expect(answer.own).toEqual([200, 'Fetched']);
    expect(answer.allowed).toEqual([200, '/hello', 'POST']);
    expect(answer.refused).toContain('BOT_FETCH_ALLOW');
  });
});
