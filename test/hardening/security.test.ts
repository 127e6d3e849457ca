import type { Bundle } from 'fhir/r4';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { routesOf } from '../../src/app';
import { publicUrlsOf } from '../../src/http/public-routes';
import { FHIR_JSON, onBothBackends, serverApp } from '../helpers/server-app';

const TOKEN = 'hardening-token-0123456789';
const AUTH = { authorization: `Bearer ${TOKEN}` };

/** Every RESTful path shape the catch-all resource route answers. */
const REST_PATHS = [
  'Patient',
  'Patient/x1',
  'Patient/x1/_history',
  'Patient/x1/_history/1',
  'Patient/_search',
  'Patient/_history',
  '_history',
  'Patient/x1/Observation',
  'anything',
];

/** Concrete URLs for a route pattern: every parameter filled, for each resource type given. */
function concreteAll(pattern: string, type: string): string[] {
  const filled = pattern.replace(':type', type).replace(':id', 'x1').replace(':vid', '1');
  return filled.endsWith('*') ? REST_PATHS.map((p) => filled.replace('*', p)) : [filled];
}

describe('auth applies to every route', () => {
  let app: FastifyInstance;
  let close: () => Promise<void>;
  beforeAll(async () => {
    ({ app, close } = await serverApp({ authTokens: [TOKEN] }));
  });
  afterAll(() => close());

  test('walking the route table (every operation at every level, CRUD, history, OperationDefinition): 401 without a token', async () => {
    const routes = routesOf(app);
    expect(routes.length).toBeGreaterThan(40);
    let checked = 0;
    const publicRoutes = new Set<string>();
    let publicChecked = 0;
    for (const route of routes) {
      const types = route.url.includes(':type') ? ['Patient', 'ValueSet', 'OperationDefinition'] : [''];
      for (const url of types.flatMap((type) => concreteAll(route.url, type))) {
        const isMetadata = url === '/fhir/R4/metadata' && (route.method === 'GET' || route.method === 'HEAD');
        const payload = ['POST', 'PUT', 'PATCH'].includes(route.method) ? { resourceType: 'Parameters' } : undefined;
        const res = await app.inject({
          method: route.method as 'GET',
          url,
          headers: payload ? FHIR_JSON : {},
          payload,
        });
        if (isMetadata) {
          expect(res.statusCode, `${route.method} ${url}`).toBe(200);
          continue;
        }
        // Discovery and sign-in (route.public), probes, the OpenAPI document and the pages (console,
        // /docs): answered without a token, and never with a failure of the server.
        if (route.public || publicUrlsOf(app).has(route.url)) {
          expect(res.statusCode, `${route.method} ${url}`).not.toBe(401);
          expect(res.statusCode, `${route.method} ${url}`).toBeLessThan(500);
          if (route.public) publicRoutes.add(`${route.method} ${route.url}`);
          else publicChecked++;
          continue;
        }
        expect(res.statusCode, `${route.method} ${url}`).toBe(401);
        expect(res.headers['www-authenticate'], `${route.method} ${url}`).toMatch(/^Bearer/);
        if (route.method !== 'HEAD') expect(res.json().resourceType).toBe('OperationOutcome');
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(100);
    expect(publicChecked).toBeGreaterThanOrEqual(7);
    expect([...publicRoutes].sort()).toEqual([
      'GET /.well-known/jwks.json',
      'GET /.well-known/smart-configuration',
      'GET /fhir/R4/.well-known/smart-configuration',
      'GET /oauth2/authorize',
      // The Subscriptions websocket: the socket is bound by the token its first message carries.
      'GET /ws/subscriptions-r4',
      'HEAD /.well-known/jwks.json',
      'HEAD /.well-known/smart-configuration',
      'HEAD /fhir/R4/.well-known/smart-configuration',
      'HEAD /oauth2/authorize',
      'POST /auth/login',
      'POST /oauth2/authorize',
      'POST /oauth2/token',
    ]);
  });

  test('with the token the same walk never answers 401', async () => {
    for (const route of routesOf(app))
      for (const url of concreteAll(route.url, route.url.includes(':type') ? 'ValueSet' : '')) {
        const payload = ['POST', 'PUT', 'PATCH'].includes(route.method) ? { resourceType: 'Parameters' } : undefined;
        const res = await app.inject({
          method: route.method as 'GET',
          url,
          headers: { ...AUTH, ...(payload ? FHIR_JSON : {}) },
          payload,
        });
        expect(res.statusCode, `${route.method} ${url}`).not.toBe(401);
        expect(res.statusCode, `${route.method} ${url}`).toBeLessThan(500);
      }
  });
});

/** Ids and search values built to break out of a SQL string; they must stay plain data. */
const HOSTILE = [
  "x'; DROP TABLE resources; --",
  "' OR '1'='1",
  '"; DELETE FROM resource_versions; --',
  '\\',
  '%',
  '_',
  "x' UNION SELECT content FROM resource_versions --",
];

function hostileSuite(name: string, open: () => Promise<{ app: FastifyInstance; close: () => Promise<void> }>) {
  describe(`hostile ids and search values (${name})`, () => {
    let app: FastifyInstance;
    let close: () => Promise<void>;
    beforeAll(async () => {
      ({ app, close } = await open());
      const res = await app.inject({
        method: 'PUT',
        url: '/fhir/R4/ValueSet/keep-me',
        headers: FHIR_JSON,
        payload: { resourceType: 'ValueSet', id: 'keep-me', url: 'http://example.org/keep', status: 'active' },
      });
      expect(res.statusCode).toBe(201);
    });
    afterAll(() => close());

    test.each(HOSTILE)('%s is refused as an id and matches nothing as a search value', async (value) => {
      for (const method of ['GET', 'PUT', 'DELETE'] as const) {
        const res = await app.inject({
          method,
          url: `/fhir/R4/ValueSet/${encodeURIComponent(value)}`,
          headers: method === 'PUT' ? FHIR_JSON : {},
          payload: method === 'PUT' ? { resourceType: 'ValueSet', id: value, status: 'active' } : undefined,
        });
        expect([400, 404]).toContain(res.statusCode);
        expect(res.json().resourceType).toBe('OperationOutcome');
      }
      for (const param of ['url', 'version', '_id']) {
        const res = await app.inject({ method: 'GET', url: `/fhir/R4/ValueSet?${param}=${encodeURIComponent(value)}` });
        expect(res.statusCode, res.body).toBe(200);
        expect((res.json() as Bundle).total).toBe(0);
      }
      const kept = await app.inject({ method: 'GET', url: '/fhir/R4/ValueSet/keep-me' });
      expect(kept.statusCode).toBe(200);
      const all = await app.inject({ method: 'GET', url: '/fhir/R4/ValueSet?url=http://example.org/keep' });
      expect((all.json() as Bundle).total).toBe(1);
    });
  });
}

onBothBackends((backend, open) =>
  hostileSuite(backend, async () => {
    const { server, cleanup } = await open();
    return { app: server.app, close: cleanup };
  }),
);
