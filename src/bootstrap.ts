import type { FastifyInstance } from 'fastify';
import type { Resource } from 'fhir/r4';
import { buildApp } from './app';
import type { Config } from './config';
import { buildCore, type Core } from './core';
import { operationModules } from './operations/index';
import { DEFINITIONS_DIR, PACKAGE as pkg } from './project';
import { buildRegistry, loadDefinitions } from './operations/registry';
import { OperationInvoker } from './operations/invoke';
import { fhirError } from './fhir/errors';
import { decorateTerminologyServer, terminologyCapabilities } from './operations/terminology-capabilities';
import { engineCodeMatcher } from './search/engine-codes';
import type { AppServices } from './services';
import { JobQueue } from './jobs/queue';
import { BulkExports, decorateBulkData } from './bulk/export';
import { r4Model } from './search/model/model';
import { memoryFilter } from './search/memory-filter';
import { subsetWithMandatory } from './search/summary';
import type { ResourceStore } from './storage/store';
import type { Group } from 'fhir/r4';
import { SERVED_RESOURCE_TYPES } from './fhir/admin-types';
import { openStore } from './storage/open-store';
import { loadCoreContent } from './content/core-content';
import { StoredTerminologies } from './content/stored-terminology';
import { DEFAULT_PROJECT, StorageFullError, SYSTEM_PROJECT } from './storage/store';
import { TerminologyService } from './terminology/service';
import { storedDefinitions } from './validation/stored-definitions';
import { terminologyPort } from './validation/terminology-port';
import { FhirPathPool } from './fhir/fhirpath/pool';
import { ResourceValidator } from './validation/validator';
import { StructuralCheck, validateBeforeWrite, validatesOnWrite } from './validation/write-checks';
import { Accounts } from './auth/accounts';
import { LiveGrants } from './auth/live-grants';
import { checkAdminWrite, UniqueClientIds, type AdminWriteDeps } from './auth/admin-writes';
import { checkClientKeysUri, ClientAssertions } from './auth/client-assertion';
import { AuthService } from './auth/oauth';
import { SigningKeys } from './auth/signing-keys';
import { ACCESS_TOKEN_SECONDS, TokenService } from './auth/tokens';
import { Outbound } from './net/outbound';
import { LazyGraphQL } from './graphql/lazy-service';
import { BotRunner } from './bots/runner';
import { BotService } from './bots/service';
import { botEndpointHandler } from './bots/subscription-endpoint';
import { BotCron } from './bots/cron-jobs';
import { anonymousCalls } from './http/anonymous-calls';
import { checkBotSchedule } from './bots/schedule';
import { Subscriptions } from './subscriptions/subscriptions';

/** The issuer of access tokens when no BASE_URL says where the server is. */
const TOKEN_ISSUER = 'urn:fhir-tx-server';

export interface ServerApp {
  app: FastifyInstance;
  /** The FHIR core under the app (for tools and tests that load data without HTTP). */
  core: Core;
  /** The storage under the core (for tools and tests that look below the repository: bulk export's files, a full disk). */
  store: ResourceStore;
  /** The durable job queue, its workers started (JOB_WORKERS). */
  jobs: JobQueue;
  /** What operation handlers are given (for parts wired beside them: a subscription running a bot). */
  services: AppServices;
  /** Closes the HTTP server (letting in-flight requests finish), then the storage. */
  close(): Promise<void>;
}

/** Everything production needs, wired: storage (migrated, index current), registry, services, app. */
export async function createServerApp(config: Config, options: { logStream?: NodeJS.WritableStream } = {}): Promise<ServerApp> {
  const registry = buildRegistry<AppServices>(loadDefinitions(DEFINITIONS_DIR), operationModules);
  const store = await openStore(config);
  try {
    const stored = new StoredTerminologies(store);
    const terminology = new TerminologyService(loadCoreContent(), stored);
    // Definitions are read and compiled on first use, not here: start-up stays quick. Stored
    // profiles are read through the repository, which exists once the core does.
    // FHIRPath users wrote runs in these workers, bounded; none starts before the first such expression.
    const fhirpath = new FhirPathPool({ workers: config.fhirpathWorkers, timeoutMs: config.fhirpathTimeoutMs, memoryMb: config.fhirpathMemoryMb });
    const validator = new ResourceValidator({
      userExpressions: fhirpath,
      stored: storedDefinitions({
        search: async (type, query, project) => ({ resources: await core.repository.in(project).byCanonical(type, query.url, query.version) }),
        changeMarks: (project, types) => store.changeMarks(project, types),
        shared: SYSTEM_PROJECT,
      }),
      terminology: terminologyPort(terminology),
    });
    const schema = new StructuralCheck(validator);
    // Before the core: its write checks ask it whether a client's jwksUri may be called.
    const clientKeysOutbound = new Outbound({ allowPrivate: config.outboundAllowPrivate, allowTargets: config.outboundAllowTargets });
    const core: Core = buildCore({
      store,
      schema,
      registry,
      codes: engineCodeMatcher(terminology),
      bindingSystem: (valueSet) => terminology.systemOfValueSet(valueSet),
      bundled: (type) => [...terminology.core.ofType(type)],
      // A PATCH may make a resource no larger than a PUT could send it.
      limits: { resourceBytes: config.bodyLimit },
      prepare: async (resource, ctx) => {
        checkBotSchedule(resource);
        await checkClientKeysUri(resource, clientKeysOutbound);
        await checkAdminWrite(resource, ctx, adminWrites);
        await subscriptions.prepare(resource);
      },
      validate: async (resource, ctx) => {
        if (validatesOnWrite(config.validateOnWrite, ctx.validateOnWrite)) await validateBeforeWrite(validator, resource, { deadline: ctx.deadline, project: ctx.project });
      },
    });
    const { repository } = core;
    repository.onWrite((version) => stored.noteLocalWrite(version));
    // Stored search parameters first, so that a rebuild of the index includes them.
    await core.custom.refresh();
    await core.indexer.ensureCurrent();
    const keys = new SigningKeys(store.ephemeral, ACCESS_TOKEN_SECONDS * 1000);
    await keys.ensure();
    const accounts = new Accounts(repository, store.ephemeral);
    repository.observe(new UniqueClientIds());
    const adminWrites: AdminWriteDeps = {
      memberships: (member) => accounts.memberships(member),
      exists: async (project, type, id) => (await store.read(project, type, id))?.resource != null,
    };
    const live = new LiveGrants({
      grantOf: (key) => accounts.grantOf(key),
      userExists: (id) => accounts.userExists(id),
      marks: (project, types) => store.changeMarks(project, types),
      ephemeral: store.ephemeral,
      notices: store.notices,
    });
    await live.start();
    const tokens = new TokenService(keys, store.ephemeral, config.baseUrl ? new URL(config.baseUrl).origin : TOKEN_ISSUER, live);
    const auth = new AuthService({
      accounts,
      ephemeral: store.ephemeral,
      tokens,
      assertions: new ClientAssertions({ store: store.ephemeral, outbound: clientKeysOutbound }),
    });
    const graphql = new LazyGraphQL({
      model: r4Model(),
      resourceTypes: [...schema.resourceTypes],
      search: core.search,
      handle: (request, ctx) => core.rest.handle(request, ctx),
      read: (type, id, ctx) => core.rest.readResource(type, id, ctx),
      searchParams: (type) => [...core.params.declared(type).keys()],
      referenceTargets: (type) => new Set([...core.params.declared(type).values()].filter((p) => p.type === 'reference').flatMap((p) => (p.target.length > 0 ? p.target : ['Resource']))),
      revision: () => core.params.revision,
      fhirpath,
    });
    const jobs = new JobQueue(store.jobs, { leaseMs: config.jobLeaseMs, notices: store.notices });
    const bulk = bulkExports({ core, store, jobs, config });
    // The sandbox process starts with the first bot deployed or run, not here.
    const bots = new BotService({ rest: core.rest, accounts, runner: new BotRunner({ memoryMb: config.botMemoryMb, sandboxMemoryMb: config.botSandboxMemoryMb, slotsPerProject: config.botSlotsPerProject, queuePerProject: config.botQueuePerProject }), memoryMb: config.botMemoryMb, outputBytes: config.botOutputBytes, bodyLimit: config.bodyLimit, secrets: config.botSecrets, fetchAllow: config.botFetchAllow, outbound: new Outbound({ allowPrivate: config.outboundAllowPrivate, allowTargets: config.outboundAllowTargets, timeoutMs: 10_000, maxBytes: config.botOutputBytes }) });
    const subscriptions = new Subscriptions({
      repository,
      fhirpath,
      jobs,
      outbound: new Outbound({ allowPrivate: config.outboundAllowPrivate, allowTargets: config.outboundAllowTargets }),
      retryMs: config.subscriptionRetryMs,
      registry: core.params,
      extractor: core.extractor,
      isResourceType: (type) => schema.isResourceType(type),
    });
    // Medplum's convention: a rest-hook Subscription whose endpoint is Bot/[id] runs that bot.
    subscriptions.delivery.registerEndpointHandler('Bot/', botEndpointHandler({ bots, rest: core.rest }, { baseUrl: config.baseUrl }));
    // Bots with a schedule (Bot.cronString, Bot.cronTiming) run from the job queue.
    const botCron = new BotCron({ bots, rest: core.rest, jobs, baseUrl: config.baseUrl });
    repository.observe(botCron);
    jobs.register(botCron.handler());
    const services: AppServices = { config, fhirpath, repository, terminology, validator, checkResource: core.checkResource, auth, accounts, graphql, rest: core.rest, search: core.search, jobs, bots, subscriptions };
    const app = await buildApp({
      config,
      rest: core.rest,
      schema,
      registry,
      services,
      software: { name: pkg.name, version: pkg.version },
      graphqlOver: (query, output, ctx) => graphql.run({ query }, ctx, { method: 'GET', target: output }),
      searchParams: (type) => [...core.params.declared(type).values()],
      searchParamsRevision: () => core.params.revision,
      decorateCapabilities: (statement) => {
        decorateTerminologyServer(statement);
        decorateBulkData(statement);
      },
      metadataModes: {
        terminology: async () => terminologyCapabilities(registry, await terminology.resolver(DEFAULT_PROJECT), { name: pkg.name, version: pkg.version }),
      },
      readiness: {
        storage: async () => {
          await store.getSetting('readiness-probe').catch(() => {
            throw fhirError('ERR_STORAGE_UNAVAILABLE', {}, { headers: { 'retry-after': '5' } });
          });
          await store.writable().catch((err: unknown) => {
            if (!(err instanceof StorageFullError)) throw err;
            throw fhirError('ERR_SERVER_NOT_READY', { check: 'storage', reason: 'the disk is full: writes fail until space is freed' }, { headers: { 'retry-after': '60' } });
          });
        },
        content: async () => {
          if (!terminology.core.find('ValueSet', 'http://hl7.org/fhir/ValueSet/administrative-gender')) throw new Error('the bundled R4 terminology is not loaded');
        },
      },
      logStream: options.logStream,
      guard: core.guard,
      bulk,
      subscriptionSocket: subscriptions.websocket,
      jobs,
      oauth: {
        auth,
        keys,
        verify: async (token) => {
          const principal = await tokens.verify(token);
          return principal && (await live.holds(principal)) ? principal : undefined;
        },
        projectExists: async (id) => (await store.read(SYSTEM_PROJECT, 'Project', id))?.resource != null,
      },
    });
    jobs.log = app.log;
    subscriptions.log = app.log;
    bots.anonymous = anonymousCalls(app);
    botCron.log = app.log;
    await subscriptions.start();
    jobs.start(config.jobWorkers);
    return {
      app,
      core,
      store,
      jobs,
      services,
      close: async () => {
        await app.close();
        subscriptions.stop();
        await jobs.stop();
        await bots.close();
        live.close();
        await fhirpath.close();
        await store.close();
      },
    };
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
}

/** Bulk export over the core, its job handler registered on the queue. */
function bulkExports({ core, store, jobs, config }: { core: Core; store: ResourceStore; jobs: JobQueue; config: Config }): BulkExports {
  const compartment = r4Model().compartment('Patient') ?? {};
  const bulk = new BulkExports({
    jobs,
    store: store.bulk,
    guard: core.guard,
    isResourceType: (type) => SERVED_RESOURCE_TYPES.includes(type),
    compartmentParams: compartment,
    referencesOf: (resource) =>
      core.extractor
        .extract(resource)
        .reference.filter((r) => r.target_type !== null && r.target_id !== null)
        .map((r) => ({ param: r.param, type: r.target_type as string, id: r.target_id as string })),
    readGroup: async (id, ctx) => (await core.rest.readResource('Group', id, ctx)) as Group,
    typeFilter: (type, query) => memoryFilter(type, query, { registry: core.params, extractor: core.extractor, localBases: [] }),
    subset: (resource, elements) => subsetWithMandatory(resource, r4Model(), elements),
    perProject: config.bulkExportsPerProject,
    keepMs: config.bulkExportExpiryHours * 3_600_000,
  });
  jobs.register(bulk.handler());
  return bulk;
}
