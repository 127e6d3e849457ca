import type { OpenApiSource } from './openapi';
import { idParam, ID, type Json, type PathItem } from './openapi-shared';

/** The paths beside the FHIR API: public discovery, OAuth 2 / SMART sign-in, Bulk Data files, the administrators' views. */

export function publicPaths(source: OpenApiSource, paths: Record<string, PathItem>): void {
  const page = (operationId: string, summary: string, type = 'text/html'): Json => ({
    tags: ['pages'],
    operationId,
    summary,
    security: [{}],
    responses: { '200': { description: summary, content: { [type]: { schema: { type: 'string' } } } } },
  });
  const probe = (operationId: string, summary: string): Json => ({
    tags: ['health'],
    operationId,
    summary,
    security: [{}],
    responses: {
      '200': { description: summary, content: { 'application/json': { schema: { type: 'object' } } } },
      '503': { $ref: '#/components/responses/Error' },
    },
  });
  paths['/healthz'] = { get: probe('healthz', 'The process is up') };
  paths['/readyz'] = { get: probe('readyz', 'Storage reachable and content loaded (503 otherwise)') };
  paths[`${source.base}/openapi.json`] = {
    get: { ...page('openapi', 'This document', 'application/json'), tags: ['pages'] },
  };
  paths['/docs'] = { get: page('docs', 'This document rendered with Swagger UI') };
  paths['/docs/{file}'] = {
    get: {
      ...page('docs-file', 'A file of the Swagger UI page', '*/*'),
      parameters: [{ name: 'file', in: 'path', required: true, schema: { type: 'string' } }],
    },
  };
  paths['/'] = { get: page('console', 'The web console') };
  paths['/console/{file}'] = {
    get: {
      ...page('console-file', 'A file of the web console', '*/*'),
      parameters: [{ name: 'file', in: 'path', required: true, schema: { type: 'string' } }],
    },
  };
}

/** Sign-in, the token endpoint and discovery (src/http/routes/oauth.ts). */
export function oauthPaths(source: OpenApiSource, paths: Record<string, PathItem>): void {
  const json = (operationId: string, summary: string, extra: Json = {}): Json => ({
    tags: ['oauth'],
    operationId,
    summary,
    security: [{}],
    responses: {
      '200': { description: summary, content: { 'application/json': { schema: { type: 'object' } } } },
      '400': { description: 'An OAuth error (RFC 6749 5.2): {error, error_description}' },
    },
    ...extra,
  });
  const form = {
    required: true,
    content: {
      'application/x-www-form-urlencoded': { schema: { type: 'object' } },
      'application/json': { schema: { type: 'object' } },
    },
  };
  paths['/auth/login'] = {
    post: json('login', 'Sign in with email, password and a PKCE challenge (S256): a single-use code', {
      requestBody: form,
    }),
  };
  paths['/oauth2/token'] = {
    post: json(
      'token',
      'The token endpoint: authorization_code, refresh_token, client_credentials (secret or private_key_jwt)',
      { requestBody: form },
    ),
  };
  paths['/oauth2/authorize'] = {
    get: {
      tags: ['oauth'],
      operationId: 'authorize',
      summary: 'SMART App Launch: the sign-in page',
      security: [{}],
      responses: {
        '200': { description: 'The sign-in page', content: { 'text/html': { schema: { type: 'string' } } } },
        '302': { description: 'Back to the client with an error' },
      },
    },
    post: {
      tags: ['oauth'],
      operationId: 'authorize-submit',
      summary: 'SMART App Launch: sign in, then back to the client with a code',
      security: [{}],
      requestBody: form,
      responses: { '302': { description: 'Back to the client with code and state' } },
    },
  };
  paths['/auth/me'] = {
    get: {
      ...json(
        'me',
        "Who the token is for, as Medplum's server answers: the profile, project, membership and user as resources; scopes",
      ),
      security: [{ bearer: [] }],
    },
  };
  paths['/oauth2/logout'] = {
    post: {
      ...json('logout', "Signs out: the token's sign-in (its access and refresh tokens) is revoked"),
      security: [{ bearer: [] }],
    },
  };
  paths['/.well-known/smart-configuration'] = { get: json('smart-configuration', 'SMART discovery') };
  paths[`${source.base}/.well-known/smart-configuration`] = {
    get: json('smart-configuration-fhir', 'SMART discovery, at the FHIR base'),
  };
  paths['/.well-known/jwks.json'] = { get: json('jwks', "The server's token signing keys") };
}

/** Bulk Data 2.0.0 (src/http/routes/bulk.ts): kick-off at three levels, status, files. */
export function bulkPaths(source: OpenApiSource, paths: Record<string, PathItem>): void {
  const prefer = { name: 'Prefer', in: 'header', required: true, schema: { type: 'string', const: 'respond-async' } };
  const params = ['_outputFormat', '_since', '_type'].map((name) => ({
    name,
    in: 'query',
    required: false,
    schema: { type: 'string' },
  }));
  const kickOff = (operationId: string, summary: string, extra: Json[] = []): Json => ({
    tags: ['bulk'],
    operationId,
    summary,
    parameters: [prefer, ...params, ...extra],
    responses: {
      '202': { description: 'Started: Content-Location is the status URL' },
      default: { $ref: '#/components/responses/Error' },
    },
  });
  const levels: [string, string, string, Json[]][] = [
    [`${source.base}/$export`, 'export-system', 'Export every resource of the project (Bulk Data 2.0.0)', []],
    [`${source.base}/Patient/$export`, 'export-patient', "Export every patient's compartment", []],
    [`${source.base}/Group/{id}/$export`, 'export-group', "Export the compartments of a Group's members", [ID]],
  ];
  for (const [path, id, summary, extra] of levels)
    paths[path] = { get: kickOff(`${id}-get`, summary, extra), post: kickOff(`${id}-post`, summary, extra) };
  const statusId = idParam('id', 'The export');
  paths[`${source.base}/bulk/status/{id}`] = {
    get: {
      tags: ['bulk'],
      operationId: 'export-status',
      summary: 'Progress (202 with X-Progress and Retry-After), or the manifest (200)',
      parameters: [statusId],
      responses: {
        '200': { description: 'The manifest', content: { 'application/json': { schema: { type: 'object' } } } },
        '202': { description: 'Still running' },
        '429': { description: 'Polled sooner than Retry-After' },
        default: { $ref: '#/components/responses/Error' },
      },
    },
    delete: {
      tags: ['bulk'],
      operationId: 'export-cancel',
      summary: 'Cancel or remove the export (202; 404 afterwards)',
      parameters: [statusId],
      responses: { '202': { description: 'Removed' }, default: { $ref: '#/components/responses/Error' } },
    },
  };
  paths[`${source.base}/bulk/files/{id}/{file}`] = {
    get: {
      tags: ['bulk'],
      operationId: 'export-file',
      summary: 'One NDJSON file of a finished export',
      parameters: [statusId, { name: 'file', in: 'path', required: true, schema: { type: 'string' } }],
      responses: {
        '200': {
          description: 'NDJSON, one resource per line',
          content: { 'application/fhir+ndjson': { schema: { type: 'string' } } },
        },
        default: { $ref: '#/components/responses/Error' },
      },
    },
  };
}

/** The administrators' views (src/http/routes/admin.ts). */
export function adminPaths(paths: Record<string, PathItem>): void {
  paths['/admin/jobs'] = {
    get: {
      tags: ['admin'],
      operationId: 'admin-jobs',
      summary: "The project's newest background jobs (administrators only)",
      parameters: [
        { name: 'kind', in: 'query', required: false, schema: { type: 'string' } },
        { name: '_count', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 1000 } },
      ],
      responses: {
        '200': {
          description: '{ jobs: [...] }, newest first',
          content: { 'application/json': { schema: { type: 'object' } } },
        },
        default: { $ref: '#/components/responses/Error' },
      },
    },
  };
}

/**
 * The whole document, or (`only`) the part about some resource types: the system level, the
 * pages, and those types' interactions and operations. A viewer renders a part much faster.
 */
