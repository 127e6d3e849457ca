import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { CodeSystem, ValueSet } from 'fhir/r4';
import type { ResourceStore } from '../../src/storage/store';
import { PROJECT_ROOT } from '../helpers/process';

/**
 * Packages built by the tests: files written to a folder and packed by the system's `tar`, so
 * the server's own tar reader is checked against a tool it shares no code with.
 */

/** File name -> content: an object is written as JSON, a string as it is (to write broken JSON). */
export type PackageFiles = Record<string, object | string>;

export function manifest(name = 'example.fhir.test', version = '1.0.0'): object {
  return { name, version, fhirVersions: ['4.0.1'], dependencies: {} };
}

export function codeSystem(id: string, codes: string[]): CodeSystem {
  return {
    resourceType: 'CodeSystem',
    id,
    url: `http://example.org/fhir/CodeSystem/${id}`,
    version: '1.0.0',
    status: 'active',
    content: 'complete',
    concept: codes.map((code) => ({ code, display: `Display of ${code}` })),
  } satisfies CodeSystem;
}

export function valueSetOf(id: string, system: CodeSystem): ValueSet {
  return {
    resourceType: 'ValueSet',
    id,
    url: `http://example.org/fhir/ValueSet/${id}`,
    version: '1.0.0',
    status: 'active',
    compose: { include: [{ system: system.url }] },
  } satisfies ValueSet;
}

/** Writes `<dir>/package/<name>` for each file. */
export function writePackageFolder(dir: string, files: PackageFiles): void {
  mkdirSync(join(dir, 'package'), { recursive: true });
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, 'package', name)), { recursive: true });
    writeFileSync(join(dir, 'package', name), typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  }
}

/**
 * The package as a .tgz (gzip-compressed tar with a `package/` folder), packed by the system's
 * tar; `format` picks how names over 100 characters are written (GNU long-name entries, pax
 * headers, or the ustar prefix field).
 */
export function tgzOf(files: PackageFiles, format: 'gnu' | 'posix' | 'ustar' = 'gnu'): Buffer {
  const dir = mkdtempSync(join(tmpdir(), 'fhir-pkg-'));
  try {
    writePackageFolder(dir, files);
    execFileSync('tar', [`--format=${format}`, '-czf', join(dir, 'package.tgz'), '-C', dir, 'package']);
    return readFileSync(join(dir, 'package.tgz'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Every version row the store holds: a write of any kind changes it. */
export async function storedVersions(store: ResourceStore): Promise<number> {
  const [row] = await store.query<{ n: number | string }>('SELECT COUNT(*) AS n FROM resource_versions', []);
  return Number(row.n);
}

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `npm run import -- <path>` as npm would (tsx over the sources), in its own process. */
export function runImport(path: string, env: Record<string, string>): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/import.ts', path], {
      cwd: PROJECT_ROOT,
      // Vitest sets BASE_URL (Vite's) in the environment; the server reads it as its own.
      env: { ...withoutKeys(process.env, ['BASE_URL']), LOG_LEVEL: 'silent', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    // A safety net, not a synchronisation: a hung import must not outlive the test run.
    const guard = setTimeout(() => child.kill('SIGKILL'), 170_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(guard);
      resolve({ code, stdout, stderr });
    });
  });
}

function withoutKeys(env: NodeJS.ProcessEnv, keys: string[]): NodeJS.ProcessEnv {
  const copy = { ...env };
  for (const key of keys) delete copy[key];
  return copy;
}
