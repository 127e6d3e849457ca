import { describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { freshSchema, hasPostgres } from '../helpers/postgres';
import { serverApp } from '../helpers/server-app';

const TOKEN = 'secret-token-0123456789';

function suite(name: string, start: () => Promise<{ server: ServerApp; cleanup: () => Promise<void> }>) {
  describe(`health probes (${name})`, () => {
    test('/healthz and /readyz answer without a token, whatever the Accept header; /readyz is 503 once storage is gone', async () => {
      const { server, cleanup } = await start();
      try {
        const { app } = server;
        const health = await app.inject({ method: 'GET', url: '/healthz', headers: { accept: 'text/plain' } });
        expect(health.statusCode).toBe(200);
        expect(health.json()).toEqual({ status: 'up' });
        const ready = await app.inject({ method: 'GET', url: '/readyz' });
        expect(ready.statusCode, ready.body).toBe(200);
        expect(ready.json()).toEqual({ status: 'ready', checks: ['storage', 'content'] });
        expect(ready.headers['cache-control']).toBe('no-store');
        // Everything else still needs the token.
        expect((await app.inject({ method: 'GET', url: '/fhir/R4/Patient' })).statusCode).toBe(401);

        await server.core.repository.store.close();
        const down = await app.inject({ method: 'GET', url: '/readyz' });
        expect(down.statusCode).toBe(503);
        expect(down.json().resourceType).toBe('OperationOutcome');
        expect(down.json().issue[0].code).toBe('transient');
        expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
      } finally {
        await cleanup();
      }
    });
  });
}

suite('SQLite', async () => {
  const server = await serverApp({ authTokens: [TOKEN] });
  return { server, cleanup: () => server.app.close() };
});

if (hasPostgres) {
  suite('PostgreSQL', async () => {
    const schema = await freshSchema();
    const server = await serverApp({ authTokens: [TOKEN], databaseUrl: schema.url });
    return {
      server,
      cleanup: async () => {
        await server.app.close();
        await schema.drop();
      },
    };
  });
}
