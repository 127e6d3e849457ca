import { createHmac, randomUUID } from 'node:crypto';
import type { OperationOutcome, Patient, Subscription } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { SubscriptionDelivery } from '../../src/subscriptions/delivery';
import { SUBSCRIPTION_EXTENSIONS as EXT } from '../../src/subscriptions/definition';
import { Outbound } from '../../src/net/outbound';
import { FHIR_JSON, onBothBackends } from '../helpers/server-app';
import { Receiver } from '../helpers/receiver';

/**
 * R4 Subscriptions on both backends, delivered to a loopback receiver: validation at create,
 * matching in the write's transaction (delivery jobs counted in the jobs table right after the
 * write), R4 and Medplum rest-hook shapes, headers and signature, deletes only where asked,
 * FHIRPath criteria with %previous/%current, retries and the `error` status. Every wait is on
 * the receiver or the stored state.
 */

const RETRY_MS = 20;

function suite(name: string, open: () => Promise<{ server: ServerApp; cleanup: () => Promise<void> }>) {
  describe(`Subscriptions (${name})`, () => {
    let server: ServerApp;
    let cleanup: () => Promise<void>;
    const receiver = new Receiver();

    const request = async (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: object) => {
      const res = await server.app.inject({
        method,
        url: `/fhir/R4/${url}`,
        headers: payload ? FHIR_JSON : {},
        payload,
      });
      return { status: res.statusCode, body: res.body === '' ? undefined : res.json() };
    };

    const subscribe = async (sub: Partial<Subscription>): Promise<Subscription> => {
      const res = await request('POST', 'Subscription', {
        resourceType: 'Subscription',
        status: 'requested',
        reason: 'test',
        ...sub,
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body as Subscription;
    };

    /** A Patient criteria unique to one test, and a patient that meets it. */
    const tagged = () => {
      const tag = randomUUID();
      return {
        criteria: `Patient?identifier=urn:test|${tag}`,
        patient: (extra: Partial<Patient> = {}): Patient => ({
          resourceType: 'Patient',
          identifier: [{ system: 'urn:test', value: tag }],
          ...extra,
        }),
      };
    };

    /** Delivery jobs enqueued for one resource (enqueued in the write's transaction: counted right after it). */
    const jobsFor = async (type: string, id: string) => {
      const rows = await server.core.repository.store.query<{ input: string }>(
        "SELECT input FROM jobs WHERE kind = 'subscription-delivery'",
        [],
      );
      return rows.filter((r) => {
        const input = JSON.parse(r.input) as { type: string; id: string };
        return input.type === type && input.id === id;
      }).length;
    };

    const hookOf = (url: string) => ({ type: 'rest-hook' as const, endpoint: url, payload: 'application/fhir+json' });

    beforeAll(async () => {
      await receiver.start();
      ({ server, cleanup } = await open());
    });
    afterAll(async () => {
      await cleanup?.();
      await receiver.stop();
    });

    test.each([
      [
        'an email channel',
        { criteria: 'Patient', channel: { type: 'email', endpoint: 'mailto:a@example.org' } },
        'not-supported',
      ],
      ['an sms channel', { criteria: 'Patient', channel: { type: 'sms', endpoint: 'tel:123' } }, 'not-supported'],
      [
        'a message channel',
        { criteria: 'Patient', channel: { type: 'message', endpoint: 'http://127.0.0.1/' } },
        'not-supported',
      ],
      [
        'an unknown search parameter',
        { criteria: 'Patient?no-such-param=1', channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1/' } },
        'invalid',
      ],
      [
        'an unknown type',
        { criteria: 'Nonsense?name=a', channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1/' } },
        'invalid',
      ],
      [
        'the cloud metadata address',
        { criteria: 'Patient', channel: { type: 'rest-hook', endpoint: 'http://169.254.169.254/latest' } },
        'invalid',
      ],
      [
        'a non-http endpoint',
        { criteria: 'Patient', channel: { type: 'rest-hook', endpoint: 'ftp://example.org/' } },
        'invalid',
      ],
      [
        'a bad FHIRPath criteria',
        {
          criteria: 'Patient',
          channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1/' },
          extension: [{ url: EXT.fhirPathCriteria, valueString: 'name.where(' }],
        },
        'invalid',
      ],
    ])('%s is refused at create (400), nothing stored', async (_what, sub, code) => {
      const before = (await request('GET', 'Subscription?_summary=count')).body as { total: number };
      const res = await request('POST', 'Subscription', {
        resourceType: 'Subscription',
        status: 'requested',
        reason: 'test',
        ...sub,
      });
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect((res.body as OperationOutcome).issue[0].code).toBe(code);
      const after = (await request('GET', 'Subscription?_summary=count')).body as { total: number };
      expect(after.total).toBe(before.total);
    });

    test('a requested subscription is stored active', async () => {
      const sub = await subscribe({ criteria: 'Patient?name=nobody-at-all', channel: hookOf(receiver.url) });
      expect(sub.status).toBe('active');
    });

    test('a matching create is delivered exactly once (R4: PUT [endpoint]/Patient/[id]); a non-matching update is not', async () => {
      const { criteria, patient } = tagged();
      const hook = new Receiver();
      await hook.start();
      try {
        await subscribe({
          criteria,
          channel: { ...hookOf(hook.url), header: ['Authorization: Bearer hook-secret', 'X-Custom: one'] },
          extension: [{ url: EXT.secret, valueString: 'shared-secret' }],
        });
        const created = (await request('POST', 'Patient', patient({ active: true }))).body as Patient;
        expect(await jobsFor('Patient', created.id as string)).toBe(1);
        const [got] = await hook.until((r) => r.length >= 1);
        expect(got.method).toBe('PUT');
        expect(got.url).toBe(`/hook/Patient/${created.id}`);
        expect(got.headers['content-type']).toBe('application/fhir+json');
        expect(got.headers.authorization).toBe('Bearer hook-secret');
        expect(got.headers['x-custom']).toBe('one');
        expect(got.headers['x-signature']).toBe(createHmac('sha256', 'shared-secret').update(got.body).digest('hex'));
        expect(JSON.parse(got.body)).toMatchObject({
          resourceType: 'Patient',
          id: created.id,
          meta: { versionId: '1' },
        });
        // An update that leaves the criteria is not delivered: no job is enqueued for it.
        const moved = { ...created, identifier: [{ system: 'urn:test', value: 'elsewhere' }] };
        expect((await request('PUT', `Patient/${created.id}`, moved)).status).toBe(200);
        expect(await jobsFor('Patient', created.id as string)).toBe(1);
        // Exactly once: the job is done, and nothing more arrived.
        await waitFor(
          async () =>
            (
              await server.core.repository.store.query<{ n: number }>(
                "SELECT COUNT(*) AS n FROM jobs WHERE kind = 'subscription-delivery' AND state <> 'done'",
                [],
              )
            )[0].n == 0,
        );
        expect(hook.received).toHaveLength(1);
      } finally {
        await hook.stop();
      }
    });

    test.each([
      ["Medplum's URL (with www)", 'https://www.medplum.com/fhir/StructureDefinition/subscription-secret'],
      ["Medplum's older URL", 'https://www.medplum.com/fhir/StructureDefinition-subscriptionSecret'],
      ['the URL without www', 'https://medplum.com/fhir/StructureDefinition/subscription-secret'],
    ])('a secret under %s signs the delivery (X-Signature: hex HMAC-SHA256 of the body)', async (_what, url) => {
      const { criteria, patient } = tagged();
      const hook = await new Receiver().start();
      try {
        await subscribe({ criteria, channel: hookOf(hook.url), extension: [{ url, valueString: 'medplum-secret' }] });
        expect((await request('POST', 'Patient', patient())).status).toBe(201);
        const [got] = await hook.until((r) => r.length >= 1);
        expect(got.body).not.toBe('');
        expect(got.headers['x-signature']).toBe(createHmac('sha256', 'medplum-secret').update(got.body).digest('hex'));
      } finally {
        await hook.stop();
      }
    });

    test('without payload, an empty POST to the endpoint; in Medplum mode, the resource POSTed to the endpoint', async () => {
      const { criteria, patient } = tagged();
      const plain = await new Receiver().start();
      const medplum = await new Receiver().start();
      try {
        await subscribe({ criteria, channel: { type: 'rest-hook', endpoint: plain.url } });
        await subscribe({
          criteria,
          channel: hookOf(medplum.url),
          extension: [{ url: EXT.deliveryMode, valueCode: 'medplum' }],
        });
        const created = (await request('POST', 'Patient', patient())).body as Patient;
        const [empty] = await plain.until((r) => r.length >= 1);
        expect(empty.method).toBe('POST');
        expect(empty.url).toBe('/hook');
        expect(empty.body).toBe('');
        const [full] = await medplum.until((r) => r.length >= 1);
        expect(full.method).toBe('POST');
        expect(full.url).toBe('/hook');
        expect(JSON.parse(full.body)).toMatchObject({ resourceType: 'Patient', id: created.id });
      } finally {
        await plain.stop();
        await medplum.stop();
      }
    });

    test('a delete is delivered only where the supported-interaction extension asks for it', async () => {
      const { criteria, patient } = tagged();
      const plain = await new Receiver().start();
      const deletes = await new Receiver().start();
      try {
        await subscribe({ criteria, channel: hookOf(plain.url) });
        await subscribe({
          criteria,
          channel: hookOf(deletes.url),
          extension: [{ url: EXT.supportedInteraction, valueCode: 'delete' }],
        });
        const created = (await request('POST', 'Patient', patient())).body as Patient;
        await plain.until((r) => r.length >= 1);
        expect((await request('DELETE', `Patient/${created.id}`)).status).toBe(204);
        const [got] = await deletes.until((r) => r.length >= 1);
        expect(got.method).toBe('DELETE');
        expect(got.url).toBe(`/hook/Patient/${created.id}`);
        // The delete made one job (for the delete subscription); the create one (for the other).
        expect(await jobsFor('Patient', created.id as string)).toBe(2);
        expect(deletes.received).toHaveLength(1);
        expect(plain.received).toHaveLength(1);
      } finally {
        await plain.stop();
        await deletes.stop();
      }
    });

    test('FHIRPath criteria see %previous and %current', async () => {
      const { criteria, patient } = tagged();
      const hook = await new Receiver().start();
      try {
        await subscribe({
          criteria,
          channel: hookOf(hook.url),
          extension: [
            { url: EXT.fhirPathCriteria, valueString: '%previous.active = false and %current.active = true' },
          ],
        });
        const created = (await request('POST', 'Patient', patient({ active: false }))).body as Patient;
        expect(await jobsFor('Patient', created.id as string)).toBe(0);
        const activated = (await request('PUT', `Patient/${created.id}`, { ...created, active: true })).body as Patient;
        expect(await jobsFor('Patient', created.id as string)).toBe(1);
        await request('PUT', `Patient/${created.id}`, { ...activated, gender: 'female' });
        expect(await jobsFor('Patient', created.id as string)).toBe(1);
        const [got] = await hook.until((r) => r.length >= 1);
        expect(JSON.parse(got.body)).toMatchObject({ id: created.id, active: true, meta: { versionId: '2' } });
      } finally {
        await hook.stop();
      }
    });

    test('$resend delivers the current version again, without writing a new one; subscription= limits it', async () => {
      const { criteria, patient } = tagged();
      const one = await new Receiver().start();
      const two = await new Receiver().start();
      try {
        const subOne = await subscribe({ criteria, channel: hookOf(one.url) });
        await subscribe({ criteria, channel: hookOf(two.url) });
        const created = (await request('POST', 'Patient', patient())).body as Patient;
        await one.until((r) => r.length >= 1);
        await two.until((r) => r.length >= 1);
        // A Parameters body: every matching subscription.
        const all = await request('POST', `Patient/${created.id}/$resend`, {
          resourceType: 'Parameters',
          parameter: [{ name: 'verbose', valueBoolean: true }],
        });
        expect(all.status, JSON.stringify(all.body)).toBe(200);
        expect((all.body as OperationOutcome).resourceType).toBe('OperationOutcome');
        expect((all.body as OperationOutcome).issue.map((i) => i.details?.text)).toContain(`Subscription/${subOne.id}`);
        await one.until((r) => r.length >= 2);
        await two.until((r) => r.length >= 2);
        expect(JSON.parse(one.received[1].body).meta.versionId).toBe('1');
        // Medplum's plain JSON body, limited to one subscription.
        const limited = await request('POST', `Patient/${created.id}/$resend`, {
          subscription: `Subscription/${subOne.id}`,
          verbose: true,
        });
        expect(limited.status, JSON.stringify(limited.body)).toBe(200);
        expect((limited.body as OperationOutcome).issue.map((i) => i.details?.text)).toEqual([
          expect.stringContaining('1 subscription'),
          `Subscription/${subOne.id}`,
        ]);
        await one.until((r) => r.length >= 3);
        expect(await jobsFor('Patient', created.id as string)).toBe(5);
        expect(two.received).toHaveLength(2);
        const read = (await request('GET', `Patient/${created.id}`)).body as Patient;
        expect(read.meta?.versionId).toBe('1');
      } finally {
        await one.stop();
        await two.stop();
      }
    });

    test('$resend: bad input is 400, an unknown resource 404, a deleted one 410', async () => {
      const created = (await request('POST', 'Patient', { resourceType: 'Patient' })).body as Patient;
      expect((await request('POST', `Patient/${created.id}/$resend`, { interaction: 'explode' })).status).toBe(400);
      expect((await request('POST', `Patient/${created.id}/$resend`, { verbose: 'yes' })).status).toBe(400);
      expect((await request('POST', `Patient/no-such-patient/$resend`, {})).status).toBe(404);
      await request('DELETE', `Patient/${created.id}`);
      expect((await request('POST', `Patient/${created.id}/$resend`, {})).status).toBe(410);
    });

    test('$resend is for administrators: a project client without admin gets 403', async () => {
      const init = await server.app.inject({
        method: 'POST',
        url: '/fhir/R4/Project/$init',
        headers: FHIR_JSON,
        payload: { resourceType: 'Parameters', parameter: [{ name: 'name', valueString: `resend-${randomUUID()}` }] },
      });
      expect(init.statusCode, init.body).toBe(201);
      const project = init.json().id as string;
      const clients = await server.app.inject({
        method: 'GET',
        url: '/fhir/R4/ClientApplication',
        headers: { 'x-project': project },
      });
      const client = clients.json().entry[0].resource as { id: string; secret: string };
      // The default client only reads; an administrator (the operator here) lets it write, not administer.
      const widened = await server.app.inject({
        method: 'PUT',
        url: `/fhir/R4/ClientApplication/${client.id}`,
        headers: { ...FHIR_JSON, 'x-project': project },
        payload: { ...client, defaultScope: ['system/*.cruds'] },
      });
      expect(widened.statusCode, widened.body).toBe(200);
      const token = await server.app.inject({
        method: 'POST',
        url: '/oauth2/token',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${client.id}:${client.secret}`).toString('base64')}`,
        },
        payload: new URLSearchParams({ grant_type: 'client_credentials' }).toString(),
      });
      expect(token.statusCode, token.body).toBe(200);
      const bearer = { authorization: `Bearer ${token.json().access_token}` };
      const created = await server.app.inject({
        method: 'POST',
        url: '/fhir/R4/Patient',
        headers: { ...FHIR_JSON, ...bearer },
        payload: { resourceType: 'Patient' },
      });
      expect(created.statusCode, created.body).toBe(201);
      const res = await server.app.inject({
        method: 'POST',
        url: `/fhir/R4/Patient/${created.json().id}/$resend`,
        headers: { ...FHIR_JSON, ...bearer },
        payload: {},
      });
      expect(res.statusCode, res.body).toBe(403);
      expect(res.body).toContain('$resend is for project administrators');
    });

    test('websocket: bind with a token from $get-ws-binding-token, then a create arrives as a notification Bundle', async () => {
      const { criteria, patient } = tagged();
      const sub = await subscribe({ criteria, channel: { type: 'websocket' } });
      const res = await request('GET', `Subscription/${sub.id}/$get-ws-binding-token`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const out = Object.fromEntries(
        (res.body as { parameter: { name: string; valueString?: string; valueUrl?: string }[] }).parameter.map((p) => [
          p.name,
          p.valueString ?? p.valueUrl,
        ]),
      );
      expect(out.subscription).toBe(sub.id);
      expect(out['websocket-url']).toMatch(/^ws:\/\/[^/]+\/ws\/subscriptions-r4$/);
      const socket = await server.app.injectWS('/ws/subscriptions-r4');
      const messages: {
        type?: string;
        entry?: { resource: { resourceType: string; id?: string; type?: string } }[];
      }[] = [];
      socket.on('message', (data: Buffer) => messages.push(JSON.parse(data.toString())));
      try {
        socket.send(JSON.stringify({ type: 'bind-with-token', payload: { token: out.token } }));
        await waitFor(async () => messages.some((m) => m.entry?.[0].resource.type === 'handshake'));
        const created = (await request('POST', 'Patient', patient())).body as Patient;
        await waitFor(async () => messages.some((m) => m.entry?.[0].resource.type === 'event-notification'));
        const event = messages.find((m) => m.entry?.[0].resource.type === 'event-notification');
        expect(event).toMatchObject({ resourceType: 'Bundle', type: 'history' });
        expect(event?.entry?.[0].resource).toMatchObject({
          resourceType: 'SubscriptionStatus',
          subscription: { reference: `Subscription/${sub.id}` },
          notificationEvent: [{ focus: { reference: `Patient/${created.id}` } }],
        });
        expect(event?.entry?.[1].resource).toMatchObject({ resourceType: 'Patient', id: created.id });
      } finally {
        socket.terminate();
      }
    });

    test('websocket: a bad binding token is refused and the socket closed; a rest-hook has no binding token', async () => {
      const socket = await server.app.injectWS('/ws/subscriptions-r4');
      const messages: { type?: string; payload?: OperationOutcome }[] = [];
      let closed = false;
      socket.on('message', (data: Buffer) => messages.push(JSON.parse(data.toString())));
      socket.on('close', () => (closed = true));
      socket.send(JSON.stringify({ type: 'bind-with-token', payload: { token: 'not-a-token' } }));
      await waitFor(async () => closed);
      expect(messages[0]).toMatchObject({ type: 'error', payload: { resourceType: 'OperationOutcome' } });
      const hook = await subscribe({ criteria: 'Patient?name=nobody-at-all', channel: hookOf(receiver.url) });
      expect((await request('GET', `Subscription/${hook.id}/$get-ws-binding-token`)).status).toBe(400);
    });

    test('a receiver failing three times (500) gets the notification on the 4th attempt', async () => {
      const { criteria, patient } = tagged();
      const hook = await new Receiver().start();
      hook.respond = () => (hook.received.length <= 3 ? 500 : 200);
      try {
        const sub = await subscribe({
          criteria,
          channel: hookOf(hook.url),
          extension: [{ url: EXT.maxAttempts, valueInteger: 4 }],
        });
        await request('POST', 'Patient', patient());
        await hook.until((r) => r.length >= 4);
        await waitFor(
          async () =>
            (
              await server.core.repository.store.query<{ n: number }>(
                "SELECT COUNT(*) AS n FROM jobs WHERE kind = 'subscription-delivery' AND state NOT IN ('done', 'dead')",
                [],
              )
            )[0].n == 0,
        );
        expect(hook.received).toHaveLength(4);
        const after = (await request('GET', `Subscription/${sub.id}`)).body as Subscription;
        expect(after.status).toBe('active');
      } finally {
        await hook.stop();
      }
    });

    test('a receiver always down: attempts stop at max-attempts and the Subscription goes to error', async () => {
      const { criteria, patient } = tagged();
      const hook = await new Receiver().start();
      hook.respond = () => 503;
      try {
        const sub = await subscribe({
          criteria,
          channel: hookOf(hook.url),
          extension: [{ url: EXT.maxAttempts, valueInteger: 2 }],
        });
        await request('POST', 'Patient', patient());
        await waitFor(
          async () => ((await request('GET', `Subscription/${sub.id}`)).body as Subscription).status === 'error',
        );
        const after = (await request('GET', `Subscription/${sub.id}`)).body as Subscription;
        expect(after.error).toMatch(/failed 2 times.*503/);
        expect(hook.received).toHaveLength(2);
        // An errored subscription is no longer matched.
        const again = (await request('POST', 'Patient', patient())).body as Patient;
        expect(await jobsFor('Patient', again.id as string)).toBe(0);
      } finally {
        await hook.stop();
      }
    });
  });
}

async function waitFor(check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('the condition did not come true');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

onBothBackends(suite, { outboundAllowPrivate: true, subscriptionRetryMs: RETRY_MS });

describe('delivery retries', () => {
  test('back off exponentially with jitter: each gap is longer than the one before', () => {
    const delivery = new SubscriptionDelivery({
      repository: undefined as never,
      outbound: new Outbound({ allowPrivate: false }),
      retryMs: 100,
    });
    const backoff = delivery.handler().backoff as (attempt: number) => number;
    for (let i = 0; i < 50; i++) {
      const gaps = [1, 2, 3, 4].map((a) => backoff(a));
      for (let a = 1; a < gaps.length; a++) expect(gaps[a]).toBeGreaterThan(gaps[a - 1]);
      expect(gaps[0]).toBeGreaterThanOrEqual(50);
      expect(gaps[0]).toBeLessThan(100);
    }
  });
});
