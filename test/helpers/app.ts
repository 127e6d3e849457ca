import { fileURLToPath } from 'node:url';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app';
import { createLogger } from '../../src/logger';
import { loadConfig, type Config } from '../../src/config';
import type { ResourceSchema } from '../../src/fhir/resource-schema';
import { ResourceValidator } from '../../src/validation/validator';
import { StructuralCheck } from '../../src/validation/write-checks';
import { buildRegistry, loadDefinitions } from '../../src/operations/registry';
import { bindOperations, buildCore } from '../../src/core';
import { SqliteStore } from '../../src/storage/sqlite/sqlite-store';
import type { ResourceStore } from '../../src/storage/store';
import { testModules, type TestServices } from '../fixtures/operations/handlers';

export const FIXTURE_DEFINITIONS = fileURLToPath(new URL('../fixtures/operations', import.meta.url));

/** One structural check for all tests in a worker: compiled definitions are kept in it. */
let sharedSchema: ResourceSchema | undefined;
export function schema(): ResourceSchema {
  sharedSchema ??= new StructuralCheck(new ResourceValidator());
  return sharedSchema;
}

export function testConfig(overrides: Partial<Config> = {}): Config {
  return { ...loadConfig({ LOG_LEVEL: 'silent' }), ...overrides };
}

export interface TestApp {
  app: FastifyInstance;
  store: ResourceStore;
  services: TestServices;
  logs: string[];
  close(): Promise<void>;
}

/** The framework with the fixture operations over a fresh in-memory SQLite store. */
export async function testApp(options: { config?: Partial<Config>; store?: ResourceStore } = {}): Promise<TestApp> {
  const config = testConfig(options.config);
  const store = options.store ?? new SqliteStore(':memory:');
  if (!options.store) await store.migrate();
  const registry = buildRegistry<TestServices>(loadDefinitions(FIXTURE_DEFINITIONS), testModules);
  const services: TestServices = { resets: 0 };
  const logs: string[] = [];
  const logStream = new Writable({
    write(chunk, _enc, done) {
      logs.push(String(chunk));
      done();
    },
  });
  const core = buildCore({ store, schema: schema(), registry });
  await core.indexer.ensureCurrent();
  const invoker = bindOperations(core, { registry, services, schema: schema() });
  const app = await buildApp({
    config,
    rest: core.rest,
    schema: schema(),
    registry,
    invoker,
    software: { name: 'test-server', version: '0.0.1' },
    log: createLogger(config, logStream),
  });
  return {
    app,
    store,
    services,
    logs,
    close: async () => {
      await app.close();
      if (!options.store) await store.close();
    },
  };
}

export const FHIR = { 'content-type': 'application/fhir+json' };

export function parameters(...parameter: Record<string, unknown>[]) {
  return { resourceType: 'Parameters', parameter };
}
