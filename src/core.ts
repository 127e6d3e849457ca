import type { Resource } from 'fhir/r4';
import type { ResourceSchema } from './fhir/resource-schema';
import type { OperationRegistry } from './operations/registry';
import { BuiltInResources } from './content/built-in-resources';
import { RestService } from './rest/rest-service';
import { engineCodeMatcher } from './search/engine-codes';
import { IndexExtractor } from './search/extract';
import { SearchIndexer } from './search/indexer';
import { r4Model } from './search/model/model';
import { loadR4SearchParameters, SearchParameterRegistry } from './search/registry';
import { SearchService } from './search/search-service';
import type { CodeMatcher } from './search/terminology';
import { Repository } from './storage/repository';
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
}

/** Types served read-only from the server itself. */
export const READ_ONLY_TYPES: ReadonlySet<string> = new Set(['OperationDefinition']);

let sharedParams: SearchParameterRegistry | undefined;

/** The built-in search parameters are the same for every instance in a process: compiled once. */
function builtInParams(): SearchParameterRegistry {
  sharedParams ??= new SearchParameterRegistry(r4Model(), loadR4SearchParameters());
  return sharedParams;
}

export function buildCore(options: CoreOptions): Core {
  const params = builtInParams();
  const extractor = new IndexExtractor(params, { bindingSystem: options.bindingSystem });
  const repository = new Repository(options.store, { index: (resource) => extractor.extract(resource) });
  const registry = options.registry;
  const builtIn = new BuiltInResources({
    operationDefinitions: () => registry.definitions(),
    terminology: (type) => options.bundled?.(type) ?? [],
    searchParameters: () => loadR4SearchParameters(),
  });
  const search = new SearchService({
    store: options.store,
    registry: params,
    model: r4Model(),
    codes: options.codes ?? noCodes,
    isResourceType: (type) => options.schema.isResourceType(type),
    builtIn,
    extractor,
  });
  const rest = new RestService({
    repository,
    isResourceType: (type) => options.schema.isResourceType(type),
    readOnlyTypes: READ_ONLY_TYPES,
    checkResource: (type, resource) => options.schema.check(type, resource),
    search,
    builtIn,
    unknownOperation: (code, level, type) => registry.unknown(code, level, type),
  });
  return { repository, search, rest, builtIn, indexer: new SearchIndexer(options.store, extractor), extractor, params };
}

const noCodes: CodeMatcher = {
  valueSet: async () => undefined,
  hierarchy: async () => undefined,
};

export { engineCodeMatcher };
