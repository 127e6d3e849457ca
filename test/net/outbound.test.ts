import type { LookupAddress } from 'node:dns';
import { lookup as dnsLookup } from 'node:dns';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { Outbound, OutboundError } from '../../src/net/outbound';
import { CountingListener, loopbackForms, OFF_MACHINE_FORMS } from '../helpers/listener';
import { Receiver } from '../helpers/receiver';

/**
 * The outbound guard on its own: a loopback listener counts connections, and no form of a
 * loopback address, no name resolving to one, no rebinding and no redirect gets one.
 */

type Resolved = LookupAddress[];

/** A resolver that answers from `answers` for its names (in turn, the last one repeated) and from DNS for others. */
function fakeLookup(answers: Record<string, Resolved[]>): typeof dnsLookup {
  const calls = new Map<string, number>();
  const fake = (
    hostname: string,
    options: unknown,
    callback: (err: NodeJS.ErrnoException | null, addresses: Resolved) => void,
  ) => {
    const list = answers[hostname];
    if (!list) return dnsLookup(hostname, { all: true }, callback);
    const n = calls.get(hostname) ?? 0;
    calls.set(hostname, n + 1);
    queueMicrotask(() => callback(null, list[Math.min(n, list.length - 1)]));
  };
  return fake as unknown as typeof dnsLookup;
}

describe('the outbound guard', () => {
  let listener: CountingListener;
  const outbounds: Outbound[] = [];
  const make = (options: ConstructorParameters<typeof Outbound>[0]) => {
    const outbound = new Outbound({ timeoutMs: 2000, ...options });
    outbounds.push(outbound);
    return outbound;
  };

  beforeAll(async () => {
    listener = await new CountingListener().start();
  });
  afterAll(async () => {
    await listener.stop();
  });
  afterEach(async () => {
    await Promise.all(outbounds.splice(0).map((o) => o.close()));
  });

  test('refuses every form of a loopback address before connecting: checked, sent, nothing reaches the listener', async () => {
    const outbound = make({ allowPrivate: false });
    for (const url of loopbackForms(listener.port)) {
      await expect(outbound.check(url), url).rejects.toBeInstanceOf(OutboundError);
      await expect(outbound.send({ method: 'POST', url, body: 'x' }), url).rejects.toBeInstanceOf(OutboundError);
    }
    expect(listener.connections).toBe(0);
  });

  test('refuses private, metadata and unroutable forms that are off this machine (judged only, never sent)', async () => {
    const outbound = make({ allowPrivate: false });
    for (const url of OFF_MACHINE_FORMS) await expect(outbound.check(url), url).rejects.toBeInstanceOf(OutboundError);
  });

  test('metadata forms are refused with OUTBOUND_ALLOW_PRIVATE too', async () => {
    const outbound = make({ allowPrivate: true });
    for (const url of OFF_MACHINE_FORMS.filter((u) => /169\.254|a9fe|ec2/.test(u))) {
      await expect(outbound.check(url), url).rejects.toThrow(/metadata/);
    }
  });

  test('a name is judged by every address it resolves to, not the first', async () => {
    const lookup = fakeLookup({
      'inside.test': [[{ address: '127.0.0.1', family: 4 }]],
      'both.test': [
        [
          { address: '127.0.0.1', family: 4 },
          { address: '169.254.169.254', family: 4 },
        ],
      ],
    });
    await expect(
      make({ allowPrivate: false, lookup }).send({ method: 'GET', url: `http://inside.test:${listener.port}/` }),
    ).rejects.toThrow(/private address/);
    // Private allowed, so the first address passes; the second is the metadata service.
    await expect(
      make({ allowPrivate: true, lookup }).send({ method: 'GET', url: `http://both.test:${listener.port}/` }),
    ).rejects.toThrow(/metadata/);
    expect(listener.connections).toBe(0);
  });

  test('a refusal names OUTBOUND_ALLOW_PRIVATE only when setting it would help: a metadata address, alone or beside a private one, is refused always', async () => {
    const lookup = fakeLookup({
      'inside.test': [[{ address: '10.1.2.3', family: 4 }]],
      'mixed.test': [
        [
          { address: '10.1.2.3', family: 4 },
          { address: '169.254.169.254', family: 4 },
        ],
      ],
    });
    const outbound = make({ allowPrivate: false, lookup });
    const privateOnly = /is a private address; set OUTBOUND_ALLOW_PRIVATE=true to allow it$/;
    await expect(outbound.check('http://10.1.2.3/')).rejects.toThrow(privateOnly);
    await expect(outbound.check('http://inside.test/')).rejects.toThrow(privateOnly);
    await expect(outbound.send({ method: 'GET', url: `http://inside.test:${listener.port}/` })).rejects.toThrow(
      privateOnly,
    );
    const always = /is a cloud metadata address: refused always, whatever OUTBOUND_ALLOW_PRIVATE says$/;
    for (const url of [
      'http://169.254.169.254/latest/meta-data/',
      'http://[::ffff:169.254.169.254]/',
      'http://mixed.test/',
    ]) {
      await expect(outbound.check(url), url).rejects.toThrow(always);
    }
    await expect(outbound.send({ method: 'GET', url: `http://mixed.test:${listener.port}/` })).rejects.toThrow(always);
    expect(listener.connections).toBe(0);
  });

  test('a name that resolves to a public address when checked and to loopback when connected (DNS rebinding) is refused at the connection', async () => {
    const lookup = fakeLookup({
      'rebind.test': [[{ address: '93.184.216.34', family: 4 }], [{ address: '127.0.0.1', family: 4 }]],
    });
    const outbound = make({ allowPrivate: false, lookup });
    const url = `http://rebind.test:${listener.port}/`;
    await outbound.check(url);
    await expect(outbound.send({ method: 'GET', url })).rejects.toThrow(/private address/);
    expect(listener.connections).toBe(0);
  });

  test('a redirect from an allowed target to a loopback form is not followed, and calling its Location is refused', async () => {
    const first = await new Receiver().start();
    try {
      const location = `http://[::ffff:127.0.0.1]:${listener.port}/`;
      first.respond = () => 302;
      const outbound = make({ allowPrivate: false, allowTargets: [`127.0.0.1:${first.port}`] });
      const answer = await outbound.send({
        method: 'GET',
        url: `http://127.0.0.1:${first.port}/moved?to=${encodeURIComponent(location)}`,
      });
      expect(answer.status).toBe(302);
      expect(first.received).toHaveLength(1);
      await expect(outbound.send({ method: 'GET', url: location })).rejects.toThrow(/private address/);
      // The allowed target is that address and port only.
      await expect(outbound.send({ method: 'GET', url: `http://[::ffff:7f00:1]:${first.port}/` })).rejects.toThrow(
        /private address/,
      );
      expect(listener.connections).toBe(0);
    } finally {
      await first.stop();
    }
  });
});
