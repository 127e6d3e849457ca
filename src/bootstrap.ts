import type { FastifyInstance } from 'fastify';
import { buildApp } from './app';
import type { Config } from './config';
import { operationModules } from './operations/index';
import { DEFINITIONS_DIR, PACKAGE as pkg } from './project';
import { buildRegistry, loadDefinitions } from './operations/registry';
import { decorateTerminologyServer, terminologyCapabilities } from './operations/terminology-capabilities';
import type { AppServices } from './services';
import { openStore } from './storage/open-store';
import { Repository } from './storage/repository';
import { loadCoreContent } from './terminology/content/core-content';
import { StoredTerminology } from './terminology/content/stored-terminology';
import { TerminologyService } from './terminology/service';
import { storedDefinitions } from './validation/stored-definitions';
import { terminologyPort } from './validation/terminology-port';
import { ResourceValidator } from './validation/validator';
import { StructuralCheck } from './validation/write-checks';
import type { Resource } from 'fhir/r4';


export interface ServerApp {
  app: FastifyInstance;
  /** Closes the HTTP server (letting in-flight requests finish), then the storage. */
  close(): Promise<void>;
}

/** Everything production needs, wired: storage (migrated), registry, services, app. */
export async function createServerApp(config: Config, options: { logStream?: NodeJS.WritableStream } = {}): Promise<ServerApp> {
  const registry = buildRegistry<AppServices>(loadDefinitions(DEFINITIONS_DIR), operationModules);
  const store = await openStore(config);
  try {
    const repository = new Repository(store);
    const stored = new StoredTerminology(store);
    repository.onWrite((version) => stored.noteLocalWrite(version));
    const terminology = new TerminologyService(loadCoreContent(), stored);
    // Definitions are read and compiled on first use, not here: start-up stays quick.
    const validator = new ResourceValidator({ stored: storedDefinitions(repository), terminology: terminologyPort(terminology) });
    const services: AppServices = { config, repository, terminology, validator };
    // Instance-level operations may name bundled content (ValueSet/administrative-gender).
    const readInstance = async (type: string, id: string): Promise<Resource> => {
      try {
        return (await repository.read(type, id)).resource as Resource;
      } catch (err) {
        const bundled = terminology.coreById(type, id);
        if (bundled && (err as { code?: string }).code === 'ERR_RESOURCE_NOT_FOUND') return bundled;
        throw err;
      }
    };
    const app = await buildApp({
      config,
      repository,
      schema: new StructuralCheck(validator),
      registry,
      services,
      software: { name: pkg.name, version: pkg.version },
      readInstance,
      decorateCapabilities: decorateTerminologyServer,
      metadataModes: {
        terminology: async () => terminologyCapabilities(registry, await terminology.resolver(), { name: pkg.name, version: pkg.version }),
      },
      logStream: options.logStream,
    });
    return {
      app,
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
