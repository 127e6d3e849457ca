import type { FastifyInstance } from 'fastify';
import type { Resource } from 'fhir/r4';
import { buildApp } from './app';
import type { Config } from './config';
import { buildCore, type Core } from './core';
import { ResourceSchema } from './fhir/resource-schema';
import { operationModules } from './operations/index';
import { DEFINITIONS_DIR, PACKAGE as pkg } from './project';
import { buildRegistry, loadDefinitions } from './operations/registry';
import { decorateTerminologyServer, terminologyCapabilities } from './operations/terminology-capabilities';
import { engineCodeMatcher } from './search/engine-codes';
import type { AppServices } from './services';
import { openStore } from './storage/open-store';
import { loadCoreContent } from './terminology/content/core-content';
import { StoredTerminology } from './terminology/content/stored-terminology';
import { TerminologyService } from './terminology/service';

export interface ServerApp {
  app: FastifyInstance;
  /** The FHIR core under the app (for tools and tests that load data without HTTP). */
  core: Core;
  /** Closes the HTTP server (letting in-flight requests finish), then the storage. */
  close(): Promise<void>;
}

/** Everything production needs, wired: storage (migrated, index current), registry, services, app. */
export async function createServerApp(config: Config, options: { logStream?: NodeJS.WritableStream } = {}): Promise<ServerApp> {
  const registry = buildRegistry<AppServices>(loadDefinitions(DEFINITIONS_DIR), operationModules);
  const store = await openStore(config);
  try {
    const stored = new StoredTerminology(store);
    const terminology = new TerminologyService(loadCoreContent(), stored);
    const schema = new ResourceSchema();
    const core = buildCore({
      store,
      schema,
      registry,
      codes: engineCodeMatcher(terminology),
      bindingSystem: (valueSet) => terminology.systemOfValueSet(valueSet),
      bundled: (type) => [...terminology.core.ofType(type)],
    });
    const { repository } = core;
    repository.onWrite((version) => stored.noteLocalWrite(version));
    // Stored search parameters first, so that a rebuild of the index includes them.
    await core.custom.refresh();
    await core.indexer.ensureCurrent();
    const services: AppServices = { config, repository, terminology, checkResource: core.checkResource };
    // Instance-level operations may name built-in content (ValueSet/administrative-gender).
    const readInstance = async (type: string, id: string): Promise<Resource> => {
      try {
        return (await repository.read(type, id)).resource as Resource;
      } catch (err) {
        const builtIn = core.builtIn.read(type, id);
        if (builtIn && (err as { code?: string }).code === 'ERR_RESOURCE_NOT_FOUND') return builtIn;
        throw err;
      }
    };
    const app = await buildApp({
      config,
      rest: core.rest,
      schema,
      registry,
      services,
      software: { name: pkg.name, version: pkg.version },
      readInstance,
      searchParams: (type) => [...core.params.forType(type).values()].map((p) => p.param),
      searchParamsRevision: () => core.params.revision,
      decorateCapabilities: decorateTerminologyServer,
      metadataModes: {
        terminology: async () => terminologyCapabilities(registry, await terminology.resolver(), { name: pkg.name, version: pkg.version }),
      },
      logStream: options.logStream,
    });
    return {
      app,
      core,
      close: async () => {
        await app.close();
        await store.close();
      },
    };
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
}
