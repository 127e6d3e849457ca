import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { connect } from 'node:net';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { freePort, PROJECT_ROOT, startServer, waitForServer } from './helpers/process';

describe('the server process', () => {
  test('starts, answers, and on SIGTERM finishes in-flight work and exits 0', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'fhir-server-'));
    const server = startServer({ DATA_DIR: dataDir }, await freePort());
    await waitForServer(server);
    const metadata = await fetch(`${server.base}/metadata`);
    expect(metadata.headers.get('content-type')).toMatch(/^application\/fhir\+json/);
    expect(((await metadata.json()) as { fhirVersion: string }).fhirVersion).toBe('4.0.1');
    const put = await fetch(`${server.base}/Patient/p`, {
      method: 'PUT',
      headers: { 'content-type': 'application/fhir+json' },
      body: JSON.stringify({ resourceType: 'Patient', id: 'p' }),
    });
    expect(put.status).toBe(201);
    expect(server.output()).toContain('AUTH_TOKENS is not set');
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  });

  test('a connection on which no request was sent does not hold up a SIGTERM', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'fhir-server-'));
    // Without ending quiet connections, the close waits the whole drain time and the process exits 1.
    const server = startServer({ DATA_DIR: dataDir, DRAIN_TIMEOUT_MS: '20000' }, await freePort());
    await waitForServer(server);
    // Opened and left quiet, as HTTP clients open connections ahead of need.
    const quiet = connect(server.port, '127.0.0.1');
    await new Promise((resolve) => quiet.once('connect', resolve));
    const closedByServer = new Promise((resolve) => quiet.once('close', resolve));
    try {
      server.child.kill('SIGTERM');
      await closedByServer;
      expect(await server.exited).toBe(0);
    } finally {
      quiet.destroy();
      server.child.kill('SIGKILL');
    }
  });

  test('a bad configuration value stops start-up with one line naming it', async () => {
    const server = startServer({ PORT: 'not-a-port' }, 1);
    expect(await server.exited).toBe(2);
    expect(server.output().trim()).toMatch(/^configuration error: PORT: /);
  });

  test('npm start stopped by SIGTERM (as a process manager stops it) stops the server too, with its workers', async () => {
    const port = await freePort();
    const { BASE_URL: _vite, ...env } = process.env;
    const npm = spawn('npm', ['start'], {
      cwd: PROJECT_ROOT,
      env: {
        ...env,
        PORT: String(port),
        HOST: '127.0.0.1',
        DATA_DIR: mkdtempSync(join(tmpdir(), 'fhir-npm-start-')),
        WORKERS: '2',
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    npm.stdout.on('data', (d) => (output += d));
    npm.stderr.on('data', (d) => (output += d));
    const exited = new Promise<number | null>((resolve) => npm.on('exit', (code) => resolve(code)));
    try {
      await waitForServer(
        { child: npm, port, base: `http://127.0.0.1:${port}/fhir/R4`, output: () => output, exited },
        90_000,
      );
      // The script execs node: npm's child is the server (the primary), which has the workers.
      const primary = Number(readFileSync(`/proc/${npm.pid}/task/${npm.pid}/children`, 'utf8').trim().split(/\s+/)[0]);
      const workers = readFileSync(`/proc/${primary}/task/${primary}/children`, 'utf8')
        .trim()
        .split(/\s+/)
        .filter(Boolean)
        .map(Number);
      expect(workers).toHaveLength(2);
      npm.kill('SIGTERM');
      await exited;
      const gone = (pid: number) => {
        try {
          process.kill(pid, 0);
          return false;
        } catch {
          return true;
        }
      };
      // npm returns once its child has exited; the workers stop with the primary.
      const end = Date.now() + 30_000;
      while (![primary, ...workers].every(gone) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
      expect(
        [primary, ...workers].filter((pid) => !gone(pid)),
        output,
      ).toEqual([]);
      expect(output).toContain('stopping the workers');
    } finally {
      if (npm.exitCode === null) npm.kill('SIGKILL');
    }
  }, 120_000);
});
