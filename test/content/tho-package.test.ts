import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CodeSystem, ValueSet } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { PROJECT_ROOT } from '../helpers/process';
import { outputs, serverApp } from '../helpers/server-app';
import { runImport, type CliRun } from './packages';

/**
 * HL7 Terminology (THO) 7.0.1, the real package (a devDependency), imported once by the command
 * line into an embedded database, then served. Its second import (idempotency) and the import on
 * PostgreSQL are in test/hardening/tho-package.test.ts: each takes seconds.
 */

const THO = join(PROJECT_ROOT, 'node_modules', 'hl7.terminology.r4');
const IMPORTED = ['CodeSystem', 'ValueSet', 'ConceptMap', 'StructureDefinition', 'SearchParameter'];

/** Resources per type, counted from the package's files here, independently of the importer. */
function countByType(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const file of readdirSync(THO).filter((f) => f.endsWith('.json') && f !== 'package.json')) {
    const { resourceType } = JSON.parse(readFileSync(join(THO, file), 'utf8')) as { resourceType: string };
    counts.set(resourceType, (counts.get(resourceType) ?? 0) + 1);
  }
  return counts;
}

function thoFile<T>(name: string): T {
  return JSON.parse(readFileSync(join(THO, name), 'utf8')) as T;
}

describe('hl7.terminology.r4 7.0.1 imported by npm run import', () => {
  let dir: string;
  let run: CliRun;
  let server: ServerApp | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fhir-tho-'));
    run = await runImport(THO, { DATA_DIR: dir });
    if (run.code === 0) server = await serverApp({ dataDir: dir });
  }, 180_000);
  afterAll(async () => {
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const app = () => {
    if (!server) throw new Error(`the import failed, so nothing is served: ${run.stderr}`);
    return server.app;
  };

  test('every CodeSystem and ValueSet (and the other conformance types) is created, with progress and a summary', () => {
    expect(run.code, run.stderr).toBe(0);
    const counts = countByType();
    expect(counts.get('CodeSystem')).toBe(897);
    let total = 0;
    for (const type of IMPORTED) {
      const n = counts.get(type) ?? 0;
      total += n;
      if (n > 0) expect(run.stdout).toMatch(new RegExp(`^\\s+${type}\\s+${n}\\s+0\\s+0$`, 'm'));
    }
    expect(run.stdout).toMatch(new RegExp(`^\\s+total\\s+${total}\\s+0\\s+0$`, 'm'));
    expect(run.stdout).toContain(`NamingSystem ${counts.get('NamingSystem')}`);
    // Not a terminal: plain progress lines, ending at the total.
    expect(run.stderr).toContain(`100% writing   ${total.toLocaleString('en-US')}/${total.toLocaleString('en-US')}`);
    expect(run.stderr).not.toContain('\r');
  });

  test('a THO value set answers $validate-code and $expand from the stored content', async () => {
    const vs = thoFile<ValueSet>('ValueSet-encounter-class.json');
    const codes = vs.compose?.include[0].concept?.map((c) => c.code) ?? [];
    const system = vs.compose?.include[0].system;
    expect(codes.length).toBeGreaterThan(2);
    const check = async (code: string) => {
      const res = await app().inject({ method: 'GET', url: `/fhir/R4/ValueSet/$validate-code?url=${vs.url}&system=${system}&code=${code}` });
      expect(res.statusCode, res.body).toBe(200);
      return outputs(res.json()).result;
    };
    expect(await check(codes[0])).toBe(true);
    expect(await check(codes[codes.length - 1])).toBe(true);
    expect(await check('INPAT')).toBe(false);
    const expanded = await app().inject({ method: 'GET', url: `/fhir/R4/ValueSet/$expand?url=${vs.url}` });
    expect(expanded.statusCode, expanded.body).toBe(200);
    const expansion = (expanded.json() as ValueSet).expansion;
    expect(expansion?.total).toBe(codes.length);
    expect(expansion?.contains?.map((c) => c.code).sort()).toEqual([...codes].sort());
  });

  test('THO content takes precedence over the bundled R4 content of the same url (v3-ActEncounterCode over THO v3-ActCode)', async () => {
    const actCode = thoFile<CodeSystem>('CodeSystem-v3-ActCode.json');
    const vs = thoFile<ValueSet>('ValueSet-v3-ActEncounterCode.json');
    const res = await app().inject({
      method: 'GET',
      url: `/fhir/R4/ValueSet/$validate-code?url=${vs.url}&system=${actCode.url}&code=AMB`,
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(outputs(res.json())).toMatchObject({ result: true, version: actCode.version });
    const expanded = await app().inject({ method: 'GET', url: `/fhir/R4/ValueSet/$expand?url=${vs.url}` });
    expect(expanded.statusCode, expanded.body).toBe(200);
    const { version, expansion } = expanded.json() as ValueSet;
    expect(version).toBe(vs.version);
    expect(expansion?.contains?.map((c) => c.code)).toContain('AMB');
    expect(JSON.stringify(expansion?.parameter)).toContain(`${actCode.url}|${actCode.version}`);
  });
});
