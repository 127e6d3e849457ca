import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { openStore } from '../../src/storage/open-store';
import { testConfig } from '../helpers/app';
import { freshSchema, hasPostgres, POSTGRES_SKIP_REASON, type TestSchema } from '../helpers/postgres';
import { PROJECT_ROOT } from '../helpers/process';
import { runImport, storedVersions } from '../content/packages';

/**
 * The real THO package as published (.tgz, packed here by the system's tar from the installed
 * devDependency), imported twice by the command line on each backend: the first import creates
 * every resource, the second changes nothing (no new versions).
 */

const TOTAL = /^\s+total\s+(\d+)\s+(\d+)\s+(\d+)$/m;

const targets: {
  name: string;
  skip: boolean;
  open: () => Promise<{
    env: Record<string, string>;
    config: { dataDir: string; databaseUrl?: string };
    done: () => Promise<void>;
  }>;
}[] = [
  {
    name: 'embedded SQLite',
    skip: false,
    open: async () => {
      const dir = mkdtempSync(join(tmpdir(), 'fhir-tho-'));
      return {
        env: { DATA_DIR: dir },
        config: { dataDir: dir },
        done: async () => rmSync(dir, { recursive: true, force: true }),
      };
    },
  },
  {
    name: 'PostgreSQL',
    skip: !hasPostgres,
    open: async () => {
      const schema: TestSchema = await freshSchema();
      return {
        env: { DATABASE_URL: schema.url },
        config: { dataDir: ':memory:', databaseUrl: schema.url },
        done: () => schema.drop(),
      };
    },
  },
];

let work: string;
let tgz: string;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'fhir-tho-tgz-'));
  tgz = join(work, 'hl7.terminology.r4-7.0.1.tgz');
  execFileSync('tar', [
    '-czf',
    tgz,
    '-C',
    join(PROJECT_ROOT, 'node_modules'),
    '--transform',
    's,^hl7.terminology.r4,package,',
    'hl7.terminology.r4',
  ]);
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe.each(targets)('hl7.terminology.r4 .tgz imported twice on $name', ({ skip, open }) => {
  test.skipIf(skip)(
    'the first import creates every resource; the second changes nothing',
    async () => {
      const target = await open();
      try {
        const first = await runImport(tgz, target.env);
        expect(first.code, first.stderr).toBe(0);
        const [, created, updated, unchanged] = (TOTAL.exec(first.stdout) ?? []).map(Number);
        expect(created).toBeGreaterThan(3000);
        expect([updated, unchanged]).toEqual([0, 0]);
        const store = await openStore(testConfig(target.config));
        try {
          const versions = await storedVersions(store);
          expect(versions).toBe(created);
          const second = await runImport(tgz, target.env);
          expect(second.code, second.stderr).toBe(0);
          expect(TOTAL.exec(second.stdout)?.slice(1).map(Number)).toEqual([0, 0, created]);
          expect(await storedVersions(store)).toBe(versions);
        } finally {
          await store.close();
        }
      } finally {
        await target.done();
      }
    },
    300_000,
  );
});

if (!hasPostgres) test.skip(POSTGRES_SKIP_REASON, () => undefined);
