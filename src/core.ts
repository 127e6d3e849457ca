import type { Resource, SearchParameter } from 'fhir/r4';
import { fhirError } from './fhir/errors';
import type { ContextLog, RequestContext } from './context/request-context';
import { CustomSearchParameters } from './search/custom-params';
import type { ResourceSchema } from './fhir/resource-schema';
import type { OperationRegistry } from './operations/registry';
import { BuiltInResources } from './content/built-in-resources';
import { RestService } from './rest/rest-service';
import { PATCH_LIMITS } from './rest/patch-bounds';
import { IndexExtractor } from './search/extract';
import { SearchIndexer } from './search/indexer';
import { r4Model } from './fhir/model/model';
import { loadR4SearchParameters, SearchParameterRegistry } from './search/registry';
import { SearchService } from './search/search-service';
import type { CodeMatcher } from './search/terminology';
import { Repository } from './storage/repository';
import { AccessGuard } from './auth/guard';
import { LateBound } from './late-bound';
import { OperationInvoker } from './operations/invoke';
import { operationPolicy, parameterCheck } from './operations/policy';
import type { GraphQLOver, OperationDoor } from './rest/operations';
import type { ResourceStore } from './storage/store';

/**
 * The FHIR core every server instance is built from: storage with its versioning, the search
 * index kept in step with every write, search, and the REST interactions over them. The
 * composition root (bootstrap.ts) and the tests build it the same way.
 */

export interface CoreOptions {
  store: ResourceStore;
  schema: ResourceSchema;
  /** The operations, for their definitions (read-only resources) and for unknown `$code` answers. */
  registry: Pick<OperationRegistry<unknown>, 'definitions' | 'unknown'>;
  /** Value-set and hierarchy tests for the token modifiers (the terminology engine's). */
  codes?: CodeMatcher;
  /** The code system of a required binding's value set (tokens of bare codes get it as system). */
  bindingSystem?: (valueSet: string) => string | undefined;
  log?: ContextLog;
  /** Checks (and settles, e.g. a Subscription's status) a resource about to be written, after the structural check; throws a FhirError. */
  prepare?: (resource: Resource, ctx: RequestContext) => Promise<void>;
  /** Full validation before writes (VALIDATE_ON_WRITE, X-Validate-On-Write). */
  validate?: (resource: Resource, ctx: RequestContext) => Promise<void>;
  /**
   * Most resources one conditional delete removes (default 100); most entries in one Bundle (default
   * 100,000; the body size limit applies too); most bytes a PATCH may make a resource (the body
   * limit) and most operations in one patch (default 1,000).
   */
  limits?: { conditionalDeletes?: number; bundleEntries?: number; resourceBytes?: number; patchOperations?: number };
  /** Resources the server holds without storing them (bundled R4 content). */
  bundled?: (type: 'CodeSystem' | 'ValueSet' | 'ConceptMap') => Resource[];
}

export interface Core {
  repository: Repository;
  search: SearchService;
  rest: RestService;
  builtIn: BuiltInResources;
  indexer: SearchIndexer;
  extractor: IndexExtractor;
  params: SearchParameterRegistry;
  /** Stored SearchParameters and their indexing. */
  custom: CustomSearchParameters;
  /** The checks every write of a resource gets before it is stored (REST, package import); throws a FhirError. */
  checkResource(type: string, resource: Resource, project: string): void;
  /** What each principal may read and write. */
  guard: AccessGuard;
  /** What the REST core runs operations with, bound by `bindOperations` once their services exist. */
  operations: LateBound<OperationDoor>;
}

/** Types served read-only from the server itself. */
export const READ_ONLY_TYPES: ReadonlySet<string> = new Set(['OperationDefinition']);

let r4Params: SearchParameter[] | undefined;

/** The R4 parameters, parsed once per process; each core has its own registry (stored parameters differ). */
function builtInParams(): SearchParameterRegistry {
  r4Params ??= loadR4SearchParameters();
  return new SearchParameterRegistry(r4Model(), r4Params);
}

export function buildCore(options: CoreOptions): Core {
  const params = builtInParams();
  const extractor = new IndexExtractor(params, { bindingSystem: options.bindingSystem });
  const repository = new Repository(options.store, { index: (resource) => extractor.extract(resource) });
  const registry = options.registry;
  const builtIn = new BuiltInResources({
    operationDefinitions: () => registry.definitions(),
    terminology: (type) => options.bundled?.(type) ?? [],
    searchParameters: () => r4Params ?? [],
  });
  const indexer = new SearchIndexer(options.store, extractor);
  const patientCompartment = r4Model().compartment('Patient') ?? {};
  const guard = new AccessGuard({
    patientCompartment: (type) => patientCompartment[type],
    references: (resource) =>
      extractor.extract(resource).reference.map((r) => ({ param: r.param, type: r.target_type, id: r.target_id })),
  });
  const custom = new CustomSearchParameters(options.store, params, indexer, options.log);
  const search = new SearchService({
    store: options.store,
    indexing: (type, code) => custom.indexing(type, code),
    registry: params,
    model: r4Model(),
    codes: options.codes ?? noCodes,
    isResourceType: (type) => options.schema.isResourceType(type),
    builtIn,
    extractor,
    guard,
  });
  const checkResource = (type: string, resource: Resource, project: string): void => {
    options.schema.check(type, resource);
    refuseSecrets(type, resource);
    if (type === 'SearchParameter') custom.check(resource as SearchParameter, project);
  };
  const operations = new LateBound<OperationDoor>('the operations of the REST core');
  const rest = restService(options, { repository, search, builtIn, guard, custom, checkResource, operations });
  repository.onWrite((version) => {
    if (version.type === 'SearchParameter') void custom.written();
  });
  return { repository, search, rest, builtIn, indexer, extractor, params, custom, checkResource, guard, operations };
}

/** The REST interactions over the core's parts, with the write checks and limits the options give. */
function restService(
  options: CoreOptions,
  parts: Pick<Core, 'repository' | 'search' | 'builtIn' | 'guard' | 'custom' | 'checkResource' | 'operations'>,
): RestService {
  const { custom, checkResource } = parts;
  return new RestService({
    operations: parts.operations,
    repository: parts.repository,
    isResourceType: (type) => options.schema.isResourceType(type),
    readOnlyTypes: READ_ONLY_TYPES,
    checkResource: (type, resource, ctx) => checkResource(type, resource, ctx.project),
    beforeRequest: () => custom.refresh(),
    validate:
      options.prepare || options.validate
        ? async (resource, ctx) => {
            await options.prepare?.(resource, ctx);
            await options.validate?.(resource, ctx);
          }
        : undefined,
    search: parts.search,
    model: r4Model(),
    builtIn: parts.builtIn,
    guard: parts.guard,
    unknownOperation: (code, level, type) => options.registry.unknown(code, level, type),
    limits: {
      conditionalDeletes: options.limits?.conditionalDeletes ?? 100,
      bundleEntries: options.limits?.bundleEntries ?? 100_000,
      patch: {
        ...PATCH_LIMITS,
        maxBytes: options.limits?.resourceBytes ?? PATCH_LIMITS.maxBytes,
        maxOperations: options.limits?.patchOperations ?? PATCH_LIMITS.maxOperations,
      },
    },
  });
}

export interface OperationOptions<S> {
  registry: OperationRegistry<S>;
  /** What handlers are given; they may use the core (hence the late binding). */
  services: S;
  schema: ResourceSchema;
  /** Runs a request's `_graphql` on an operation's output; absent: `_graphql` is ignored. */
  graphqlOver?: GraphQLOver;
}

/**
 * The operations over a core: their invoker with its authorization policy, bound into the REST
 * core so that HTTP, Bundle entries and bots run them through the same door.
 */
export function bindOperations<S>(core: Core, options: OperationOptions<S>): OperationInvoker<S> {
  const invoker = new OperationInvoker<S>({
    registry: options.registry,
    services: options.services,
    checkResource: parameterCheck(options.schema),
    // Instance-level operations may name built-in content (ValueSet/administrative-gender).
    readInstance: (type, id, ctx) => core.rest.readResource(type, id, ctx),
    authorize: operationPolicy(core.guard),
  });
  core.operations.bind({ invoker, graphqlOver: options.graphqlOver });
  return invoker;
}

/** Password hashes and MFA secrets live outside resources (src/auth/passwords.ts); a write carrying one is refused. */
function refuseSecrets(type: string, resource: Resource): void {
  if (type !== 'User') return;
  for (const element of ['passwordHash', 'mfaSecret']) {
    if (element in resource) {
      throw fhirError(
        'ERR_RESOURCE_INVALID',
        {
          type,
          path: `User.${element}`,
          reason:
            'passwords and secrets are never stored in the User resource (the owner password is set by Project/$init)',
        },
        { expression: [`User.${element}`] },
      );
    }
  }
}

const noCodes: CodeMatcher = {
  valueSet: async () => undefined,
  hierarchy: async () => undefined,
};
