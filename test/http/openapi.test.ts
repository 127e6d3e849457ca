import { Validator } from '@seriousme/openapi-schema-validator';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { routesOf } from '../../src/app';
import type { ServerApp } from '../../src/bootstrap';
import { loadDefinitions } from '../../src/operations/registry';
import { DEFINITIONS_DIR } from '../../src/project';
import { serverApp } from '../helpers/server-app';

const TOKEN = 'secret-token-0123456789';
const METHODS = ['get', 'post', 'put', 'delete', 'patch'] as const;

interface Document {
  openapi: string;
  paths: Record<
    string,
    Record<string, { operationId: string; parameters?: { name?: string; $ref?: string }[]; requestBody?: unknown }>
  >;
}

/** A route's URL pattern (`:id`, `*`) as a regular expression over concrete paths. */
function routePattern(url: string): RegExp {
  const body = url
    .split('/')
    .map((segment) =>
      segment === '*' ? '.+' : segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
    )
    .join('/');
  return new RegExp(`^${body}$`);
}

/** A parameter's name, inline or referenced (`#/components/parameters/_count`). */
function parameterName(p: { name?: string; $ref?: string }): string | undefined {
  return p.name ?? p.$ref?.split('/').pop();
}

/** A document path with every `{template}` filled in with a plausible value. */
function concrete(path: string): string {
  return path
    .replace(/\{type\}/g, 'Observation')
    .replace(/\{vid\}/g, '1')
    .replace(/\{file\}/g, 'app.js')
    .replace(/\{[^}]+\}/g, 'x1');
}

describe('the OpenAPI document', () => {
  let server: ServerApp;
  let app: FastifyInstance;
  let doc: Document;
  beforeAll(async () => {
    server = await serverApp({ authTokens: [TOKEN] });
    app = server.app;
    const res = await app.inject({ method: 'GET', url: '/fhir/R4/openapi.json' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    doc = res.json() as Document;
  });
  afterAll(() => server.close());

  test('validates against the OpenAPI 3.1 schema', async () => {
    expect(doc.openapi).toBe('3.1.0');
    const result = await new Validator().validate(doc as unknown as Parameters<Validator['validate']>[0]);
    expect(result.valid, JSON.stringify(result).slice(0, 3000)).toBe(true);
  });

  test('every path and method of the document is a route of the server', () => {
    const routes = routesOf(app).map((r) => ({ ...r, pattern: routePattern(r.url) }));
    const missing: string[] = [];
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const method of METHODS) {
        if (!item[method]) continue;
        const url = concrete(path);
        if (!routes.some((r) => r.method === method.toUpperCase() && r.pattern.test(url)))
          missing.push(`${method} ${path}`);
      }
    }
    expect(missing).toEqual([]);
    expect(Object.keys(doc.paths).length).toBeGreaterThan(500);
  });

  test('every route of the server is in the document, or answers 405 for that method', async () => {
    const documented = Object.entries(doc.paths).flatMap(([path, item]) =>
      METHODS.filter((m) => item[m]).map((m) => ({ method: m.toUpperCase(), url: concrete(path) })),
    );
    const undocumented: { method: string; url: string }[] = [];
    for (const route of routesOf(app)) {
      if (route.method === 'HEAD' || route.method === 'OPTIONS') continue;
      const pattern = routePattern(route.url);
      if (!documented.some((d) => d.method === route.method && pattern.test(d.url))) undocumented.push(route);
    }
    // What is left is a method the router takes but the server refuses there: PUT on the base,
    // GET of an operation that changes state. Each must say so with 405.
    for (const route of undocumented) {
      const url = route.url
        .replace(/:type\b/g, 'Patient')
        .replace(/:[^/]+/g, 'x1')
        .replace(/\*/g, 'Patient');
      const bodyless = route.method === 'GET' || route.method === 'DELETE';
      const headers = {
        authorization: `Bearer ${TOKEN}`,
        ...(bodyless ? {} : { 'content-type': 'application/fhir+json' }),
      };
      const res = await app.inject({
        method: route.method as 'GET',
        url,
        headers,
        payload: bodyless ? undefined : '{}',
      });
      expect(res.statusCode, `${route.method} ${route.url} is not in the document: ${res.body}`).toBe(405);
    }
  });

  test('an operation on every type routes by a type parameter: another type gets the 404 saying where it applies', async () => {
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/fhir+json' };
    for (const url of ['/fhir/R4/Unicorn/$validate', '/fhir/R4/Unicorn/1/$validate']) {
      const res = await app.inject({ method: 'POST', url, headers, payload: { resourceType: 'Patient' } });
      expect(res.statusCode).toBe(404);
      expect(res.json().issue[0]).toMatchObject({
        code: 'not-supported',
        details: {
          text: expect.stringMatching(/^Operation \$validate is not known for Unicorn \(it applies to Account, /),
        },
      });
    }
    // Beside ValueSet's own operations (static routes), ValueSet/$validate is the resource validation.
    const validated = await app.inject({
      method: 'POST',
      url: '/fhir/R4/ValueSet/$validate',
      headers,
      payload: { resourceType: 'ValueSet', status: 'draft' },
    });
    expect(validated.statusCode).toBe(200);
    expect(validated.json().resourceType).toBe('OperationOutcome');
  });

  test('operations come from their definitions: GET only where the state is not changed, inputs, the answer', () => {
    const validateCode = doc.paths['/fhir/R4/ValueSet/$validate-code'];
    expect(validateCode.get.parameters?.map(parameterName)).toEqual(
      expect.arrayContaining(['url', 'code', 'system', 'display']),
    );
    expect(validateCode.post.requestBody).toBeDefined();
    expect(doc.paths['/fhir/R4/ValueSet/{id}/$expand'].get).toBeDefined();
    const writers = loadDefinitions(DEFINITIONS_DIR).filter((definition) => definition.affectsState);
    expect(writers.length).toBeGreaterThan(0);
    for (const definition of writers) {
      for (const [path, item] of Object.entries(doc.paths))
        if (path.endsWith(`/$${definition.code}`)) expect(item.get, path).toBeUndefined();
    }
  });

  test('search parameters of each type are query parameters of its search', () => {
    const names = doc.paths['/fhir/R4/Patient'].get.parameters?.map(parameterName) ?? [];
    expect(names).toEqual(expect.arrayContaining(['birthdate', 'family', 'identifier', '_id', '_count']));
    expect(doc.paths['/fhir/R4/Patient/{id}/_history/{vid}'].get).toBeDefined();
  });

  test('?types= gives the part about some types (what /docs shows first): still valid, the system level kept', async () => {
    const res = await app.inject({ method: 'GET', url: '/fhir/R4/openapi.json?types=ValueSet,CodeSystem,Nothing' });
    const part = res.json() as Document;
    expect((await new Validator().validate(part as unknown as Parameters<Validator['validate']>[0])).valid).toBe(true);
    expect(part.paths['/fhir/R4/ValueSet/$expand']).toBeDefined();
    expect(part.paths['/fhir/R4/CodeSystem/{id}']).toBeDefined();
    expect(part.paths['/fhir/R4/metadata']).toBeDefined();
    expect(part.paths['/fhir/R4/Patient']).toBeUndefined();
    expect(part.paths['/fhir/R4/Patient/$validate']).toBeUndefined();
    expect(Object.keys(part.paths).length).toBeLessThan(Object.keys(doc.paths).length / 10);
  });

  test('the document, Swagger UI and its files are served without a token, from this server only', async () => {
    const page = await app.inject({ method: 'GET', url: '/docs', headers: { accept: 'text/html' } });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.headers['content-security-policy']).toContain("default-src 'self'");
    expect(page.body).not.toMatch(/https?:\/\//);
    for (const file of ['swagger-ui.css', 'swagger-ui-bundle.js', 'swagger-ui-standalone-preset.js', 'init.js']) {
      const res = await app.inject({ method: 'GET', url: `/docs/${file}` });
      expect(res.statusCode, file).toBe(200);
    }
    expect((await app.inject({ method: 'GET', url: '/docs/init.js' })).body).toContain('/fhir/R4/openapi.json');
    const unknown = await app.inject({ method: 'GET', url: '/docs/package.json' });
    expect(unknown.statusCode).toBe(404);
  });
});
