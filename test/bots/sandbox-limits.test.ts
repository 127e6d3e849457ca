import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { FHIR_JSON, serverApp } from '../helpers/server-app';
import { sandboxPids } from './sandbox-processes';

/**
 * What the bot sandbox holds, whatever a bot does: memory its isolate's limit does not count
 * (WebAssembly, resizable buffers) does not exist in a bot, and the sandbox process is replaced
 * when it holds more than its ceiling. Read from /proc: Linux only, as the server's watch is.
 */

/** Resident memory of a process in MB (VmRSS). */
function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmRSS:\s*(\d+)/m.exec(status)?.[1] ?? 0) / 1024;
}

/** A Wasm module whose memory is 16384 pages (1 GB), exported as `m`. */
const BIG_MEMORY_MODULE = '[0,97,115,109,1,0,0,0,5,5,1,0,128,128,1,7,5,1,1,109,2,0]';

const ESCAPES: [string, string, RegExp][] = [
  [
    'a WebAssembly.Memory grown to 1 GB',
    'const m = new WebAssembly.Memory({ initial: 1, maximum: 65536 }); m.grow(16383); new Uint8Array(m.buffer).fill(1); return m.buffer.byteLength;',
    /WebAssembly is not defined/,
  ],
  [
    'WebAssembly.instantiate of a module with a 1 GB memory',
    `const { instance } = await WebAssembly.instantiate(new Uint8Array(${BIG_MEMORY_MODULE})); new Uint8Array(instance.exports.m.buffer).fill(1); return 1;`,
    /WebAssembly is not defined/,
  ],
  [
    'a resizable ArrayBuffer resized to 1 GB',
    'const b = new ArrayBuffer(1, { maxByteLength: 2 ** 31 }); b.resize(2 ** 30); new Uint8Array(b).fill(1); return b.byteLength;',
    /resize is not a function/,
  ],
  [
    'a growable SharedArrayBuffer grown to 1 GB',
    'const b = new SharedArrayBuffer(1, { maxByteLength: 2 ** 31 }); b.grow(2 ** 30); new Uint8Array(b).fill(1); return b.byteLength;',
    /grow is not a function/,
  ],
  [
    'a 1 GB ArrayBuffer',
    'const b = new ArrayBuffer(2 ** 30); new Uint8Array(b).fill(1); return b.byteLength;',
    /allocation failed|out of memory/i,
  ],
  [
    'a 1 GB SharedArrayBuffer',
    'const b = new SharedArrayBuffer(2 ** 30); new Uint8Array(b).fill(1); return b.byteLength;',
    /allocation failed|out of memory/i,
  ],
  [
    'typed arrays of 256 MB each, four times',
    'const keep = []; for (let i = 0; i < 4; i++) keep.push(new Float64Array(2 ** 25).fill(i)); return keep.length;',
    /allocation failed|out of memory/i,
  ],
];

/** The sandbox may hold its isolates' heaps (128 MB each) and some; never the gigabyte a bot asked for. */
const BOUND_MB = 600;

async function deployAndRun(server: ServerApp, id: string, body: string, timeout = 10) {
  const inject = (method: 'PUT' | 'POST', url: string, payload: object, headers: Record<string, string> = FHIR_JSON) =>
    server.app.inject({ method, url: `/fhir/R4/${url}`, headers, payload });
  expect((await inject('PUT', `Bot/${id}`, { resourceType: 'Bot', id, name: id, timeout })).statusCode).toBeLessThan(
    300,
  );
  const code = `export async function handler(medplum, event) { ${body} }`;
  const deployed = await inject(
    'POST',
    `Bot/${id}/$deploy`,
    { code, filename: `${id}.js` },
    { 'content-type': 'application/json' },
  );
  expect(deployed.statusCode, deployed.body).toBe(200);
  return inject('POST', `Bot/${id}/$execute`, { x: 1 });
}

describe('memory a bot cannot escape with', () => {
  let server: ServerApp;
  beforeAll(async () => {
    server = await serverApp();
  });
  afterAll(async () => {
    await server?.close();
    expect(sandboxPids()).toEqual([]);
  });

  test.each(ESCAPES)('%s fails cleanly, and the sandbox stays small', async (label, body, expected) => {
    const id = `escape-${ESCAPES.findIndex(([, b]) => b === body)}`;
    const res = await deployAndRun(server, id, body);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().issue[0].details.text).toMatch(expected);
    const pids = sandboxPids();
    expect(pids).toHaveLength(1);
    const rss = rssMb(pids[0]);
    console.log(`${label}: the sandbox holds ${rss.toFixed(0)} MB afterwards`);
    expect(rss).toBeLessThan(BOUND_MB);
  });
});

describe('the sandbox ceiling', () => {
  let server: ServerApp;
  beforeAll(async () => {
    // Isolates may hold 256 MB each, but the whole sandbox only 200 MB: the backstop's case.
    server = await serverApp({ botMemoryMb: 256, botSandboxMemoryMb: 200 });
  });
  afterAll(async () => {
    await server?.close();
    expect(sandboxPids()).toEqual([]);
  });

  test('a sandbox holding more than its ceiling is replaced, and what it ran fails with the reason', async () => {
    const hog =
      'const keep = []; for (let i = 0; i < 150; i++) keep.push(new Array(128 * 1024).fill(i + 0.5)); globalThis.keep = keep; await new Promise(() => {});';
    const res = await deployAndRun(server, 'hog', hog, 30);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().issue[0].details.text).toContain('more than its ceiling of 200 MB');
    const after = await deployAndRun(server, 'after-hog', "return 'fine';");
    expect(after.statusCode, after.body).toBe(200);
    expect(after.body).toBe('fine');
  });
});
