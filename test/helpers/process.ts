import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = fileURLToPath(new URL('../..', import.meta.url));

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

export interface ServerProcess {
  child: ChildProcess;
  port: number;
  base: string;
  output: () => string;
  exited: Promise<number | null>;
}

/**
 * Starts the server from its sources (what `npm start` bundles and runs), in its own process.
 * `wrap` runs it under another command, e.g. `['prlimit', '--nofile=400', '--']`.
 */
export function startServer(
  env: Record<string, string>,
  port: number,
  options: { wrap?: string[] } = {},
): ServerProcess {
  let output = '';
  const [command, ...args] = [...(options.wrap ?? []), process.execPath, '--import', 'tsx', 'src/server.ts'];
  const child = spawn(command, args, {
    cwd: PROJECT_ROOT,
    env: { ...inheritedEnv(), PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (d) => (output += d));
  child.stderr?.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, port, base: `http://127.0.0.1:${port}/fhir/R4`, output: () => output, exited };
}

/** The test process's environment, less what vitest puts there for Vite (BASE_URL=/, which the server would read as its own). */
function inheritedEnv(): NodeJS.ProcessEnv {
  const { BASE_URL: _vite, ...rest } = process.env;
  return rest;
}

/**
 * Asks `check` again (every 20 ms) until it holds; fails naming `what` once `timeoutMs` passed.
 * For what another process does in its own time (a notice arriving, a worker restarted).
 */
export async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Polls until the server answers metadata, or the process dies. */
export async function waitForServer(server: ServerProcess, timeoutMs = 30_000): Promise<void> {
  const start = Date.now();
  while (Date.now() - start < timeoutMs) {
    if (server.child.exitCode !== null) throw new Error(`server exited: ${server.output()}`);
    try {
      const res = await fetch(`${server.base}/metadata`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`server did not answer within ${timeoutMs} ms: ${server.output()}`);
}
