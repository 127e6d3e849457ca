/**
 * npm run conformance [-- judge options]: starts this server (embedded storage in a temporary
 * folder, a free port) and runs the HL7 terminology conformance judge from ../shared against it.
 * Extra arguments go to the judge (e.g. `-- --ops validate-code --verbose`).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort, PROJECT_ROOT, startServer, waitForServer } from '../helpers/process';

const shared = resolve(PROJECT_ROOT, '..', 'shared');
const judge = join(shared, 'tools', 'txjudge.mjs');
const tests = join(shared, 'tx-tests');

async function main(): Promise<number> {
  if (!existsSync(judge) || !existsSync(tests)) {
    console.error(`The judge or the test suite is missing (looked for ${judge} and ${tests}).`);
    return 2;
  }
  const dataDir = mkdtempSync(join(tmpdir(), 'fhir-conformance-'));
  const server = startServer({ DATA_DIR: dataDir, LOG_LEVEL: 'warn' }, await freePort());
  try {
    await waitForServer(server);
    const args = [judge, '--base', server.base, '--tests', tests, ...process.argv.slice(2)];
    return await new Promise<number>((done) => {
      const child = spawn(process.execPath, args, { stdio: 'inherit' });
      child.on('exit', (code) => done(code ?? 1));
    });
  } finally {
    server.child.kill('SIGTERM');
    await server.exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().then((code) => process.exit(code));
