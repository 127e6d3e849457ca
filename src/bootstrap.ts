import type { FastifyInstance } from 'fastify';
import type { Resource } from 'fhir/r4';
import { buildApp, type AppParts } from './app';
import type { Logger } from 'pino';
import type { RequestContext } from './context/request-context';
import type { AnonymousCalls } from './bots/protocol';
import type { Repository } from './storage/repository';
import type { OperationRegistry } from './operations/registry';
import { LateBound } from './late-bound';
import { createLogger } from './logger';
import type { Config } from './config';
import { bindOperations, buildCore, type Core } from './core';
import { operationModules } from './operations/index';
import { DEFINITIONS_DIR, PACKAGE as pkg } from './project';
import { buildRegistry, loadDefinitions } from './operations/registry';
import type { OperationInvoker } from './operations/invoke';
import { decorateTerminologyServer, terminologyCapabilities } from './operations/terminology-capabilities';
import { engineCodeMatcher } from './search/engine-codes';
import type { AppServices } from './services';
import { JobQueue } from './jobs/queue';
import { decorateBulkData } from './bulk/export';
import { r4Model } from './fhir/model/model';
import type { ResourceStore } from './storage/store';
import { openStore } from './storage/open-store';
import { loadCoreContent } from './content/core-content';
import { StoredTerminologies } from './content/stored-terminology';
import { DEFAULT_PROJECT, SYSTEM_PROJECT } from './storage/store';
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
import { botEndpointHandler } from './bots/subscription-endpoint';
import { BotCron } from './bots/cron-jobs';
import { anonymousCalls } from './http/anonymous-calls';
import { checkBotSchedule } from './bots/schedule';
import { Subscriptions } from './subscriptions/subscriptions';
import { botService, bulkExports, readinessChecks } from './bootstrap-parts';

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

/**
 * Everything production needs, wired in dependency order: the logger first, then storage and the
 * core, authentication, the features (jobs, bots, subscriptions, GraphQL), the operations, and the
 * HTTP app last. The cycles of the composition are closed by the late bindings of `LateParts`.
 */
export async function createServerApp(
  config: Config,
  options: { logStream?: NodeJS.WritableStream } = {},
): Promise<ServerApp> {
  const log = createLogger(config, options.logStream);
  const registry = buildRegistry<AppServices>(loadDefinitions(DEFINITIONS_DIR), operationModules);
  const store = await openStore(config);
  try {
    return await compose({ config, log, registry, store });
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
}

/**
 * The cycles of the composition, each closed by a late binding made before the parts on both of
 * its sides (src/late-bound.ts): bound once, when the later part exists.
 */
interface LateParts {
  /** The validator reads stored profiles through the repository, which the core (built after it: its schema is the validator's) holds. */
  repository: LateBound<Repository>;
  /** The checks of a write that need parts built after the core: administrative writes (accounts), Subscriptions. */
  writeChecks: LateBound<(resource: Resource, ctx: RequestContext) => Promise<void>>;
  /** Bots' calls to the HTTP app's routes outside the REST core: the app is built last. */
  anonymous: LateBound<AnonymousCalls>;
}

interface Composition {
  config: Config;
  log: Logger;
  registry: OperationRegistry<AppServices>;
  store: ResourceStore;
}

async function compose({ config, log, registry, store }: Composition): Promise<ServerApp> {
  const late: LateParts = {
    repository: new LateBound('the repository, for stored profiles'),
    writeChecks: new LateBound('the write checks of accounts and subscriptions'),
    anonymous: new LateBound("the HTTP app's public routes, for bots"),
  };
  const base = await composeCore({ config, store, registry, late });
  const access = await composeAuth({ config, store, base });
  const features = composeFeatures({ config, log, store, base, access, late });
  const { core, terminology, fhirpath, validator, schema } = base;
  const { auth, accounts } = access;
  const { graphql, jobs, bots, subscriptions } = features;
  const services: AppServices = {
    config,
    fhirpath,
    repository: core.repository,
    terminology,
    validator,
    checkResource: core.checkResource,
    auth,
    accounts,
    graphql,
    rest: core.rest,
    search: core.search,
    jobs,
    bots,
    subscriptions,
  };
  const invoker = bindOperations(core, {
    registry,
    services,
    schema,
    graphqlOver: (query, output, ctx) => graphql.run({ query }, ctx, { method: 'GET', target: output }),
  });
  const app = await buildApp(appParts({ config, log, store, registry, base, access, features, invoker }));
  late.anonymous.bind(anonymousCalls(app));
  await subscriptions.start();
  jobs.start(config.jobWorkers);
  const close = async () => {
    await app.close();
    subscriptions.stop();
    await jobs.stop();
    await bots.close();
    access.live.close();
    await fhirpath.close();
    await store.close();
  };
  return { app, core, store, jobs, services, close };
}

/** Storage and the FHIR core over it: terminology, FHIRPath workers, the validator, and the index brought current. */
async function composeCore({
  config,
  store,
  registry,
  late,
}: {
  config: Config;
  store: ResourceStore;
  registry: OperationRegistry<AppServices>;
  late: LateParts;
}) {
  const stored = new StoredTerminologies(store);
  const terminology = new TerminologyService(loadCoreContent(), stored);
  // FHIRPath users wrote runs in these workers, bounded; none starts before the first such expression.
  const fhirpath = new FhirPathPool({
    workers: config.fhirpathWorkers,
    timeoutMs: config.fhirpathTimeoutMs,
    memoryMb: config.fhirpathMemoryMb,
  });
  // Definitions are read and compiled on first use, not here: start-up stays quick.
  const validator = new ResourceValidator({
    userExpressions: fhirpath,
    stored: storedDefinitions({
      search: async (type, query, project) => ({
        resources: await late.repository.get().in(project).byCanonical(type, query.url, query.version),
      }),
      changeMarks: (project, types) => store.changeMarks(project, types),
      shared: SYSTEM_PROJECT,
    }),
    terminology: terminologyPort(terminology),
  });
  const schema = new StructuralCheck(validator);
  // Before the core: its write checks ask it whether a client's jwksUri may be called.
  const clientKeysOutbound = new Outbound({
    allowPrivate: config.outboundAllowPrivate,
    allowTargets: config.outboundAllowTargets,
  });
  const core = buildCore({
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
      await late.writeChecks.get()(resource, ctx);
    },
    validate: async (resource, ctx) => {
      if (validatesOnWrite(config.validateOnWrite, ctx.validateOnWrite))
        await validateBeforeWrite(validator, resource, { deadline: ctx.deadline, project: ctx.project });
    },
  });
  late.repository.bind(core.repository);
  core.repository.onWrite((version) => stored.noteLocalWrite(version));
  // Stored search parameters first, so that a rebuild of the index includes them.
  await core.custom.refresh();
  await core.indexer.ensureCurrent();
  return { core, terminology, fhirpath, validator, schema, clientKeysOutbound };
}

type Base = Awaited<ReturnType<typeof composeCore>>;

/** Accounts, signing keys, live grants, tokens and OAuth sign-in. */
async function composeAuth({ config, store, base }: { config: Config; store: ResourceStore; base: Base }) {
  const { repository } = base.core;
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
  const tokens = new TokenService(
    keys,
    store.ephemeral,
    config.baseUrl ? new URL(config.baseUrl).origin : TOKEN_ISSUER,
    live,
  );
  const auth = new AuthService({
    accounts,
    ephemeral: store.ephemeral,
    tokens,
    assertions: new ClientAssertions({ store: store.ephemeral, outbound: base.clientKeysOutbound }),
  });
  return { keys, accounts, adminWrites, live, tokens, auth };
}

type Access = Awaited<ReturnType<typeof composeAuth>>;

interface FeatureOptions {
  config: Config;
  log: Logger;
  store: ResourceStore;
  base: Base;
  access: Access;
  late: LateParts;
}

/** GraphQL, the job queue with bulk export, bots with their schedules, and Subscriptions; binds the write checks they add. */
function composeFeatures({ config, log, store, base, access, late }: FeatureOptions) {
  const { core, fhirpath, schema } = base;
  const graphql = new LazyGraphQL({
    model: r4Model(),
    resourceTypes: [...schema.resourceTypes],
    search: core.search,
    handle: (request, ctx) => core.rest.handle(request, ctx),
    read: (type, id, ctx) => core.rest.readResource(type, id, ctx),
    searchParams: (type) => [...core.params.declared(type).keys()],
    referenceTargets: (type) =>
      new Set(
        [...core.params.declared(type).values()]
          .filter((p) => p.type === 'reference')
          .flatMap((p) => (p.target.length > 0 ? p.target : ['Resource'])),
      ),
    revision: () => core.params.revision,
    fhirpath,
  });
  const jobs = new JobQueue(store.jobs, { leaseMs: config.jobLeaseMs, notices: store.notices, log });
  const bulk = bulkExports({ core, store, jobs, config });
  const bots = botService(config, { core, accounts: access.accounts, anonymous: late.anonymous });
  const subscriptions = new Subscriptions({
    repository: core.repository,
    fhirpath,
    jobs,
    outbound: new Outbound({ allowPrivate: config.outboundAllowPrivate, allowTargets: config.outboundAllowTargets }),
    retryMs: config.subscriptionRetryMs,
    registry: core.params,
    extractor: core.extractor,
    isResourceType: (type) => schema.isResourceType(type),
    log,
  });
  // Medplum's convention: a rest-hook Subscription whose endpoint is Bot/[id] runs that bot.
  subscriptions.delivery.registerEndpointHandler(
    'Bot/',
    botEndpointHandler({ bots, rest: core.rest }, { baseUrl: config.baseUrl }),
  );
  // Bots with a schedule (Bot.cronString, Bot.cronTiming) run from the job queue.
  const botCron = new BotCron({ bots, rest: core.rest, jobs, baseUrl: config.baseUrl, log });
  core.repository.observe(botCron);
  jobs.register(botCron.handler());
  late.writeChecks.bind(async (resource, ctx) => {
    await checkAdminWrite(resource, ctx, access.adminWrites);
    await subscriptions.prepare(resource);
  });
  return { graphql, jobs, bulk, bots, subscriptions };
}

type Features = ReturnType<typeof composeFeatures>;

interface AppComposition {
  config: Config;
  log: Logger;
  store: ResourceStore;
  registry: OperationRegistry<AppServices>;
  base: Base;
  access: Access;
  features: Features;
  invoker: OperationInvoker<AppServices>;
}

/** What the HTTP app is given: the composed services; it only registers routes over them. */
function appParts({
  config,
  log,
  store,
  registry,
  base,
  access,
  features,
  invoker,
}: AppComposition): AppParts<AppServices> {
  const { core, schema, terminology } = base;
  return {
    config,
    log,
    rest: core.rest,
    schema,
    registry,
    invoker,
    software: { name: pkg.name, version: pkg.version },
    searchParams: (type) => [...core.params.declared(type).values()],
    searchParamsRevision: () => core.params.revision,
    decorateCapabilities: (statement) => {
      decorateTerminologyServer(statement);
      decorateBulkData(statement);
    },
    metadataModes: {
      terminology: async () =>
        terminologyCapabilities(registry, await terminology.resolver(DEFAULT_PROJECT), {
          name: pkg.name,
          version: pkg.version,
        }),
    },
    readiness: readinessChecks(store, terminology),
    bulk: features.bulk,
    subscriptionSocket: features.subscriptions.websocket,
    jobs: features.jobs,
    oauth: {
      auth: access.auth,
      keys: access.keys,
      verify: async (token) => {
        const principal = await access.tokens.verify(token);
        return principal && (await access.live.holds(principal)) ? principal : undefined;
      },
      projectExists: async (id) => (await store.read(SYSTEM_PROJECT, 'Project', id))?.resource != null,
    },
  };
}
