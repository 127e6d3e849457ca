import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../test/helpers/process';

/** What the benchmark and the soak share: starting processes, waiting for them, measuring them. */

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const FHIR_JSON = 'application/fhir+json';

/**
 * The arguments `npm start` gives node (package.json's start script): benchmarks run the server
 * exactly so, V8's memory settings included.
 */
export const START_ARGS: string[] = (
  JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }
).scripts.start
  .split(/\s+/)
  .filter((word) => word !== 'exec')
  .slice(1);

/** `node <args>` (one process, whose pid is the server's; not through the tsx or npm CLIs). */
export function startProcess(args: string[], env: Record<string, string>): ChildProcess {
  // BENCH_CPU_PROF=<dir>: each server started writes a V8 CPU profile there when it stops.
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  return spawn(process.execPath, [...profile, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', process.env.BENCH_STDOUT ? 'inherit' : 'ignore', 'inherit'],
  });
}

export async function waitForOk(url: string, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    try {
      const res = await fetch(url);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no answer from ${url} within ${timeoutMs} ms`);
}

export function rssMb(pid: number | undefined): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return Math.round(kb / 1024);
}

/** User and system CPU time of these processes so far, in ms (/proc/<pid>/stat fields 14 and 15, in clock ticks of 10 ms). */
export function cpuMs(pids: (number | undefined)[]): number {
  let ticks = 0;
  for (const pid of pids) {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    ticks += Number(fields[11]) + Number(fields[12]);
  }
  return ticks * 10;
}

/**
 * The limit's server (bench/bare-server.ts) on a free port, once it answers; `env` may set
 * BARE_WORK_US. Stopped again when it does not come up.
 */
export async function startBareServer(
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; port: number; base: string }> {
  const port = await freePort();
  const child = startProcess(['--import', 'tsx', 'bench/bare-server.ts'], { PORT: String(port), ...env });
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitForOk(`${base}/fhir/R4/Patient`, 20_000);
  } catch (err) {
    await stop(child);
    throw err;
  }
  return { child, port, base };
}

export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

/**
 * The built server (dist/server.mjs, as `npm start` runs it) on SQLite in a fresh data folder, for
 * the duration of `work`; stopped and its folder removed afterwards, whatever happens.
 */
export async function withBuiltServer(
  name: string,
  env: Record<string, string>,
  work: (base: string, server: ChildProcess) => Promise<void>,
): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), `fhir-bench-${name}-`));
  const port = await freePort();
  const server = startProcess(START_ARGS, {
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    AUTH_TOKENS: '',
    ...env,
  });
  try {
    const base = `http://127.0.0.1:${port}/fhir/R4`;
    await waitForOk(`${base}/metadata`, 60_000);
    await work(base, server);
  } finally {
    await stop(server);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Runs a benchmark's main; a failure is printed and exits 1. */
export function runBench(main: () => Promise<void>): void {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
