import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Patient } from 'fhir/r4';
import { createServerApp, type ServerApp } from '../src/bootstrap';
import { loadConfig } from '../src/config';
import { Receiver } from '../test/helpers/receiver';

/**
 * `npm run bench:subscriptions`, on SQLite (a temporary DATA_DIR), in one process with a loopback
 * receiver:
 * - write cost: POST Patient in a project without Subscriptions, with ten that never match, and
 *   with the write observer removed (the server before Subscriptions), interleaved in rounds;
 * - commit-to-delivery latency: one matching create at a time, from its 201 to the receiver;
 * - throughput: 5,000 matching creates committed in batches, then the time until all arrived.
 */

const WRITES = Number(process.env.BENCH_WRITES ?? 1500);
const ROUNDS = 5;
const LATENCY_SAMPLES = 200;
const THROUGHPUT = Number(process.env.BENCH_DELIVERIES ?? 5000);
const WORKERS = Number(process.env.JOB_WORKERS ?? 4);

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];

async function post(server: ServerApp, url: string, body: object, project?: string): Promise<{ id: string }> {
  const res = await server.app.inject({
    method: 'POST',
    url: `/fhir/R4/${url}`,
    headers: { 'content-type': 'application/fhir+json', ...(project ? { 'x-project': project } : {}) },
    payload: body,
  });
  if (res.statusCode !== 201) throw new Error(`${url}: ${res.statusCode} ${res.body}`);
  return res.json() as { id: string };
}

/** Mean microseconds per POST Patient, `count` of them, in `project`. */
async function writeCost(server: ServerApp, count: number, project?: string): Promise<number> {
  const started = process.hrtime.bigint();
  for (let i = 0; i < count; i++)
    await post(
      server,
      'Patient',
      { resourceType: 'Patient', name: [{ family: `Bench${i}` }], gender: 'female' } satisfies Patient,
      project,
    );
  return Number(process.hrtime.bigint() - started) / 1000 / count;
}

async function newProject(server: ServerApp, name: string): Promise<string> {
  const res = await server.app.inject({
    method: 'POST',
    url: '/fhir/R4/Project/$init',
    headers: { 'content-type': 'application/fhir+json' },
    payload: { resourceType: 'Parameters', parameter: [{ name: 'name', valueString: name }] },
  });
  if (res.statusCode !== 201) throw new Error(`$init: ${res.statusCode} ${res.body}`);
  return (res.json() as { id: string }).id;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'fhir-bench-subs-'));
  const receiver = await new Receiver().start();
  const server = await createServerApp({
    ...loadConfig({ LOG_LEVEL: 'silent', OUTBOUND_ALLOW_PRIVATE: 'true', JOB_WORKERS: String(WORKERS) }),
    dataDir: dir,
  });
  try {
    // Write cost. Ten Subscriptions that never match, in their own project.
    const quiet = await newProject(server, 'no subscriptions');
    const busy = await newProject(server, 'ten non-matching subscriptions');
    for (let i = 0; i < 10; i++) {
      await post(
        server,
        'Subscription',
        {
          resourceType: 'Subscription',
          status: 'requested',
          reason: 'bench',
          criteria: `Patient?identifier=urn:never|${i}`,
          channel: { type: 'rest-hook', endpoint: receiver.url },
        },
        busy,
      );
    }
    const baselineProject = await newProject(server, 'observer removed');
    await writeCost(server, 200, quiet);
    await writeCost(server, 200, busy);
    const observers = (server.core.repository as unknown as { observers: unknown[] }).observers;
    const saved = [...observers];
    const costs = { without: [] as number[], nonMatching: [] as number[], baseline: [] as number[] };
    for (let round = 0; round < ROUNDS; round++) {
      observers.length = 0;
      costs.baseline.push(await writeCost(server, WRITES / ROUNDS, baselineProject));
      observers.push(...saved);
      costs.without.push(await writeCost(server, WRITES / ROUNDS, quiet));
      costs.nonMatching.push(await writeCost(server, WRITES / ROUNDS, busy));
    }
    const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
    const base = median(costs.baseline);
    const none = median(costs.without);
    const ten = median(costs.nonMatching);
    console.log(
      `write cost (POST Patient, median of ${ROUNDS} rounds of ${WRITES / ROUNDS}): observer removed ${base.toFixed(0)} us; no subscriptions ${none.toFixed(0)} us (${(((none - base) / base) * 100).toFixed(1)}%); ten non-matching ${ten.toFixed(0)} us (${(((ten - base) / base) * 100).toFixed(1)}%)`,
    );

    // Commit-to-delivery latency, one at a time.
    await post(server, 'Subscription', {
      resourceType: 'Subscription',
      status: 'requested',
      reason: 'bench',
      criteria: 'Patient?identifier=urn:bench|hot',
      channel: { type: 'rest-hook', endpoint: receiver.url, payload: 'application/fhir+json' },
    });
    const hot: Patient = { resourceType: 'Patient', identifier: [{ system: 'urn:bench', value: 'hot' }] };
    const latencies: number[] = [];
    for (let i = 0; i < LATENCY_SAMPLES; i++) {
      const before = receiver.received.length;
      await post(server, 'Patient', hot);
      const committed = Date.now();
      await receiver.until((r) => r.length > before);
      latencies.push(receiver.received[before].at - committed);
    }
    latencies.sort((a, b) => a - b);
    console.log(
      `commit-to-delivery (${LATENCY_SAMPLES} creates, one at a time): p50 ${percentile(latencies, 50)} ms, p95 ${percentile(latencies, 95)} ms, max ${latencies[latencies.length - 1]} ms`,
    );

    // Throughput: everything committed, then delivered by JOB_WORKERS workers.
    receiver.clear();
    const queueStarted = Date.now();
    const patients = Array.from({ length: THROUGHPUT }, (_, i) => ({ ...hot, id: `bench-${i}` }) as Patient);
    for (let i = 0; i < patients.length; i += 500)
      await server.core.repository.in('default').transaction((tx) => tx.putMany(patients.slice(i, i + 500)));
    const committedMs = Date.now() - queueStarted;
    await receiver.until((r) => r.length >= THROUGHPUT, 600_000);
    const totalMs = Date.now() - queueStarted;
    console.log(
      `throughput: ${THROUGHPUT} matching writes committed in ${committedMs} ms; all delivered ${totalMs} ms after the first commit: ${Math.round(THROUGHPUT / (totalMs / 1000))} deliveries/s (${WORKERS} workers)`,
    );
  } finally {
    await server.close();
    await receiver.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
