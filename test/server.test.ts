import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { freePort, startServer, waitForServer } from './helpers/process';

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

  test('a bad configuration value stops start-up with one line naming it', async () => {
    const server = startServer({ PORT: 'not-a-port' }, 1);
    expect(await server.exited).toBe(2);
    expect(server.output().trim()).toMatch(/^configuration error: PORT: /);
  });
});
