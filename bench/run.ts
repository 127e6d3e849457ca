import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { schemaIn } from '../test/helpers/schema';
import { freePort } from '../test/helpers/process';
import { cpuMs, FHIR_JSON, ROOT, rssMb, startBareServer, startProcess, stop, waitForOk, START_ARGS } from './harness';
import { syntheticContent, SYNTHETIC_EXPAND_VS_URL, SYNTHETIC_URL, SYNTHETIC_VS_URL } from './synthetic';
import { expandPool, lookupPool, validateCodePool } from './validate-code-pool';
import { validationBench } from './validation';

/**
 * `npm run bench`: the server (embedded storage, full R4 content) in its own process, driven by
 * autocannon from this one over loopback, next to a bare Fastify server that answers a fixed
 * Parameters body: each scenario's throughput is reported as a ratio of that limit, so results
 * compare across machines and noisy runs. Bounded: ROUNDS x (1 s warm-up + BENCH_SECONDS, default 3)
 * per scenario, connection count and server.
 */

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const ROUNDS = 3;
const CALIBRATION_WORK_US = 30;
const CONNECTIONS = [10, 64];
const GENDER_VS = 'http://hl7.org/fhir/ValueSet/administrative-gender';
const GENDER = 'http://hl7.org/fhir/administrative-gender';

interface Run {
  scenario: string;
  connections: number;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
  /** Bare Fastify's req/s, measured just before. */
  limit?: number;
  ratio?: number;
  /** Peak RSS of the server (all its processes) while the scenario ran. */
  serverRssMb?: number;
  /** CPU time (user + system, all the server's processes) per answered request, in µs. */
  cpuUsPerRequest?: number;
  /** The same for the limit, measured just before. */
  limitCpuUsPerRequest?: number;
}

interface Load {
  method?: 'GET' | 'POST';
  path: string;
  body?: string;
  /** A different path per request (paging). */
  paths?: () => string;
  /** A different body per request. */
  bodies?: () => string;
}

const WARMUP_SECONDS = 1;

/** One measured run, after a short unmeasured one: the JIT and caches warm up outside the numbers. */
type Measured = Omit<Run, 'scenario' | 'connections'>;

/**
 * `pids`: the processes serving `base`, whose CPU time per request is reported: on a machine the
 * load generator shares, the server's own cost per request, whatever the load generator got.
 */
async function drive(base: string, load: Load, connections: number, pids: () => number[]): Promise<Measured> {
  await shoot(base, load, connections, WARMUP_SECONDS);
  const before = cpuMs(pids());
  const measured = await shoot(base, load, connections, SECONDS);
  const answered = measured.requestsPerSecond * SECONDS;
  return {
    ...measured,
    cpuUsPerRequest: answered > 0 ? Math.round(((cpuMs(pids()) - before) * 1000) / answered) : undefined,
  };
}

async function shoot(base: string, load: Load, connections: number, seconds: number): Promise<Measured> {
  const result = await autocannon({
    url: base,
    connections,
    duration: seconds,
    requests: [
      {
        method: load.method ?? 'GET',
        path: load.path,
        headers: load.body ? { 'content-type': FHIR_JSON } : {},
        body: load.body,
        ...(load.paths || load.bodies
          ? {
              setupRequest: (req: autocannon.Request) => ({
                ...req,
                ...(load.paths ? { path: load.paths() } : {}),
                ...(load.bodies ? { body: load.bodies() } : {}),
              }),
            }
          : {}),
      },
    ],
  });
  return {
    requestsPerSecond: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
  };
}

const params = (...entries: object[]) => JSON.stringify({ resourceType: 'Parameters', parameter: entries });
const query = (values: Record<string, string>) => new URLSearchParams(values).toString();

/**
 * Each request the next of a pool of distinct requests; past the pool's end a pass number is
 * added, so a request still never repeats (the answer cache cannot serve it).
 */
function distinct(pool: string[]): Load {
  let drawn = 0;
  return {
    path: pool[0],
    paths: () => {
      const path = pool[drawn % pool.length];
      const passNumber = Math.floor(drawn++ / pool.length);
      return passNumber === 0 ? path : `${path}&pass=${passNumber}`;
    },
  };
}

/**
 * The validate-code pool's requests as POSTed Parameters (url, system, code, display); past the
 * pool's end the URL carries a pass number (ignored by the operation), so no request repeats.
 */
function distinctPosts(pool: string[]): Load {
  const body = (path: string) => {
    const q = new URLSearchParams(path.slice(path.indexOf('?') + 1));
    const entries: object[] = [
      { name: 'url', valueUri: q.get('url') },
      { name: 'system', valueUri: q.get('system') },
      { name: 'code', valueCode: q.get('code') },
    ];
    if (q.has('display')) entries.push({ name: 'display', valueString: q.get('display') });
    return params(...entries);
  };
  const path = '/fhir/R4/ValueSet/$validate-code';
  let drawn = 0;
  let pass = 0;
  return {
    method: 'POST',
    path,
    body: body(pool[0]),
    // autocannon asks for the path, then the body, of each request.
    paths: () => (pass === 0 ? path : `${path}?pass=${pass}`),
    bodies: () => {
      const next = body(pool[drawn % pool.length]);
      pass = Math.floor(++drawn / pool.length);
      return next;
    },
  };
}

/**
 * The built server (what `npm start` runs; `npm run bench` builds it first) with `env` for the
 * duration of `work`, which gets its base URL, a function naming its processes (a WORKERS primary
 * and its workers) and the milliseconds from the process's start to its first validate-code answer.
 */
async function withServer(
  env: Record<string, string>,
  work: (base: string, pids: () => number[], readyMs: number) => Promise<void>,
): Promise<void> {
  const port = await freePort();
  const started = Date.now();
  const server = startProcess(START_ARGS, {
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    AUTH_TOKENS: '',
    ...env,
  });
  const base = `http://127.0.0.1:${port}`;
  const pid = server.pid as number;
  const children = () =>
    readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  try {
    await waitForOk(
      `${base}/fhir/R4/ValueSet/$validate-code?${query({ url: GENDER_VS, system: GENDER, code: 'female' })}`,
      60_000,
    );
    await work(base, () => [pid, ...children()], Date.now() - started);
  } finally {
    await stop(server);
  }
}

async function main(): Promise<void> {
  const synthetic = syntheticContent();
  const dataDir = mkdtempSync(join(tmpdir(), 'fhir-bench-'));
  const runs: Run[] = [];
  const facts: Record<string, number> = {};
  const print = (run: Run) => {
    runs.push(run);
    const cells = [
      run.scenario.padEnd(62),
      String(run.connections).padStart(4),
      String(run.requestsPerSecond).padStart(8),
      String(run.p50).padStart(5),
      String(run.p99).padStart(5),
    ];
    cells.push(
      String(run.errors + run.non2xx).padStart(6),
      String(run.limit ?? '').padStart(6),
      (run.ratio === undefined ? '' : run.ratio.toFixed(2)).padStart(6),
      String(run.serverRssMb ?? '').padStart(6),
    );
    cells.push(String(run.cpuUsPerRequest ?? '').padStart(6), String(run.limitCpuUsPerRequest ?? '').padStart(6));
    console.log(cells.join(' '));
  };

  // The limit: bare Fastify, kept running; measured right before each scenario run, so both
  // numbers of a ratio come from the same minute of a machine whose speed drifts.
  const { child: bare, base: bareBase } = await startBareServer();

  /**
   * A scenario runner against one server: rounds alternate the limit and the scenario (the ratio
   * reported is the median of the rounds'); the server's RSS (all its processes) is sampled every
   * 50 ms while it runs and the peak reported.
   */
  const scenarioOn = (base: string, pids: () => number[], label: string) => async (name: string, load: Load) => {
    // The limit sends the very answer the server gives for this scenario, on its route, to the
    // same stream of requests (distinct paths and bodies cost the load generator, which shares the
    // machine, as much for the limit as for the server).
    const sample = await fetch(
      `${base}${load.path}`,
      load.body ? { method: 'POST', headers: { 'content-type': FHIR_JSON }, body: load.body } : {},
    );
    await fetch(`${bareBase}/__answer`, {
      method: 'PUT',
      headers: { 'content-type': FHIR_JSON },
      body: await sample.text(),
    });
    for (const connections of CONNECTIONS) {
      let peak = 0;
      const sampler = setInterval(() => {
        peak = Math.max(
          peak,
          pids().reduce((sum, pid) => sum + rssMb(pid), 0),
        );
      }, 50);
      const rounds: { limit: Measured; measured: Measured }[] = [];
      try {
        for (let round = 0; round < ROUNDS; round++) {
          const limit = await drive(bareBase, load, connections, () => [bare.pid as number]);
          const measured = await drive(base, load, connections, pids);
          rounds.push({ limit, measured });
        }
      } finally {
        clearInterval(sampler);
      }
      rounds.sort(
        (a, b) =>
          a.measured.requestsPerSecond / a.limit.requestsPerSecond -
          b.measured.requestsPerSecond / b.limit.requestsPerSecond,
      );
      const { limit, measured } = rounds[Math.floor(rounds.length / 2)];
      const errors = rounds.reduce((n, r) => n + r.measured.errors, 0);
      const non2xx = rounds.reduce((n, r) => n + r.measured.non2xx, 0);
      print({
        scenario: `${label}${name}`,
        connections,
        ...measured,
        errors,
        non2xx,
        limit: limit.requestsPerSecond,
        ratio: measured.requestsPerSecond / limit.requestsPerSecond,
        serverRssMb: peak,
        limitCpuUsPerRequest: limit.cpuUsPerRequest,
      });
    }
  };

  // Calibration: the limit's own route spending 30 µs of CPU more per answer. The ratio it reaches
  // says what a ratio means on this machine (the load generator shares the cores, and a server
  // slower than it pays for waking it on every answer).
  const { child: calibration, base: calibrationBase } = await startBareServer({
    BARE_WORK_US: String(CALIBRATION_WORK_US),
  });
  try {
    console.log(`${'scenario'.padEnd(62)} conn    req/s   p50   p99 errors  limit  ratio peakMB  µs/rq  limit`);
    await scenarioOn(
      calibrationBase,
      () => [calibration.pid as number],
      '',
    )(
      `0 calibration: the limit + ${CALIBRATION_WORK_US} µs CPU per answer, distinct`,
      distinct(validateCodePool(Number.MAX_SAFE_INTEGER)),
    );
  } finally {
    await stop(calibration);
  }

  // Cold start: process start to the first answered validate-code, with the full R4 content.
  try {
    await withServer({ DATA_DIR: dataDir, BODY_LIMIT: String(64 * 1024 * 1024) }, async (base, pids, readyMs) => {
      facts.coldStartMs = readyMs;
      facts.rssWithR4Mb = rssMb(pids()[0]);
      console.log(
        `cold start to first validate-code: ${facts.coldStartMs} ms; RSS with R4 content: ${facts.rssWithR4Mb} MB`,
      );

      const scenario = scenarioOn(base, pids, '');
      const vc = (values: Record<string, string>) => `/fhir/R4/ValueSet/$validate-code?${query(values)}`;
      await scenario('1 GET validate-code, core VS, hit', {
        path: vc({ url: GENDER_VS, system: GENDER, code: 'female' }),
      });
      await scenario('1 GET validate-code, core VS, miss', {
        path: vc({ url: GENDER_VS, system: GENDER, code: 'nonsense' }),
      });
      // Every request different (an extra parameter the operation ignores): no answer is reused,
      // so this is the engine's own speed.
      let n1 = 0;
      await scenario('1 GET validate-code, core VS, hit, uncached', {
        path: vc({ url: GENDER_VS, system: GENDER, code: 'female' }),
        paths: () => vc({ url: GENDER_VS, system: GENDER, code: 'female', nocache: String(n1++) }),
      });
      // Distinct real requests (bench/validate-code-pool.ts): what a validator checking coded
      // elements sends; none repeats, so the answer cache cannot serve it (the engine's own memos may).
      await scenario(
        '1 GET validate-code, distinct real requests',
        distinct(validateCodePool(Number.MAX_SAFE_INTEGER)),
      );
      await scenario('2 POST validate-code, coding', {
        method: 'POST',
        path: '/fhir/R4/ValueSet/$validate-code',
        body: params(
          { name: 'url', valueUri: GENDER_VS },
          { name: 'coding', valueCoding: { system: GENDER, code: 'male', display: 'Male' } },
        ),
      });
      await scenario('2 POST validate-code, codeableConcept x3', {
        method: 'POST',
        path: '/fhir/R4/ValueSet/$validate-code',
        body: params(
          { name: 'url', valueUri: GENDER_VS },
          {
            name: 'codeableConcept',
            valueCodeableConcept: {
              coding: [
                { system: 'http://example.org/local', code: 'F' },
                { system: GENDER, code: 'female' },
                { system: 'http://loinc.org', code: 'LA3-6' },
              ],
            },
          },
        ),
      });
      await scenario(
        '2 POST validate-code, distinct real requests',
        distinctPosts(validateCodePool(Number.MAX_SAFE_INTEGER)),
      );
      await scenario('5 GET lookup, distinct real requests', distinct(lookupPool()));
      await scenario('5 GET expand, distinct text filters, count=10', distinct(expandPool()));

      // The synthetic code system: PUT it and its value sets, then time to the first answer on it.
      const put = async (resource: { resourceType: string; id?: string }) => {
        const res = await fetch(`${base}/fhir/R4/${resource.resourceType}/${resource.id}`, {
          method: 'PUT',
          headers: { 'content-type': FHIR_JSON },
          body: JSON.stringify(resource),
        });
        if (!res.ok) throw new Error(`PUT ${resource.resourceType}/${resource.id}: ${res.status} ${await res.text()}`);
      };
      const loadStart = Date.now();
      await put(synthetic.codeSystem);
      await put(synthetic.branchValueSet);
      await put(synthetic.expandValueSet);
      await waitForOk(`${base}${vc({ url: SYNTHETIC_VS_URL, system: SYNTHETIC_URL, code: synthetic.hit })}`, 60_000);
      facts.syntheticLoadMs = Date.now() - loadStart;
      facts.rssWithSyntheticMb = rssMb(pids()[0]);
      console.log(
        `100,000-concept code system (depth ${synthetic.depth}): loaded and first answer in ${facts.syntheticLoadMs} ms; RSS now ${facts.rssWithSyntheticMb} MB (+${facts.rssWithSyntheticMb - facts.rssWithR4Mb} MB)`,
      );
      await scenario('3 GET validate-code, 100k is-a + exclude, hit', {
        path: vc({ url: SYNTHETIC_VS_URL, system: SYNTHETIC_URL, code: synthetic.hit }),
      });
      await scenario('3 GET validate-code, 100k is-a + exclude, miss', {
        path: vc({ url: SYNTHETIC_VS_URL, system: SYNTHETIC_URL, code: synthetic.excluded }),
      });
      let n3 = 0;
      await scenario('3 GET validate-code, 100k, hit, uncached', {
        path: vc({ url: SYNTHETIC_VS_URL, system: SYNTHETIC_URL, code: synthetic.hit }),
        paths: () => vc({ url: SYNTHETIC_VS_URL, system: SYNTHETIC_URL, code: synthetic.hit, nocache: String(n3++) }),
      });
      let page = 0;
      await scenario('4 GET expand 10,000 codes, count=100 paging', {
        path: `/fhir/R4/ValueSet/$expand?${query({ url: SYNTHETIC_EXPAND_VS_URL, count: '100', offset: '0' })}`,
        paths: () =>
          `/fhir/R4/ValueSet/$expand?${query({ url: SYNTHETIC_EXPAND_VS_URL, count: '100', offset: String((page++ % 100) * 100) })}`,
      });
    });
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }

  // The headline scenarios again: on PostgreSQL (when TEST_DATABASE_URL or BENCH_DATABASE_URL
  // names one), and with WORKERS=2 on SQLite (the load generator shares the two cores).
  const headline = async (scenario: (name: string, load: Load) => Promise<void>, all: boolean) => {
    await scenario('1 GET validate-code, core VS, hit', {
      path: `/fhir/R4/ValueSet/$validate-code?${query({ url: GENDER_VS, system: GENDER, code: 'female' })}`,
    });
    await scenario('1 GET validate-code, distinct real requests', distinct(validateCodePool(Number.MAX_SAFE_INTEGER)));
    if (!all) return;
    await scenario(
      '2 POST validate-code, distinct real requests',
      distinctPosts(validateCodePool(Number.MAX_SAFE_INTEGER)),
    );
    await scenario('5 GET lookup, distinct real requests', distinct(lookupPool()));
    await scenario('5 GET expand, distinct text filters, count=10', distinct(expandPool()));
  };
  const pgUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL;
  try {
    if (pgUrl) {
      const schema = await schemaIn(pgUrl);
      try {
        await withServer({ DATABASE_URL: schema.url }, async (base, pids) =>
          headline(scenarioOn(base, pids, 'PostgreSQL: '), true),
        );
      } finally {
        await schema.drop();
      }
    } else {
      console.log('PostgreSQL scenarios skipped: neither BENCH_DATABASE_URL nor TEST_DATABASE_URL is set');
    }
    const workersDir = mkdtempSync(join(tmpdir(), 'fhir-bench-workers-'));
    try {
      await withServer({ DATA_DIR: workersDir, WORKERS: '2' }, async (base, pids) =>
        headline(scenarioOn(base, pids, 'WORKERS=2: '), false),
      );
    } finally {
      rmSync(workersDir, { recursive: true, force: true });
    }
  } finally {
    await stop(bare);
  }

  // Resource validation ($validate): its own figures (bench/validation.ts).
  const validation = await validationBench();
  console.log('resource validation:', JSON.stringify(validation));
  const out = join(ROOT, 'bench', 'results.json');
  writeFileSync(
    out,
    `${JSON.stringify({ date: new Date().toISOString(), node: process.version, secondsPerRun: SECONDS, facts, runs, validation }, null, 2)}\n`,
  );
  console.log(`written ${out}`);
  const failed = runs.filter((r) => r.errors + r.non2xx > 0);
  if (failed.length > 0) {
    console.error(`errors or non-2xx answers in: ${failed.map((r) => `${r.scenario} (${r.connections})`).join(', ')}`);
    process.exitCode = 1;
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
