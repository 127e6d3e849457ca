import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../test/helpers/process';
import { clinicalExamples, readExample } from '../test/validation/corpus';
import { SqliteStore } from '../src/storage/sqlite/sqlite-store';
import { loadCoreContent } from '../src/content/core-content';
import { StoredTerminologies } from '../src/content/stored-terminology';
import { TerminologyService } from '../src/terminology/service';
import { terminologyPort } from '../src/validation/terminology-port';
import { ResourceValidator } from '../src/validation/validator';
import { FHIR_JSON, ROOT, rssMb, startProcess, stop, waitForOk, START_ARGS } from './harness';

/**
 * Resource validation speed. In process, pinned to one core (taskset): the 708 R4 examples under
 * 1 MB, bindings checked by the terminology engine, once to warm up (every type compiled), then
 * ROUNDS measured passes (the best reported: the machine is shared). Also: the engine's first
 * validation (definitions indexed, FHIRPath engine loaded), the first validation of each further
 * type, a warm pass with the binding verdicts forgotten, and, over HTTP on the built server, cold
 * start and the first $validate answers.
 *
 * `npm run bench` runs it after the HTTP scenarios; `npx tsx bench/validation.ts` alone.
 */

const ROUNDS = 3;
const DEADLINE_MS = 60_000;

/** Figures by name; `firstOfNewTypeSlowest` names the slowest first validations (`Type ms`). */
export type ValidationFigures = Record<string, number | string>;

interface Example {
  file: string;
  resource: Record<string, unknown>;
}

function examples(): Example[] {
  return clinicalExamples()
    .filter((e) => e.size < 1_000_000)
    .map((e) => ({ file: e.file, resource: readExample(e.file) }));
}

async function timed(work: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await work();
  return performance.now() - start;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const percentile = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];
const round = (x: number, digits = 1) => Number(x.toFixed(digits));

/** One pass over the examples: total ms and each resource's ms. */
async function pass(validator: ResourceValidator, all: Example[]): Promise<{ total: number; each: number[] }> {
  const each: number[] = [];
  const start = performance.now();
  for (const { resource } of all)
    each.push(
      await timed(() => validator.validate(resource, { deadline: Date.now() + DEADLINE_MS, project: 'default' })),
    );
  return { total: performance.now() - start, each };
}

/** The figures of the engine itself, in this process. */
export async function inProcess(): Promise<ValidationFigures> {
  const all = examples();
  const store = new SqliteStore(':memory:');
  await store.migrate();
  const terminology = new TerminologyService(loadCoreContent(), new StoredTerminologies(store));
  const validator = new ResourceValidator({ terminology: terminologyPort(terminology) });
  const figures: ValidationFigures = { examples: all.length };

  const byType = new Map<string, Example>();
  for (const e of all) if (!byType.has(String(e.resource.resourceType))) byType.set(String(e.resource.resourceType), e);
  const [first, ...others] = [...byType.values()];
  figures.firstValidationMs = round(
    await timed(() => validator.validate(first.resource, { deadline: Date.now() + DEADLINE_MS, project: 'default' })),
  );
  // Then the first resource of each of 40 further types: each compiles its type's definition.
  const firstTypes = others.slice(0, 40).map((e) => e.resource);
  const byNewType: { type: string; ms: number }[] = [];
  for (const resource of firstTypes) {
    byNewType.push({
      type: String(resource.resourceType),
      ms: await timed(() => validator.validate(resource, { deadline: Date.now() + DEADLINE_MS, project: 'default' })),
    });
  }
  const newType = byNewType.map((t) => t.ms);
  figures.firstOfNewTypeMedianMs = round(median(newType));
  figures.firstOfNewTypeP90Ms = round(percentile(newType, 0.9));
  figures.firstOfNewTypeMaxMs = round(Math.max(...newType));
  figures.firstOfNewTypeSlowest = [...byNewType]
    .sort((a, b) => b.ms - a.ms)
    .slice(0, 5)
    .map((t) => `${t.type} ${round(t.ms)}`)
    .join(', ');

  const warmup = await pass(validator, all);
  figures.warmupPassMs = Math.round(warmup.total);
  const rounds = [];
  for (let i = 0; i < ROUNDS; i++) rounds.push(await pass(validator, all));
  const best = rounds.reduce((a, b) => (a.total <= b.total ? a : b));
  figures.warmTotalMs = Math.round(best.total);
  figures.warmMedianMs = round(median(best.each), 3);
  figures.warmP90Ms = round(percentile(best.each, 0.9), 3);
  figures.warmMaxMs = round(Math.max(...best.each));
  figures.warmTotalWorstRoundMs = Math.round(Math.max(...rounds.map((r) => r.total)));

  // Definitions compiled, binding verdicts not kept: every code goes to the terminology engine.
  const freshVerdicts = new ResourceValidator({
    library: validator.library,
    terminology: terminologyPort(terminology),
  });
  const fresh = await pass(freshVerdicts, all);
  figures.warmWithoutVerdictMemoMs = Math.round(fresh.total);
  figures.warmWithoutVerdictMemoMedianMs = round(median(fresh.each), 3);
  figures.heapUsedMb = Math.round(process.memoryUsage().heapUsed / 1024 / 1024);
  await store.close();
  return figures;
}

/** Through the built server: cold start, the first $validate (engine loaded on demand), the first of a second type. */
export async function overHttp(): Promise<ValidationFigures> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const dataDir = mkdtempSync(join(tmpdir(), 'fhir-bench-validate-'));
  const started = Date.now();
  const server = startProcess(START_ARGS, {
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    AUTH_TOKENS: '',
  });
  const figures: ValidationFigures = {};
  try {
    await waitForOk(`${base}/fhir/R4/metadata`, 30_000);
    figures.coldStartMs = Date.now() - started;
    figures.rssAtStartMb = rssMb(server.pid);
    const post = async (resource: Record<string, unknown>) => {
      const start = performance.now();
      const res = await fetch(`${base}/fhir/R4/${String(resource.resourceType)}/$validate`, {
        method: 'POST',
        headers: { 'content-type': FHIR_JSON },
        body: JSON.stringify(resource),
      });
      if (res.status !== 200) throw new Error(`$validate answered ${res.status}: ${await res.text()}`);
      await res.text();
      return performance.now() - start;
    };
    const all = examples();
    const patient = all.find((e) => e.file === 'Patient-example.json') as Example;
    const observation = all.find((e) => e.file === 'Observation-example.json') as Example;
    figures.httpFirstValidateMs = round(await post(patient.resource));
    figures.httpFirstOfSecondTypeMs = round(await post(observation.resource));
    figures.httpSecondValidateMs = round(await post(patient.resource));
    const each = [];
    for (const e of all) each.push(await post(e.resource));
    figures.httpAllExamplesMs = Math.round(each.reduce((a, b) => a + b, 0));
    figures.rssAfterExamplesMb = rssMb(server.pid);
  } finally {
    await stop(server);
    rmSync(dataDir, { recursive: true, force: true });
  }
  return figures;
}

/** Runs the in-process part pinned to one core (a child process under taskset when there is one). */
export async function validationBench(): Promise<ValidationFigures> {
  const pinned = spawnSync(
    'taskset',
    ['-c', '0', process.execPath, '--import', 'tsx', 'bench/validation.ts', '--in-process'],
    {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const inProc =
    pinned.status === 0
      ? (JSON.parse(pinned.stdout.trim().split('\n').pop() as string) as ValidationFigures)
      : await inProcess();
  const http = await overHttp();
  return { ...inProc, ...http, pinnedToOneCore: pinned.status === 0 ? 1 : 0 };
}

const self = import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('bench/validation.ts');
if (self) {
  if (process.argv.includes('--in-process')) {
    inProcess().then(
      (f) => console.log(JSON.stringify(f)),
      (err: unknown) => {
        console.error(err);
        process.exit(1);
      },
    );
  } else {
    validationBench().then(
      (f) => console.log(JSON.stringify(f, null, 2)),
      (err: unknown) => {
        console.error(err);
        process.exit(1);
      },
    );
  }
}
