/**
 * npm run bench:tho: HL7 Terminology (hl7.terminology.r4, the devDependency) imported by the
 * command line into a fresh embedded database (twice: the second import changes nothing), then
 * the built server (dist/server.mjs, as `npm start` runs it) started ROUNDS times over it, and
 * over an empty database for comparison: time from process start to the first answer of a
 * $validate-code against a THO value set, the CPU time the server used until then (what the
 * wall time would be on an idle machine with a core to itself, about), and its RSS after it. With DATABASE_URL set
 * the import and the servers use that PostgreSQL instead (its schema should be empty).
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../test/helpers/process';
import { cpuMs, ROOT, rssMb, START_ARGS } from './harness';

const ROUNDS = Number(process.env.ROUNDS ?? 3);
const QUESTION =
  '/ValueSet/$validate-code?url=http://terminology.hl7.org/ValueSet/v3-ActEncounterCode&system=http://terminology.hl7.org/CodeSystem/v3-ActCode&code=AMB';

function importTho(env: NodeJS.ProcessEnv): string {
  const started = Date.now();
  const run = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/import.ts', 'node_modules/hl7.terminology.r4'], {
    cwd: ROOT,
    env,
    encoding: 'utf8',
  });
  if (run.status !== 0) throw new Error(`import failed: ${run.stderr}`);
  const summary = /^\s+(\d+ resources in .*)$/m.exec(run.stdout)?.[1] ?? run.stdout;
  return `${summary}; command ${((Date.now() - started) / 1000).toFixed(1)} s`;
}

/** Milliseconds from spawning the server to its first answer, and its RSS (MB) then. */
async function coldStart(
  env: NodeJS.ProcessEnv,
): Promise<{ ms: number; cpuMs: number; rssMb: number; answer: string }> {
  const port = await freePort();
  const started = performance.now();
  const child = spawn(process.execPath, START_ARGS, {
    cwd: ROOT,
    env: { ...env, PORT: String(port), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let errors = '';
  child.stderr.on('data', (d) => (errors += d));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}: ${errors}`);
      try {
        const res = await fetch(`http://127.0.0.1:${port}/fhir/R4${QUESTION}`);
        const body = (await res.json()) as {
          parameter?: { name: string; valueBoolean?: boolean; valueString?: string }[];
        };
        const ms = performance.now() - started;
        // The CPU time is the work, whatever else runs.
        const cpu = cpuMs([child.pid]);
        const get = (name: string) => body.parameter?.find((p) => p.name === name);
        return {
          ms: Math.round(ms),
          cpuMs: cpu,
          rssMb: rssMb(child.pid),
          answer: `${res.status} result=${get('result')?.valueBoolean} version=${get('version')?.valueString}`,
        };
      } catch (err) {
        if (!(err instanceof TypeError)) throw err;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    }
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

async function main(): Promise<void> {
  const withTho = mkdtempSync(join(tmpdir(), 'bench-tho-'));
  const empty = mkdtempSync(join(tmpdir(), 'bench-empty-'));
  try {
    const thoEnv = { ...process.env, DATA_DIR: withTho };
    console.log(`first import:  ${importTho(thoEnv)}`);
    console.log(`second import: ${importTho(thoEnv)}`);
    for (const [name, env] of [
      ['THO loaded', thoEnv],
      ['empty', { ...process.env, DATA_DIR: empty, DATABASE_URL: '' }],
    ] as const) {
      for (let round = 1; round <= ROUNDS; round++) {
        const { ms, cpuMs, rssMb, answer } = await coldStart(env);
        console.log(
          `${name.padEnd(10)} round ${round}: first answer after ${ms} ms (server CPU ${cpuMs} ms), RSS ${rssMb} MB (${answer})`,
        );
      }
    }
  } finally {
    rmSync(withTho, { recursive: true, force: true });
    rmSync(empty, { recursive: true, force: true });
  }
}

await main();
