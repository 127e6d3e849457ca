import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { openStore } from '../../src/storage/open-store';
import type { ResourceStore } from '../../src/storage/store';
import { testConfig } from '../helpers/app';
import { freshSchema, hasPostgres, POSTGRES_SKIP_REASON, type TestSchema } from '../helpers/postgres';
import { FHIR_JSON, outputs, partsOf, serverApp } from '../helpers/server-app';
import { codeSystem, manifest, runImport, storedVersions, tgzOf, valueSetOf, type PackageFiles } from './packages';

const IMPORT = '/fhir/R4/$import-package';

function importRequest(app: ServerApp, tgz: Buffer, headers: Record<string, string> = {}) {
  return app.app.inject({
    method: 'POST',
    url: IMPORT,
    headers: { ...FHIR_JSON, ...headers },
    payload: { resourceType: 'Parameters', parameter: [{ name: 'package', valueBase64Binary: tgz.toString('base64') }] },
  });
}

const colors = codeSystem('colors', ['red', 'green']);
const colorsVs = valueSetOf('colors', colors);
const goodPackage: PackageFiles = {
  'package.json': manifest(),
  'CodeSystem-colors.json': colors,
  'ValueSet-colors.json': colorsVs,
  'NamingSystem-colors.json': { resourceType: 'NamingSystem', id: 'colors', name: 'colors', status: 'active', kind: 'codesystem', date: '2024-01-01', uniqueId: [{ type: 'uri', value: colors.url }] },
  // Examples are not the package's definitions: never imported.
  'example/CodeSystem-only-an-example.json': codeSystem('only-an-example', ['x']),
};

/** 300 good code systems, then (sorted last) one bad resource: it fails after a first batch was written. */
function manyThen(bad: PackageFiles): PackageFiles {
  const files: PackageFiles = { 'package.json': manifest('example.fhir.many') };
  for (let i = 0; i < 300; i++) files[`CodeSystem-cs${i}.json`] = codeSystem(`cs${i}`, ['a']);
  return { ...files, ...bad };
}

const badPackages: { name: string; tgz: () => Buffer; says: string[] }[] = [
  {
    name: 'a truncated .tgz',
    tgz: () => {
      const whole = tgzOf(manyThen({}));
      return whole.subarray(0, Math.floor(whole.length / 2));
    },
    says: ['truncated'],
  },
  { name: 'invalid JSON inside a valid .tgz', tgz: () => tgzOf(manyThen({ 'ValueSet-zz.json': '{"resourceType": "ValueSet", "id": ' })), says: ['ValueSet-zz.json', 'not valid JSON'] },
  {
    name: 'a resource that fails the write checks',
    tgz: () => tgzOf(manyThen({ 'ValueSet-zz.json': { ...valueSetOf('zz', colors), status: ['active'] } })),
    says: ['ValueSet-zz.json', 'status'],
  },
  { name: 'a resource without an id', tgz: () => tgzOf(manyThen({ 'ValueSet-zz.json': { ...valueSetOf('zz', colors), id: undefined } })), says: ['ValueSet-zz.json', 'no id'] },
  { name: 'two resources with one id', tgz: () => tgzOf(manyThen({ 'CodeSystem-zz.json': codeSystem('cs1', ['b']) })), says: ['CodeSystem/cs1'] },
  { name: 'no package.json', tgz: () => tgzOf({ 'CodeSystem-colors.json': colors }), says: ['package/package.json'] },
  { name: 'a package for another FHIR version', tgz: () => tgzOf({ 'package.json': { ...manifest(), fhirVersions: ['5.0.0'] } }), says: ['5.0.0', 'R4'] },
  { name: 'bytes that are not a .tgz', tgz: () => Buffer.from('just some text, long enough'), says: ['not a gzip'] },
];

const backends: { name: string; skip: boolean; open: () => Promise<{ app: ServerApp; done: () => Promise<void> }> }[] = [
  {
    name: 'embedded SQLite',
    skip: false,
    open: async () => {
      const app = await serverApp();
      return { app, done: () => app.close() };
    },
  },
  {
    name: 'PostgreSQL',
    skip: !hasPostgres,
    open: async () => {
      const schema: TestSchema = await freshSchema();
      const app = await serverApp({ databaseUrl: schema.url });
      return {
        app,
        done: async () => {
          await app.close();
          await schema.drop();
        },
      };
    },
  },
];

describe.each(backends)('POST import-package on $name', ({ skip, open }) => {
  let server: ServerApp;
  let done: () => Promise<void>;

  beforeAll(async () => {
    if (skip) return;
    ({ app: server, done } = await open());
  });
  afterAll(async () => {
    if (!skip) await done();
  });

  const validate = async (code: string) => {
    const res = await server.app.inject({ method: 'GET', url: `/fhir/R4/ValueSet/$validate-code?url=${colorsVs.url}&system=${colors.url}&code=${code}` });
    expect(res.statusCode, res.body).toBe(200);
    return outputs(res.json()).result;
  };

  test.skipIf(skip)('loads the code systems and value sets of a package, and they answer at once', async () => {
    const res = await importRequest(server, tgzOf(goodPackage));
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(outputs(body)).toMatchObject({ name: 'example.fhir.test', version: '1.0.0' });
    expect(partsOf(body, 'loaded')).toEqual([
      { type: 'CodeSystem', created: 1, updated: 0, unchanged: 0 },
      { type: 'ValueSet', created: 1, updated: 0, unchanged: 0 },
    ]);
    expect(partsOf(body, 'skipped')).toEqual([{ type: 'NamingSystem', count: 1 }]);
    const read = await server.app.inject({ method: 'GET', url: '/fhir/R4/CodeSystem/colors' });
    expect(read.statusCode).toBe(200);
    expect(read.json().concept).toEqual(colors.concept);
    expect((await server.app.inject({ method: 'GET', url: '/fhir/R4/CodeSystem/only-an-example' })).statusCode).toBe(404);
    expect(await validate('red')).toBe(true);
    expect(await validate('blue')).toBe(false);
  });

  test.skipIf(skip)('a second import of the same package changes nothing', async () => {
    const before = await storedVersions(server.core.repository.store);
    const res = await importRequest(server, tgzOf(goodPackage));
    expect(res.statusCode, res.body).toBe(200);
    expect(partsOf(res.json(), 'loaded')).toEqual([
      { type: 'CodeSystem', created: 0, updated: 0, unchanged: 1 },
      { type: 'ValueSet', created: 0, updated: 0, unchanged: 1 },
    ]);
    expect(await storedVersions(server.core.repository.store)).toBe(before);
    expect((await server.app.inject({ method: 'GET', url: '/fhir/R4/CodeSystem/colors' })).headers.etag).toBe('W/"1"');
  });

  test.skipIf(skip)('a changed resource becomes a new version; the others are left alone', async () => {
    const changed = { ...goodPackage, 'CodeSystem-colors.json': codeSystem('colors', ['red', 'green', 'blue']) };
    const res = await importRequest(server, tgzOf(changed));
    expect(res.statusCode, res.body).toBe(200);
    expect(partsOf(res.json(), 'loaded')).toEqual([
      { type: 'CodeSystem', created: 0, updated: 1, unchanged: 0 },
      { type: 'ValueSet', created: 0, updated: 0, unchanged: 1 },
    ]);
    expect((await server.app.inject({ method: 'GET', url: '/fhir/R4/CodeSystem/colors' })).headers.etag).toBe('W/"2"');
    expect(await validate('blue')).toBe(true);
  });

  test.skipIf(skip).each(badPackages)('$name is refused with a clear message, and nothing is stored', async ({ tgz, says }) => {
    const before = await storedVersions(server.core.repository.store);
    const res = await importRequest(server, tgz());
    expect(res.statusCode, res.body).toBe(400);
    const text = res.json().issue[0].details.text as string;
    expect(text).toContain('The package cannot be imported (nothing was stored)');
    for (const fragment of says) expect(text).toContain(fragment);
    expect(await storedVersions(server.core.repository.store)).toBe(before);
    expect((await server.app.inject({ method: 'GET', url: '/fhir/R4/CodeSystem/cs0' })).statusCode).toBe(404);
  });
});

describe('import-package: archive formats, limits and access', () => {
  test.each(['gnu', 'posix', 'ustar'] as const)('file names over 100 characters are read from a %s tar', async (format) => {
    const app = await serverApp();
    try {
      // ustar splits a long path at a '/' into prefix and name (100 at most); the others take any length.
      const name = format === 'ustar' ? `CodeSystem-${'x'.repeat(79)}.json` : `CodeSystem-${'long-name-'.repeat(12)}.json`;
      expect(`package/${name}`.length).toBeGreaterThan(100);
      const res = await importRequest(app, tgzOf({ 'package.json': manifest(), [name]: codeSystem('long', ['a']) }, format));
      expect(res.statusCode, res.body).toBe(200);
      expect(partsOf(res.json(), 'loaded')).toEqual([{ type: 'CodeSystem', created: 1, updated: 0, unchanged: 0 }]);
      expect((await app.app.inject({ method: 'GET', url: '/fhir/R4/CodeSystem/long' })).statusCode).toBe(200);
    } finally {
      await app.close();
    }
  });

  test('a package of megabytes travels in the request, and a no-break space in a string is valid', async () => {
    const app = await serverApp();
    try {
      // Random text compresses poorly: about 3.6 MB of base64 in the body (in concepts: one string may hold 1 MB at most).
      const big = {
        ...codeSystem('big', ['a']),
        description: 'big\u00a0one',
        concept: Array.from({ length: 27 }, (_, i) => ({ code: `c${i}`, display: randomBytes(100_000).toString('base64') })),
      };
      const tgz = tgzOf({ 'package.json': manifest(), 'CodeSystem-big.json': big });
      expect(tgz.toString('base64').length).toBeGreaterThan(3_000_000);
      const res = await importRequest(app, tgz);
      expect(res.statusCode, res.body).toBe(200);
      expect(partsOf(res.json(), 'loaded')).toEqual([{ type: 'CodeSystem', created: 1, updated: 0, unchanged: 0 }]);
      expect((await app.app.inject({ method: 'GET', url: '/fhir/R4/CodeSystem/big' })).json()).toMatchObject({ description: big.description, concept: big.concept });
    } finally {
      await app.close();
    }
  });

  test('a body over BODY_LIMIT is 413; so is a package that unpacks to more than 32 times it', async () => {
    const app = await serverApp({ bodyLimit: 64 * 1024 });
    try {
      const incompressible = randomBytes(80 * 1024);
      const big = await importRequest(app, incompressible);
      expect(big.statusCode, big.body).toBe(413);
      expect(big.json().issue[0].code).toBe('too-costly');
      // 3 MB of zeros compress to a few kB: the archive is small, its content is not.
      const bomb = gzipSync(Buffer.alloc(3 * 1024 * 1024));
      expect(bomb.length).toBeLessThan(48 * 1024);
      const inflated = await importRequest(app, bomb);
      expect(inflated.statusCode, inflated.body).toBe(413);
      expect(inflated.json().issue[0].details.text).toContain(`more than ${64 * 1024 * 32} bytes`);
      expect(await storedVersions(app.core.repository.store)).toBe(0);
    } finally {
      await app.close();
    }
  });

  test('with AUTH_TOKENS set it needs a token like every route; GET is refused (it changes state)', async () => {
    const token = 'a-token-of-more-than-16-chars';
    const app = await serverApp({ authTokens: [token] });
    try {
      const tgz = tgzOf(goodPackage);
      const anonymous = await importRequest(app, tgz);
      expect(anonymous.statusCode).toBe(401);
      expect(await storedVersions(app.core.repository.store)).toBe(0);
      const withToken = await importRequest(app, tgz, { authorization: `Bearer ${token}` });
      expect(withToken.statusCode, withToken.body).toBe(200);
      const get = await app.app.inject({ method: 'GET', url: IMPORT, headers: { authorization: `Bearer ${token}` } });
      expect(get.statusCode).toBe(405);
    } finally {
      await app.close();
    }
  });
});

/** Where the command line writes: its environment, and a store over the same data to count with. */
const cliTargets: { name: string; skip: boolean; open: (dir: string) => Promise<{ env: Record<string, string>; store: () => Promise<ResourceStore>; done: () => Promise<void> }> }[] = [
  {
    name: 'embedded SQLite',
    skip: false,
    open: async (dir) => ({ env: { DATA_DIR: join(dir, 'data') }, store: () => openStore(testConfig({ dataDir: join(dir, 'data') })), done: async () => undefined }),
  },
  {
    name: 'PostgreSQL',
    skip: !hasPostgres,
    open: async () => {
      const schema = await freshSchema();
      return { env: { DATABASE_URL: schema.url }, store: () => openStore(testConfig({ databaseUrl: schema.url })), done: () => schema.drop() };
    },
  },
];

describe.each(cliTargets)('npm run import on $name', ({ skip, open }) => {
  test.skipIf(skip)('a truncated .tgz is refused: exit code 1, a clear message, nothing stored', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fhir-import-'));
    const target = await open(dir);
    try {
      const whole = tgzOf(manyThen({}));
      const file = join(dir, 'truncated.tgz');
      writeFileSync(file, whole.subarray(0, whole.length - 100));
      const run = await runImport(file, target.env);
      expect(run.code, run.stderr).toBe(1);
      expect(run.stderr).toContain('import failed: The package cannot be imported (nothing was stored): the archive is truncated');
      const store = await target.store();
      try {
        expect(await storedVersions(store)).toBe(0);
      } finally {
        await store.close();
      }
    } finally {
      await target.done();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

if (!hasPostgres) test.skip(POSTGRES_SKIP_REASON, () => undefined);
