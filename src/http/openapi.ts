import { isSimpleTypeName } from '../fhir/datatypes';
import type { OperationSpec, ParamSpec } from '../fhir/operation-definition';
import {
  FHIR_JSON,
  ref,
  paramRef,
  idParam,
  ID,
  VID,
  RESULT_PARAM_NAMES,
  RESULT_PARAMS,
  ANSWERS,
  fhirAnswer,
  fhirBody,
  op,
  patchBody,
  formBody,
  type Json,
  type PathItem,
  type Answer,
} from './openapi-shared';
import { adminPaths, bulkPaths, oauthPaths, publicPaths } from './openapi-server-paths';

/**
 * The OpenAPI 3.1 document of the server, generated from what routes it: the operation registry
 * (each OperationDefinition: levels, GET or POST only, inputs, `return` or Parameters), the
 * resource types with their interactions and search parameters, and the public pages. It cannot
 * drift from the routes; a test holds both ways (every route documented, every path a route).
 */

export interface OpenApiSource {
  base: string;
  title: string;
  version: string;
  resourceTypes: readonly string[];
  readOnlyTypes: ReadonlySet<string>;
  operations: readonly OperationSpec[];
  searchParams?: (type: string) => { code: string; type: string }[];
  /** The server signs people and clients in (OAuth 2 / SMART endpoints). */
  oauth?: boolean;
  /** The server runs Bulk Data exports (kick-off, status and file URLs). */
  bulk?: boolean;
  /** The websocket channel of Subscriptions (/ws/subscriptions-r4). */
  subscriptionSocket?: boolean;
  /** The administrators' views (`/admin/jobs`). */
  admin?: boolean;
}

function searchParameters(source: OpenApiSource, type: string): Json[] {
  const own = (source.searchParams?.(type) ?? []).map((p) => ({
    name: p.code,
    in: 'query',
    required: false,
    schema: { type: 'string' },
    description: `${p.type} search parameter`,
  }));
  const seen = new Set(own.map((p) => p.name));
  return [
    ...own.sort((a, b) => a.name.localeCompare(b.name)),
    ...RESULT_PARAM_NAMES.filter((name) => !seen.has(name)).map(paramRef),
  ];
}

function resourcePaths(source: OpenApiSource, type: string, paths: Record<string, PathItem>): void {
  const at = `${source.base}/${type}`;
  const search = searchParameters(source, type);
  const readOnly = source.readOnlyTypes.has(type);
  paths[at] = {
    get: op(type, `search-${type}`, `Search ${type}`, { parameters: search, responses: fhirAnswer('Bundle') }),
    ...(readOnly
      ? {}
      : {
          post: op(type, `create-${type}`, `Create a ${type} (If-None-Exist for a conditional create)`, {
            requestBody: fhirBody(ref('Resource'), `A ${type}`),
          }),
          put: op(type, `conditional-update-${type}`, `Update the ${type} the search criteria select`, {
            requestBody: fhirBody(ref('Resource'), `A ${type}`),
          }),
          delete: op(type, `conditional-delete-${type}`, `Delete the ${type} resources the search criteria select`),
          patch: op(type, `conditional-patch-${type}`, `Patch the ${type} the search criteria select`, {
            requestBody: patchBody(),
          }),
        }),
  };
  paths[`${at}/_search`] = {
    post: op(type, `search-post-${type}`, `Search ${type} with a form body`, {
      requestBody: formBody(),
      responses: fhirAnswer('Bundle'),
    }),
  };
  paths[`${at}/_history`] = {
    get: op(type, `history-${type}`, `History of every ${type}`, { responses: fhirAnswer('Bundle') }),
  };
  paths[`${at}/{id}`] = {
    get: op(type, `read-${type}`, `Read a ${type}`, { parameters: [ID] }),
    ...(readOnly
      ? {}
      : {
          put: op(type, `update-${type}`, `Update (or create) a ${type} by id; If-Match for a version-aware update`, {
            parameters: [ID],
            requestBody: fhirBody(ref('Resource'), `A ${type}`),
          }),
          delete: op(type, `delete-${type}`, `Delete a ${type}`, { parameters: [ID] }),
          patch: op(type, `patch-${type}`, `Patch a ${type} (JSON Patch or FHIRPath Patch)`, {
            parameters: [ID],
            requestBody: patchBody(),
          }),
        }),
  };
  paths[`${at}/{id}/_history`] = {
    get: op(type, `history-instance-${type}`, `History of a ${type}`, {
      parameters: [ID],
      responses: fhirAnswer('Bundle'),
    }),
  };
  paths[`${at}/{id}/_history/{vid}`] = {
    get: op(type, `vread-${type}`, `Read a version of a ${type}`, { parameters: [ID, VID] }),
  };
  if (COMPARTMENTS.has(type))
    paths[`${at}/{id}/{type}`] = {
      get: op(
        type,
        `compartment-${type}`,
        `Search the resources of a type (or * for all) in this ${type}'s compartment`,
        {
          parameters: [
            ID,
            {
              name: 'type',
              in: 'path',
              required: true,
              schema: { type: 'string' },
              description: 'A resource type, or *',
            },
          ],
          responses: fhirAnswer('Bundle'),
        },
      ),
    };
}

/** R4's compartments: `Patient/1/Observation` searches one type (or `*` every type) in one. */
const COMPARTMENTS = new Set(['Patient', 'Encounter', 'RelatedPerson', 'Practitioner', 'Device']);

const NUMBER_TYPES: Record<string, string> = {
  integer: 'integer',
  positiveInt: 'integer',
  unsignedInt: 'integer',
  decimal: 'number',
  boolean: 'boolean',
};

function queryParameter(param: ParamSpec): Json {
  const value = { type: NUMBER_TYPES[param.type ?? ''] ?? 'string' };
  const many = param.max > 1;
  return {
    name: param.name,
    in: 'query',
    required: param.min > 0,
    schema: many ? { type: 'array', items: value } : value,
    ...(many ? { style: 'form', explode: true } : {}),
    description: `${param.type} (${param.min}..${param.maxText})`,
  };
}

function operationPaths(source: OpenApiSource, spec: OperationSpec, paths: Record<string, PathItem>): void {
  const answer: Answer = spec.returnsResource ? 'Resource' : 'Parameters';
  // The definition itself is a resource of the server (OperationDefinition/<id>); its prose stays there.
  const description = `${spec.definition.title ?? spec.definition.name}. Defined by ${spec.url} (OperationDefinition/${spec.id}).`;
  const queryable = spec.inputs.filter((p) => p.part.length === 0 && isSimpleTypeName(p.type));
  const place = (path: string, level: string, tag: string, pathParams: Json[]) => {
    const id = `${spec.code}-${level}${tag === 'system' ? '' : `-${tag}`}`;
    const item: PathItem = {
      post: op(tag, `post-${id}`, `$${spec.code}`, {
        description,
        parameters: pathParams,
        requestBody: fhirBody(ref('Parameters'), 'The input Parameters'),
        responses: fhirAnswer(answer),
      }),
    };
    // GET only where the operation does not change state (the server answers 405 otherwise).
    if (!spec.affectsState) {
      item.get = op(tag, `get-${id}`, `$${spec.code}`, {
        description,
        parameters: [...pathParams, ...queryable.map(queryParameter)],
        responses: fhirAnswer(answer),
      });
    }
    paths[path] = item;
  };
  if (spec.system) place(`${source.base}/$${spec.code}`, 'system', 'system', []);
  for (const type of spec.resources) {
    if (spec.typeLevel) place(`${source.base}/${type}/$${spec.code}`, 'type', type, []);
    if (spec.instance) place(`${source.base}/${type}/{id}/$${spec.code}`, 'instance', type, [ID]);
  }
}

function systemPaths(source: OpenApiSource, paths: Record<string, PathItem>): void {
  const bundle = ref('Bundle');
  paths[`${source.base}/metadata`] = {
    get: {
      ...op('system', 'capabilities', 'The CapabilityStatement (public); mode=terminology for TerminologyCapabilities'),
      parameters: [
        {
          name: 'mode',
          in: 'query',
          required: false,
          schema: { type: 'string', enum: ['full', 'normative', 'terminology'] },
        },
      ],
      security: [{}, { bearer: [] }],
    },
  };
  paths[source.base] = {
    get: op('system', 'search-system', 'Search every type', {
      parameters: RESULT_PARAMS,
      responses: fhirAnswer('Bundle'),
    }),
    post: op('system', 'batch-transaction', 'Process a batch or transaction Bundle', {
      requestBody: fhirBody(bundle, 'A batch or transaction Bundle'),
      responses: fhirAnswer('Bundle'),
    }),
  };
  paths[`${source.base}/_search`] = {
    post: op('system', 'search-system-post', 'Search every type with a form body', {
      requestBody: formBody(),
      responses: fhirAnswer('Bundle'),
    }),
  };
  paths[`${source.base}/_history`] = {
    get: op('system', 'history-system', 'History of every resource', { responses: fhirAnswer('Bundle') }),
  };
}

export function buildOpenApi(source: OpenApiSource, only?: ReadonlySet<string>): Json {
  const paths: Record<string, PathItem> = {};
  const included = only ? source.resourceTypes.filter((type) => only.has(type)) : source.resourceTypes;
  publicPaths(source, paths);
  if (source.oauth) oauthPaths(source, paths);
  if (source.bulk) bulkPaths(source, paths);
  if (source.subscriptionSocket) {
    paths['/ws/subscriptions-r4'] = {
      get: {
        tags: ['system'],
        operationId: 'subscriptions-websocket',
        security: [{}],
        summary:
          'Websocket of Subscriptions (upgrade): bind with {"type":"bind-with-token","payload":{"token":...}} (token from Subscription/[id]/$get-ws-binding-token), then receive notification Bundles',
        responses: {
          '101': { description: 'Switching to the websocket protocol' },
          '404': { description: 'Not a websocket upgrade request' },
        },
      },
    };
  }
  if (source.admin) adminPaths(paths);
  systemPaths(source, paths);
  for (const type of included) resourcePaths(source, type, paths);
  for (const spec of source.operations) {
    operationPaths(
      source,
      only ? { ...spec, resources: spec.resources.filter((type) => only.has(type)) } : spec,
      paths,
    );
  }
  const resource = {
    type: 'object',
    required: ['resourceType'],
    properties: { resourceType: { type: 'string' }, id: { type: 'string' } },
    additionalProperties: true,
  };
  return {
    openapi: '3.1.0',
    info: {
      title: source.title,
      version: source.version,
      description:
        'FHIR R4 server: RESTful interactions, search and operations, generated from the definitions the server routes by.',
    },
    servers: [{ url: '/' }],
    security: [{ bearer: [] }],
    tags: [
      { name: 'system' },
      { name: 'health' },
      { name: 'pages' },
      ...(source.oauth ? [{ name: 'oauth' }] : []),
      ...(source.bulk ? [{ name: 'bulk' }] : []),
      ...(source.admin ? [{ name: 'admin' }] : []),
      ...included.map((name) => ({ name })),
    ],
    paths: Object.fromEntries(Object.entries(paths).sort(([a], [b]) => a.localeCompare(b))),
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'A token of AUTH_TOKENS (or one the server issued)' },
      },
      schemas: {
        Resource: resource,
        Bundle: {
          ...resource,
          properties: {
            ...resource.properties,
            resourceType: { const: 'Bundle' },
            type: { type: 'string' },
            entry: { type: 'array', items: { type: 'object' } },
          },
        },
        Parameters: {
          ...resource,
          properties: {
            ...resource.properties,
            resourceType: { const: 'Parameters' },
            parameter: { type: 'array', items: { type: 'object' } },
          },
        },
        OperationOutcome: {
          ...resource,
          properties: {
            ...resource.properties,
            resourceType: { const: 'OperationOutcome' },
            issue: { type: 'array', items: { type: 'object' } },
          },
        },
      },
      parameters: {
        id: idParam('id', 'The logical id of the resource'),
        vid: idParam('vid', 'The version id'),
        ...Object.fromEntries(
          RESULT_PARAM_NAMES.map((name) => [
            name,
            { name, in: 'query', required: false, schema: { type: 'string' }, description: 'Search result parameter' },
          ]),
        ),
      },
      responses: {
        ...Object.fromEntries(
          Object.entries(ANSWERS).map(([name, description]) => [
            name,
            { description, content: { [FHIR_JSON]: { schema: ref(name) } } },
          ]),
        ),
        Error: {
          description: 'An OperationOutcome naming what went wrong',
          content: { [FHIR_JSON]: { schema: ref('OperationOutcome') } },
        },
      },
    },
  };
}
