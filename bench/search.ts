import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Bundle, Observation, Patient, Resource } from 'fhir/r4';
import { schemaIn } from '../test/helpers/schema';
import { freePort } from '../test/helpers/process';
import { syntheaResources } from '../test/helpers/synthea';
import { ROOT, rssMb, startBareServer, startProcess, stop, waitForOk, START_ARGS } from './harness';
import { loadByTransactions, README_COUNTS } from './synthea-load';

/**
 * `npm run bench:search`: the whole Synthea set (102 transaction Bundles, 38,970 resources) POSTed
 * to the server (as `npm start` runs it) on SQLite and, when BENCH_DATABASE_URL (or
 * TEST_DATABASE_URL) names one, on PostgreSQL, with the per-type counts checked against the data's
 * README; a full reindex timed; then distinct one- and two-parameter searches, from one client
 * alone and from 16 concurrent clients, for BENCH_SECONDS each, reported as p50/p95/p99 latency
 * and req/s, and as a ratio to the limit: a bare Fastify server answering a search's bytes, driven
 * the same way right before.
 */

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
/** Searches run by one client alone (the latency a user sees) and by 16 at once (the server saturated). */
const CONCURRENCIES = [1, 16];
const PG_URL = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL;
/** `BENCH_LOAD_ONLY=1`: load and reindex, no searches (for work on the write path). */
const LOAD_ONLY = process.env.BENCH_LOAD_ONLY === '1';
/** `BENCH_BACKENDS=sqlite` (or `postgres`): only those backends. */
const BACKENDS = (process.env.BENCH_BACKENDS ?? 'sqlite,postgres').split(',');

/**
 * A full reindex as a user runs it (`npm run reindex`: its own process, over the storage the
 * server used); answers the time the command reports for the reindex itself.
 */
async function reindexAll(env: Record<string, string>): Promise<number> {
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  const child = spawn(process.execPath, [...profile, '--import', 'tsx', 'src/cli/reindex.ts'], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  const seconds = /reindexed \d+ resources in ([\d.]+) s/.exec(stderr)?.[1];
  if (code !== 0 || seconds === undefined) throw new Error(`npm run reindex failed (exit ${code}): ${stderr}`);
  return Number(seconds) * 1000;
}

interface Latencies {
  requests: number;
  perSecond: number;
  p50: number;
  p95: number;
  p99: number;
  failures: number;
}

/** Concurrent clients, each sending the next distinct path as soon as its answer is read. */
async function drive(port: number, paths: () => string, concurrency: number): Promise<Latencies> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const times: number[] = [];
  let failures = 0;
  const end = Date.now() + SECONDS * 1000;
  const one = (path: string) =>
    new Promise<void>((resolve) => {
      const started = process.hrtime.bigint();
      const req = request({ host: '127.0.0.1', port, path, agent }, (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode !== 200) failures++;
          times.push(Number(process.hrtime.bigint() - started) / 1e6);
          resolve();
        });
      });
      req.on('error', () => {
        failures++;
        resolve();
      });
      req.end();
    });
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < end) await one(paths());
    }),
  );
  agent.destroy();
  times.sort((a, b) => a - b);
  const at = (q: number) => Math.round(times[Math.min(times.length - 1, Math.floor(q * times.length))] * 10) / 10;
  return {
    requests: times.length,
    perSecond: Math.round(times.length / SECONDS),
    p50: at(0.5),
    p95: at(0.95),
    p99: at(0.99),
    failures,
  };
}

function scenarios(resources: Resource[]): [string, () => string][] {
  const patients = resources.filter((r): r is Patient => r.resourceType === 'Patient');
  const observations = resources.filter((r): r is Observation => r.resourceType === 'Observation');
  const codes = [...new Set(observations.map((o) => o.code.coding?.[0].code as string))];
  const families = [...new Set(patients.map((p) => (p.name?.[0].family as string).slice(0, 3)))];
  let n = 0;
  const pick = <T>(list: T[]) => list[n++ % list.length];
  return [
    ['Patient?gender=<g>', () => `/fhir/R4/Patient?gender=${pick(['male', 'female'])}`],
    ['Patient?family=<prefix>', () => `/fhir/R4/Patient?family=${encodeURIComponent(pick(families))}`],
    ['Observation?code=<loinc>', () => `/fhir/R4/Observation?code=http://loinc.org|${pick(codes)}`],
    ['Observation?patient=<id>', () => `/fhir/R4/Observation?patient=Patient/${pick(patients).id}`],
    [
      'Observation?patient&code&_sort=-date&_count=5',
      () =>
        `/fhir/R4/Observation?patient=Patient/${pick(patients).id}&code=http://loinc.org|${pick(codes)}&_sort=-date&_count=5`,
    ],
    [
      'Encounter?patient=<id>&date=ge<year>',
      () => `/fhir/R4/Encounter?patient=${pick(patients).id}&date=ge${2000 + (n % 20)}`,
    ],
    [
      'Patient?_has:Observation:patient:code',
      () => `/fhir/R4/Patient?_has:Observation:patient:code=http://loinc.org|${pick(codes)}`,
    ],
  ];
}

/**
 * Pages through every Observation 1,000 at a time while another client, between pages, creates
 * an Observation and updates one of the first page: each Observation there before the paging must
 * come exactly once (the data's README count), the new ones at most once. Throws otherwise.
 */
async function pageWhileWriting(port: number): Promise<{ originals: number; pages: number; writes: number }> {
  const base = `http://127.0.0.1:${port}/fhir/R4`;
  const seen = new Map<string, number>();
  let url: string | undefined = `${base}/Observation?_count=1000`;
  let pages = 0;
  let writes = 0;
  let first: Observation | undefined;
  while (url) {
    const page = (await (await fetch(url)).json()) as Bundle;
    pages++;
    for (const entry of page.entry ?? []) {
      const id = entry.resource?.id as string;
      seen.set(id, (seen.get(id) ?? 0) + 1);
      first ??= entry.resource as Observation;
    }
    if (first) {
      const put = (id: string, body: Observation) =>
        fetch(`${base}/Observation/${id}`, {
          method: 'PUT',
          headers: { 'content-type': 'application/fhir+json' },
          body: JSON.stringify(body),
        }).then(async (res) => {
          if (res.status >= 300) throw new Error(`PUT Observation/${id}: ${res.status} ${await res.text()}`);
        });
      await put(`paging-new-${writes}`, { ...first, id: `paging-new-${writes}`, meta: undefined });
      await put(first.id as string, { ...first, status: writes % 2 === 0 ? 'amended' : 'final', meta: undefined });
      writes++;
    }
    const next = page.link?.find((l) => l.relation === 'next')?.url;
    url = next ? `${base}${next.slice(next.indexOf('/fhir/R4') + '/fhir/R4'.length)}` : undefined;
  }
  const originals = [...seen].filter(([id]) => !id.startsWith('paging-new-'));
  const twice = [...seen].filter(([, n]) => n > 1);
  if (twice.length > 0 || originals.length !== README_COUNTS.Observation) {
    throw new Error(
      `paging while writing: ${originals.length} of ${README_COUNTS.Observation} Observations, ${twice.length} seen more than once`,
    );
  }
  return { originals: originals.length, pages, writes };
}

async function main(): Promise<void> {
  const resources = syntheaResources();
  console.log(`Synthea: ${resources.length} resources`);
  const backends: { name: string; dataDir: string; databaseUrl?: string; cleanup: () => Promise<void> }[] = [];
  const dataDir = mkdtempSync(join(tmpdir(), 'fhir-bench-search-'));
  // The data folder (SQLite's database, PostgreSQL's run's files) is removed once, at the end.
  if (BACKENDS.includes('sqlite')) backends.push({ name: 'sqlite', dataDir, cleanup: async () => undefined });
  if (PG_URL && BACKENDS.includes('postgres')) {
    const schema = await schemaIn(PG_URL);
    backends.push({ name: 'postgres', dataDir, databaseUrl: schema.url, cleanup: schema.drop });
  }
  // The limit: bare Fastify answering a fixed body of the scenario's size, kept running.
  const { child: bare, port: barePort } = await startBareServer();
  try {
    for (const backend of backends) {
      const port = await freePort();
      const env: Record<string, string> = {
        PORT: String(port),
        HOST: '127.0.0.1',
        DATA_DIR: backend.dataDir,
        LOG_LEVEL: 'warn',
        AUTH_TOKENS: '',
        BODY_LIMIT: '64mb',
      };
      if (backend.databaseUrl) env.DATABASE_URL = backend.databaseUrl;
      let server = startProcess(START_ARGS, env);
      try {
        await waitForOk(`http://127.0.0.1:${port}/fhir/R4/metadata`, 60_000);
        const loaded = await loadByTransactions(port);
        console.log(
          `${backend.name}: 102 Synthea transactions, ${loaded.resources} resources, in ${(loaded.ms / 1000).toFixed(1)} s ` +
            `(${Math.round(loaded.resources / (loaded.ms / 1000))} resources/s); per-type counts equal the data's README`,
        );
        await stop(server);
        const reindexMs = await reindexAll(env);
        console.log(
          `${backend.name}: reindexed ${loaded.resources} in ${(reindexMs / 1000).toFixed(1)} s (${Math.round(loaded.resources / (reindexMs / 1000))}/s)`,
        );
        if (LOAD_ONLY) continue;
        server = startProcess(START_ARGS, env);
        await waitForOk(`http://127.0.0.1:${port}/fhir/R4/metadata`, 60_000);
        const paged = await pageWhileWriting(port);
        console.log(
          `${backend.name}: paged through ${paged.originals} Observations 1,000 at a time in ${paged.pages} pages while another client wrote ${paged.writes} times: each exactly once`,
        );
        console.log(`${'scenario'.padEnd(48)} clients   req/s    p50    p95    p99  fail  limit  ratio`);
        for (const [name, paths] of scenarios(resources)) {
          await drive(port, paths, 16); // warm-up, unmeasured
          // The limit answers the scenario's median-sized answer (of 11 taken) to every request.
          const samples = await Promise.all(
            Array.from({ length: 11 }, async () => (await fetch(`http://127.0.0.1:${port}${paths()}`)).text()),
          );
          const median = samples.sort((a, b) => a.length - b.length)[5];
          await fetch(`http://127.0.0.1:${barePort}/__answer`, {
            method: 'PUT',
            headers: { 'content-type': 'application/fhir+json' },
            body: median,
          });
          for (const concurrency of CONCURRENCIES) {
            // Limit first, then the server: both figures of a ratio from the same minute.
            const limit = await drive(barePort, paths, concurrency);
            const r = await drive(port, paths, concurrency);
            console.log(
              `${`${backend.name} ${name}`.padEnd(48)} ${String(concurrency).padStart(7)} ${String(r.perSecond).padStart(7)} ` +
                `${String(r.p50).padStart(6)} ${String(r.p95).padStart(6)} ${String(r.p99).padStart(6)} ${String(r.failures).padStart(5)} ` +
                `${String(limit.perSecond).padStart(6)} ${(r.perSecond / limit.perSecond).toFixed(2).padStart(6)}`,
            );
          }
        }
        console.log(`${backend.name} server RSS after the searches: ${rssMb(server.pid)} MB`);
      } finally {
        await stop(server);
      }
    }
  } finally {
    await stop(bare);
    for (const b of backends) await b.cleanup();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
