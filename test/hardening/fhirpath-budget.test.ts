import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { SUBSCRIPTION_EXTENSIONS as EXT } from '../../src/subscriptions/definition';
import { crossProduct, largePatient } from '../helpers/costly-fhirpath';
import { freePort, startServer, until, waitForServer, type ServerProcess } from '../helpers/process';
import { stopServer } from './write-stream';

/**
 * FHIRPath users wrote, at its most costly (a cross product over a 150 KB resource, a minute and
 * gigabytes in the engine), against the server as `npm start` runs it: a /metadata probe keeps
 * its p99 under 200 ms while stored invariants and Subscription criteria of that kind are
 * evaluated, each answering within its bound; and a SIGTERM while one is being evaluated ends the
 * process within DRAIN_TIMEOUT_MS + 2 s.
 */

const JSON_HEADERS = { 'content-type': 'application/fhir+json' };
const DRAIN_TIMEOUT_MS = 1000;
const PROFILE_URL = 'http://example.org/fhir/StructureDefinition/costly-hardening';

const profile = {
  resourceType: 'StructureDefinition',
  id: 'costly-hardening',
  url: PROFILE_URL,
  name: 'CostlyHardening',
  status: 'active',
  kind: 'resource',
  abstract: false,
  type: 'Patient',
  baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient',
  derivation: 'constraint',
  differential: {
    element: [
      {
        id: 'Patient',
        path: 'Patient',
        constraint: [{ key: 'cost-1', severity: 'error', human: 'costly', expression: crossProduct('resource') }],
      },
    ],
  },
};

const costlySubscription = {
  resourceType: 'Subscription',
  status: 'requested',
  reason: 'hardening',
  criteria: 'Patient',
  channel: { type: 'websocket' },
  extension: [{ url: EXT.fhirPathCriteria, valueString: crossProduct('current') }],
};

function validateBody() {
  return JSON.stringify({
    resourceType: 'Parameters',
    parameter: [
      { name: 'resource', resource: largePatient() },
      { name: 'profile', valueUri: PROFILE_URL },
    ],
  });
}

async function send(base: string, method: string, path: string, body: string): Promise<{ status: number; ms: number }> {
  const start = performance.now();
  const res = await fetch(`${base}/${path}`, { method, headers: JSON_HEADERS, body });
  await res.arrayBuffer();
  return { status: res.status, ms: performance.now() - start };
}

/** CPU seconds the process has used (user + system), from /proc. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Probes /metadata one after another until `stop` says so; answers each probe's time in ms. */
async function probe(base: string, stop: () => boolean): Promise<number[]> {
  const times: number[] = [];
  while (!stop()) {
    const start = performance.now();
    const res = await fetch(`${base}/metadata`);
    await res.arrayBuffer();
    expect(res.status).toBe(200);
    times.push(performance.now() - start);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return times;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

describe('user-supplied FHIRPath at its most costly', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'fhirpath-budget-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const start = async (name: string, env: Record<string, string>): Promise<ServerProcess> => {
    const server = startServer(
      { DATA_DIR: join(dir, name), DRAIN_TIMEOUT_MS: String(DRAIN_TIMEOUT_MS), LOG_LEVEL: 'warn', ...env },
      await freePort(),
    );
    await waitForServer(server, 120_000);
    return server;
  };

  test('costly invariants and criteria answer within their bound while /metadata keeps p99 under 200 ms', async () => {
    const server = await start('probe', { FHIRPATH_TIMEOUT_MS: '2000' });
    try {
      expect(
        (await send(server.base, 'PUT', `StructureDefinition/${profile.id}`, JSON.stringify(profile))).status,
      ).toBe(201);
      expect((await send(server.base, 'POST', 'Subscription', JSON.stringify(costlySubscription))).status).toBe(201);
      // Warm: the R4 definitions and the profile compiled, the workers started. What is measured is the costly input.
      const small = { resourceType: 'Patient', name: [{ family: 'Small', given: ['One'] }] };
      const warm = JSON.stringify({
        resourceType: 'Parameters',
        parameter: [
          { name: 'resource', resource: small },
          { name: 'profile', valueUri: PROFILE_URL },
        ],
      });
      expect((await send(server.base, 'POST', 'Patient/$validate', warm)).status).toBe(200);
      expect((await send(server.base, 'POST', 'Patient', JSON.stringify(small))).status).toBe(201);
      let hostile = true;
      const probes = probe(server.base, () => !hostile);
      const answers: { status: number; ms: number }[] = [];
      for (let i = 0; i < 3; i++) answers.push(await send(server.base, 'POST', 'Patient/$validate', validateBody()));
      answers.push(await send(server.base, 'POST', 'Patient', JSON.stringify(largePatient())));
      hostile = false;
      const times = await probes;
      console.log(
        `FHIRPath budget: answers ${answers.map((a) => `${a.status} in ${Math.round(a.ms)} ms`).join(', ')}; ${times.length} probes, p50 ${percentile(times, 50).toFixed(1)} ms, p99 ${percentile(times, 99).toFixed(1)} ms, max ${Math.max(...times).toFixed(1)} ms`,
      );
      expect(answers.map((a) => a.status)).toEqual([422, 422, 422, 201]);
      // Each within its 2 s limit, plus a new worker's start after a stopped one, and generous room on a busy machine.
      for (const a of answers) expect(a.ms).toBeLessThan(20_000);
      expect(times.length).toBeGreaterThanOrEqual(20);
      expect(percentile(times, 99)).toBeLessThan(200);
    } finally {
      await stopServer(server, 'SIGTERM');
    }
  });

  test.each([
    ['$validate against a profile with a costly invariant', 'Patient/$validate', () => validateBody(), true],
    [
      'a write that a costly Subscription criterion is evaluated against',
      'Patient',
      () => JSON.stringify(largePatient()),
      false,
    ],
  ])(`SIGTERM during %s ends the process within DRAIN_TIMEOUT_MS + 2 s`, async (_name, path, body, withProfile) => {
    // A limit far beyond the drain time: only the shutdown can end the evaluation.
    const server = await start(`sigterm-${withProfile ? 'validate' : 'write'}`, { FHIRPATH_TIMEOUT_MS: '600000' });
    try {
      if (withProfile)
        expect(
          (await send(server.base, 'PUT', `StructureDefinition/${profile.id}`, JSON.stringify(profile))).status,
        ).toBe(201);
      else
        expect((await send(server.base, 'POST', 'Subscription', JSON.stringify(costlySubscription))).status).toBe(201);
      const pid = server.child.pid as number;
      const before = cpuSeconds(pid);
      const hostile = send(server.base, 'POST', path, body()).catch(() => undefined);
      // Busy with it: two more CPU seconds (in the engine) than before it was sent.
      await until(() => cpuSeconds(pid) > before + 2, 'the server is evaluating the costly expression', 60_000);
      const signalled = performance.now();
      server.child.kill('SIGTERM');
      await server.exited;
      const ms = performance.now() - signalled;
      console.log(`FHIRPath budget: SIGTERM during ${path} ended the process in ${Math.round(ms)} ms`);
      expect(ms).toBeLessThan(DRAIN_TIMEOUT_MS + 2000);
      await hostile;
    } finally {
      await stopServer(server, 'SIGKILL');
    }
  });
});
