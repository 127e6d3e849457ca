import type { Bundle } from 'fhir/r4';
import { describe, expect } from 'vitest';
import type { ExportManifest } from '../../src/bulk/export';
import { testOnBothBackends } from '../helpers/postgres';
import { freePort, startServer, waitForServer, type ServerProcess } from '../helpers/process';
import { stopServer } from './write-stream';

/**
 * A Bulk export survives the death of its process: SIGKILL the server once the export has been
 * kicked off (queued or running), restart it on the same data, and the export completes with
 * exactly what was there at kick-off, although 100 resources were updated and 100 deleted after
 * it. The restarted process takes the job over once its lease runs out (JOB_LEASE_MS, short here).
 */

const TOKEN = 'export-crash-token-0123456789';
const AUTH = { authorization: `Bearer ${TOKEN}` };
const BASICS = 3000;

function basics(from: number, count: number): Bundle {
  return {
    resourceType: 'Bundle',
    type: 'transaction',
    entry: Array.from({ length: count }, (_, i) => ({
      resource: { resourceType: 'Basic', id: `b${from + i}`, code: { text: `before kick-off ${from + i}` } },
      request: { method: 'PUT', url: `Basic/b${from + i}` },
    })),
  };
}

async function send(
  base: string,
  path: string,
  init: { method: string; body?: unknown; headers?: Record<string, string> },
): Promise<Response> {
  return fetch(`${base}${path}`, {
    method: init.method,
    headers: { ...AUTH, ...(init.body ? { 'content-type': 'application/fhir+json' } : {}), ...init.headers },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
}

/** Polls the status URL (honouring Retry-After) until the manifest is there. */
async function manifestOf(location: string): Promise<ExportManifest> {
  for (;;) {
    const res = await fetch(location, { headers: AUTH });
    if (res.status === 200) return (await res.json()) as ExportManifest;
    expect([202, 429], await res.clone().text()).toContain(res.status);
    await res.arrayBuffer();
    await new Promise((resolve) => setTimeout(resolve, Number(res.headers.get('retry-after') ?? '1') * 1000));
  }
}

async function linesOf(url: string): Promise<{ id: string; text: string }[]> {
  const res = await fetch(url, { headers: AUTH });
  expect(res.status).toBe(200);
  return (await res.text())
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as { id: string; code: { text: string } })
    .map((r) => ({ id: r.id, text: r.code.text }));
}

async function crashDuringExport(env: Record<string, string>): Promise<void> {
  const port = await freePort();
  const settings = { ...env, AUTH_TOKENS: TOKEN, JOB_LEASE_MS: '1000', BODY_LIMIT: '64mb' };
  const first: ServerProcess = startServer(settings, port);
  let again: ServerProcess | undefined;
  try {
    await waitForServer(first);
    for (let from = 0; from < BASICS; from += 1500) {
      const res = await send(first.base, '', { method: 'POST', body: basics(from, 1500) });
      expect(res.status, await res.clone().text()).toBe(200);
    }
    const kickOff = await send(first.base, '/$export?_type=Basic', {
      method: 'GET',
      headers: { prefer: 'respond-async' },
    });
    expect(kickOff.status, await kickOff.clone().text()).toBe(202);
    const location = kickOff.headers.get('content-location') as string;
    // Writes after the kick-off: none of them may show in the export.
    const changes: Bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        ...Array.from({ length: 100 }, (_, i) => ({
          resource: { resourceType: 'Basic', id: `b${i}`, code: { text: 'after kick-off' } },
          request: { method: 'PUT' as const, url: `Basic/b${i}` },
        })),
        ...Array.from({ length: 100 }, (_, i) => ({
          request: { method: 'DELETE' as const, url: `Basic/b${100 + i}` },
        })),
      ],
    };
    expect((await send(first.base, '', { method: 'POST', body: changes })).status).toBe(200);
    first.child.kill('SIGKILL');
    await first.exited;

    again = startServer(settings, port);
    await waitForServer(again);
    const manifest = await manifestOf(location);
    expect(manifest.output.map((o) => [o.type, o.count])).toEqual([['Basic', BASICS]]);
    const lines = await linesOf(manifest.output[0].url);
    expect(lines).toHaveLength(BASICS);
    expect(new Set(lines.map((l) => l.id)).size).toBe(BASICS);
    expect(lines.filter((l) => !l.text.startsWith('before kick-off'))).toEqual([]);
    // The server after the crash is current: the changes are there.
    const now = await send(again.base, '/Basic?_summary=count', { method: 'GET' });
    expect(((await now.json()) as Bundle).total).toBe(BASICS - 100);
  } finally {
    await stopServer(first, 'SIGKILL');
    if (again) await stopServer(again, 'SIGTERM');
  }
}

describe('SIGKILL during a Bulk export', () => {
  testOnBothBackends('the export completes after restart with the kick-off snapshot', crashDuringExport, 400_000);
});
