import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Resource } from 'fhir/r4';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { emptyIndexRows } from '../../src/storage/index-schema';
import { SqliteStore } from '../../src/storage/sqlite/sqlite-store';
import type { WriteOp } from '../../src/storage/store';

/**
 * Two stores over one SQLite file (what WORKERS=2 is, or a tool beside the server): while one
 * holds the write lock, the other's write waits for it without holding up that process, which
 * goes on answering reads, and lands once the lock is free.
 */

let dir: string;
let a: SqliteStore;
let b: SqliteStore;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'fhir-lock-'));
  a = new SqliteStore(dir);
  await a.migrate();
  b = new SqliteStore(dir);
  await b.migrate();
});
afterAll(async () => {
  await a?.close();
  await b?.close();
  rmSync(dir, { recursive: true, force: true });
});

function op(id: string): WriteOp {
  return {
    project: 'p',
    type: 'Patient',
    id,
    lastUpdated: new Date().toISOString(),
    resource: { resourceType: 'Patient', id } as Resource,
    index: emptyIndexRows(),
  };
}

test("a write waits for another process's write lock without holding up this process", async () => {
  await b.write(op('before'));
  let holding!: () => void;
  const held = new Promise<void>((resolve) => (holding = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const first = a.transaction(async (tx) => {
    await tx.write(op('first'));
    holding();
    await released;
  });
  await held;

  let settled = false;
  const second = b.write(op('second'));
  void second.then(
    () => (settled = true),
    () => (settled = true),
  );
  try {
    // B keeps answering while its write waits: several reads, each a turn of its event loop.
    for (let i = 0; i < 20; i++) {
      expect((await b.read('p', 'Patient', 'before'))?.resource?.id).toBe('before');
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(settled).toBe(false);
    expect(await b.read('p', 'Patient', 'first')).toBeUndefined();
  } finally {
    release();
  }
  await first;
  const written = await second;
  expect(written.status).toBe('ok');
  expect((await a.read('p', 'Patient', 'second'))?.resource?.id).toBe('second');
  expect((await b.read('p', 'Patient', 'first'))?.resource?.id).toBe('first');
});
