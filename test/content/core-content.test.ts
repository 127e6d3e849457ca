import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import type { CanonicalIndex } from '../../src/terminology/service';
import { loadCoreContent, type BuiltContent } from '../../src/content/core-content';

const dir = mkdtempSync(join(tmpdir(), 'core-content-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const everything = (index: CanonicalIndex) => JSON.stringify((['CodeSystem', 'ValueSet', 'ConceptMap'] as const).map((type) => [...index.ofType(type)]));

describe('the R4 terminology content the build writes next to the bundle', () => {
  const fromPackage = loadCoreContent(join(dir, 'absent.json'));

  const file = join(dir, 'r4-terminology.json');
  execFileSync(process.execPath, ['--import', 'tsx', 'src/cli/write-core-content.ts', file]);

  test('holds exactly what the package gives', () => {
    const built = loadCoreContent(file);
    expect(built.find('ValueSet', 'http://hl7.org/fhir/ValueSet/administrative-gender')).toBeDefined();
    expect([...fromPackage.ofType('CodeSystem')].length).toBeGreaterThan(900);
    expect(everything(built)).toBe(everything(fromPackage));
  });

  test('is what is read when present', () => {
    const content = JSON.parse(readFileSync(file, 'utf8')) as BuiltContent;
    const gender = content.resources.filter((r) => r.url === 'http://hl7.org/fhir/ValueSet/administrative-gender');
    const narrowed = join(dir, 'narrowed.json');
    writeFileSync(narrowed, JSON.stringify({ ...content, resources: gender }));
    const index = loadCoreContent(narrowed);
    expect(index.find('ValueSet', 'http://hl7.org/fhir/ValueSet/administrative-gender')).toBeDefined();
    expect(index.find('CodeSystem', 'http://hl7.org/fhir/administrative-gender')).toBeUndefined();
  });

  test('written from another version of the package, it is not used', () => {
    const file = join(dir, 'stale.json');
    writeFileSync(file, JSON.stringify({ source: '0.0.1', resources: [] }));
    const index = loadCoreContent(file);
    expect(index.find('ValueSet', 'http://hl7.org/fhir/ValueSet/administrative-gender')).toBeDefined();
    expect(everything(index)).toBe(everything(fromPackage));
  });
});
