import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { OperationDefinition } from 'fhir/r4';
import { describe, expect, test } from 'vitest';
import { defineOperation } from '../../src/operations/operation';
import { buildRegistry, loadDefinitions, RegistryError } from '../../src/operations/registry';
import { operationModules } from '../../src/operations/index';
import { DEFINITIONS_DIR } from '../../src/project';
import { FIXTURE_DEFINITIONS } from '../helpers/app';
import { testModules } from '../fixtures/operations/handlers';

function definition(code: string, extra: Partial<OperationDefinition> = {}): OperationDefinition {
  return {
    resourceType: 'OperationDefinition',
    id: code,
    url: `http://test.local/OperationDefinition/${code}`,
    name: code,
    status: 'active',
    kind: 'operation',
    code,
    system: true,
    type: false,
    instance: false,
    ...extra,
  };
}
const handler = (code: string) =>
  defineOperation({ definition: `http://test.local/OperationDefinition/${code}`, handle: () => ({}) });

describe('the registry binds definitions and handlers at boot, and refuses to boot when they disagree', () => {
  test('the fixture definitions and handlers bind', () => {
    const registry = buildRegistry(loadDefinitions(FIXTURE_DEFINITIONS), testModules);
    expect(registry.find('echo', 'instance', 'Patient')?.spec.code).toBe('echo');
    expect(registry.find('echo', 'type', 'Observation')).toBeUndefined();
    expect(registry.find('make-patient', 'system')).toBeUndefined();
  });

  test('the production definitions and handlers bind', () => {
    const registry = buildRegistry(loadDefinitions(DEFINITIONS_DIR), operationModules);
    expect(registry.operations.length).toBe(operationModules.length);
  });

  test('a definition without a handler', () => {
    expect(() => buildRegistry([definition('a'), definition('b')], [handler('a')])).toThrow(
      /definition http:\/\/test.local\/OperationDefinition\/b \(\$b\) has no handler/,
    );
  });

  test('a handler without a definition', () => {
    expect(() => buildRegistry([definition('a')], [handler('a'), handler('z')])).toThrow(
      /handler for http:\/\/test.local\/OperationDefinition\/z has no definition/,
    );
  });

  test('two handlers for one definition', () => {
    expect(() => buildRegistry([definition('a')], [handler('a'), handler('a')])).toThrow(RegistryError);
  });

  test('an operation that affects state cannot have its answers reused', () => {
    const reusable = defineOperation({
      definition: 'http://test.local/OperationDefinition/a',
      handle: () => ({}),
      answerToken: async () => '1',
    });
    expect(() => buildRegistry([definition('a', { affectsState: true })], [reusable])).toThrow(
      /affects state, so its answers cannot be reused/,
    );
    expect(buildRegistry([definition('a')], [reusable]).operations[0].answerToken).toBeDefined();
  });

  test('two definitions with one code at the same level', () => {
    const clash = { ...definition('a'), id: 'a2', url: 'http://test.local/OperationDefinition/a2' };
    const clashHandler = defineOperation({
      definition: 'http://test.local/OperationDefinition/a2',
      handle: () => ({}),
    });
    expect(() => buildRegistry([definition('a'), clash], [handler('a'), clashHandler])).toThrow(
      /both define \$a at system/,
    );
  });

  test('one code at different levels or types is fine', () => {
    const onType = {
      ...definition('a', { system: false, type: true, resource: ['Patient'] }),
      id: 'a2',
      url: 'http://test.local/OperationDefinition/a2',
    };
    const h2 = defineOperation({ definition: 'http://test.local/OperationDefinition/a2', handle: () => ({}) });
    expect(buildRegistry([definition('a'), onType], [handler('a'), h2]).operations).toHaveLength(2);
  });

  test('definitions on disk are schema-checked', () => {
    const dir = mkdtempSync(join(tmpdir(), 'defs-'));
    writeFileSync(
      join(dir, 'bad.json'),
      JSON.stringify({ ...definition('bad'), parameter: [{ name: 'x', use: 'sideways', min: 0, max: '1' }] }),
    );
    expect(() => loadDefinitions(dir)).toThrow(/bad.json: not a usable OperationDefinition/);
    writeFileSync(join(dir, 'bad.json'), '{ nope');
    expect(() => loadDefinitions(dir)).toThrow(/bad.json: not valid JSON/);
    writeFileSync(join(dir, 'bad.json'), JSON.stringify(definition('bad', { system: false, type: true })));
    expect(() => loadDefinitions(dir)).toThrow(/names no resource type/);
  });
});
