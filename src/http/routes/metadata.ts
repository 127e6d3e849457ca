import type { FastifyInstance, FastifyRequest } from 'fastify';
import type {
  CapabilityStatement,
  CapabilityStatementRestSecurity,
  CapabilityStatementRestResource,
  CapabilityStatementRestResourceOperation,
  Resource,
} from 'fhir/r4';
import { fhirError } from '../../fhir/errors';
import { FHIR_JSON } from '../../fhir/outcome';
import type { OperationRegistry } from '../../operations/registry';

export interface MetadataOptions<S> {
  base: string;
  registry: OperationRegistry<S>;
  resourceTypes: readonly string[];
  /** Types that are only read (served from the registry or bundled content). */
  readOnlyTypes: ReadonlySet<string>;
  /** The search parameters of a type (name, definition, type). */
  searchParams?: (type: string) => { code: string; url: string; type: string }[];
  /** Changes when the search parameters do: the statement is built again then. */
  searchParamsRevision?: () => number;
  software: { name: string; version: string; releaseDate?: string };
  /** Lets a feature add what it advertises (extensions, instantiates) without the HTTP layer knowing it. */
  decorate?: (statement: CapabilityStatement) => void;
  /** Other `metadata?mode=` answers, e.g. `terminology`. */
  modes?: Record<string, () => Resource | Promise<Resource>>;
  /** How clients authenticate, at the base they address (the OAuth URIs are absolute). */
  security?: (baseUrl: string) => CapabilityStatementRestSecurity;
  /** The FHIR base as the request addresses it. */
  baseUrlOf?: (request: FastifyRequest) => string;
}

/** Statements with their security, by base URL (a few: one per name the server is reached by). */
const MAX_BASES = 20;

export function registerMetadataRoute<S>(app: FastifyInstance, options: MetadataOptions<S>): void {
  const build = () => ({
    revision: options.searchParamsRevision?.() ?? 0,
    statement: buildCapabilityStatement(options),
    byBase: new Map<string, string>(),
  });
  let built = build();
  app.get(`${options.base}/metadata`, async (request, reply) => {
    const mode = (request.query as { mode?: string }).mode;
    const revision = options.searchParamsRevision?.() ?? 0;
    if (revision !== built.revision) built = build();
    if (isCapabilityStatementMode(mode)) {
      if (!options.security || !options.baseUrlOf) return reply.type(FHIR_JSON).send(built.statement);
      const base = options.baseUrlOf(request);
      let text = built.byBase.get(base);
      if (text === undefined) {
        const statement = {
          ...built.statement,
          rest: built.statement.rest?.map((rest) => ({ ...rest, security: options.security?.(base) })),
        };
        text = JSON.stringify(statement);
        if (built.byBase.size < MAX_BASES) built.byBase.set(base, text);
      }
      return reply.type(FHIR_JSON).send(text);
    }
    const answer = options.modes?.[mode];
    if (!answer) throw fhirError('ERR_SEARCH_PARAM', { name: 'mode', value: mode });
    return reply.type(FHIR_JSON).send(await answer());
  });
}

/** The `mode`s (none included) answered with the CapabilityStatement itself; the others describe content. */
export function isCapabilityStatementMode(mode: unknown): mode is undefined | 'full' | 'normative' {
  return mode === undefined || mode === 'full' || mode === 'normative';
}

/** Built once from the registry and the resource types: the server's answer never drifts from its routes. */
export function buildCapabilityStatement<S>(options: MetadataOptions<S>): CapabilityStatement {
  const now = new Date().toISOString();
  const operationsFor = (type: string): CapabilityStatementRestResourceOperation[] =>
    options.registry.operations
      .filter((op) => (op.spec.typeLevel || op.spec.instance) && op.spec.resources.includes(type))
      .map((op) => ({ name: op.spec.code, definition: op.spec.url }));
  const resources: CapabilityStatementRestResource[] = options.resourceTypes.map((type) => {
    const readOnly = options.readOnlyTypes.has(type);
    const resource: CapabilityStatementRestResource = {
      type: type as CapabilityStatementRestResource['type'],
      interaction: (readOnly
        ? ['read', 'search-type']
        : ['read', 'vread', 'update', 'delete', 'history-instance', 'create', 'search-type']
      ).map((code) => ({ code: code as 'read' })),
      searchInclude: readOnly ? undefined : ['*'],
      searchRevInclude: readOnly ? undefined : ['*'],
      versioning: readOnly ? undefined : 'versioned-update',
      readHistory: readOnly ? undefined : true,
      updateCreate: readOnly ? undefined : true,
      searchParam: (options.searchParams?.(type) ?? [])
        .map((p) => ({ name: p.code, definition: p.url, type: p.type as 'token' }))
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
    };
    const operations = operationsFor(type);
    if (operations.length > 0) resource.operation = operations;
    return JSON.parse(JSON.stringify(resource)) as CapabilityStatementRestResource;
  });
  const statement: CapabilityStatement = {
    resourceType: 'CapabilityStatement',
    url: `http://${options.software.name}/CapabilityStatement/server`,
    version: options.software.version,
    name: options.software.name.replace(/[^A-Za-z0-9_]/g, '_'),
    title: `${options.software.name} FHIR R4 server`,
    status: 'active',
    date: now,
    kind: 'instance',
    software: {
      name: options.software.name,
      version: options.software.version,
      releaseDate: options.software.releaseDate ?? now,
    },
    implementation: { description: 'FHIR R4 terminology server' },
    fhirVersion: '4.0.1',
    format: ['application/fhir+json'],
    rest: [
      {
        mode: 'server',
        security: {
          cors: false,
          description: 'Bearer tokens (Authorization: Bearer <token>) when AUTH_TOKENS is configured',
        },
        resource: resources,
        operation: options.registry.operations
          .filter((op) => op.spec.system)
          .map((op) => ({ name: op.spec.code, definition: op.spec.url })),
      },
    ],
  };
  options.decorate?.(statement);
  return statement;
}
