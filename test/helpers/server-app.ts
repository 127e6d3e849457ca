import type { Resource } from 'fhir/r4';
import { expect, test } from 'vitest';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../../src/config';
import { createServerApp, type ServerApp } from '../../src/bootstrap';
import { testConfig } from './app';
import { freshSchema, hasPostgres, POSTGRES_SKIP_REASON } from './postgres';

/** The production app (every operation, bundled terminology) over in-memory SQLite, or a given store. */
export async function serverApp(config: Partial<Config> = {}): Promise<ServerApp> {
  return createServerApp(testConfig({ dataDir: ':memory:', ...config }));
}

export const FHIR_JSON = { 'content-type': 'application/fhir+json' };

/** PUTs a resource by its id and insists it was stored. */
export async function putResource(app: FastifyInstance, resource: Resource): Promise<void> {
  const res = await app.inject({
    method: 'PUT',
    url: `/fhir/R4/${resource.resourceType}/${resource.id}`,
    headers: FHIR_JSON,
    payload: resource,
  });
  expect(res.statusCode, res.body).toBeLessThan(300);
}

/** POSTs a Parameters body made of the given entries. */
export function postParameters(app: FastifyInstance, url: string, ...parameter: Record<string, unknown>[]) {
  return app.inject({ method: 'POST', url, headers: FHIR_JSON, payload: { resourceType: 'Parameters', parameter } });
}

export function param(name: string, value: unknown): Record<string, unknown> {
  if (typeof value === 'boolean') return { name, valueBoolean: value };
  if (typeof value === 'string')
    return {
      name,
      [name === 'code' ? 'valueCode' : name === 'url' || name === 'system' ? 'valueUri' : 'valueString']: value,
    };
  if (value && typeof value === 'object' && 'resourceType' in value) return { name, resource: value };
  if (value && typeof value === 'object' && 'coding' in value) return { name, valueCodeableConcept: value };
  return { name, valueCoding: value };
}

/** Reads a Parameters answer into name -> value (lists for repeated names). */
export function outputs(body: { parameter?: readonly object[] }): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const p of (body.parameter ?? []) as Record<string, unknown>[]) {
    const key = Object.keys(p).find((k) => k !== 'name') as string;
    const name = p.name as string;
    const value = p[key];
    if (name in out) out[name] = [...(Array.isArray(out[name]) ? (out[name] as unknown[]) : [out[name]]), value];
    else out[name] = value;
  }
  return out;
}

export function issueTexts(body: { parameter?: Record<string, unknown>[] }): string[] {
  const issues = outputs(body).issues as { issue: { details: { text: string } }[] } | undefined;
  return issues?.issue.map((i) => i.details.text) ?? [];
}

/** The entries of a Parameters body with this name, each read as name -> value of its parts. */
export function partsOf(body: { parameter?: readonly object[] }, name: string): Record<string, unknown>[] {
  return ((body.parameter ?? []) as { name: string; part?: object[] }[])
    .filter((p) => p.name === name)
    .map((p) => outputs({ parameter: p.part ?? [] }));
}

export interface OpenServer {
  server: ServerApp;
  cleanup: () => Promise<void>;
}

/**
 * Declares a suite once per backend: SQLite in memory, and PostgreSQL in a fresh schema of its
 * own (dropped afterwards) when TEST_DATABASE_URL is set (CI requires it); each `open` builds the
 * production app with `config`.
 */
export function onBothBackends(
  suite: (name: string, open: () => Promise<OpenServer>) => void,
  config: Partial<Config> = {},
): void {
  suite('SQLite', async () => {
    const server = await serverApp(config);
    return { server, cleanup: () => server.close() };
  });
  if (!hasPostgres) {
    test.skip(POSTGRES_SKIP_REASON, () => undefined);
    return;
  }
  suite('PostgreSQL', async () => {
    const schema = await freshSchema();
    const server = await serverApp({ ...config, databaseUrl: schema.url });
    return {
      server,
      cleanup: async () => {
        await server.close();
        await schema.drop();
      },
    };
  });
}

/** Stores resources as they are (ids kept) in a project, 500 to a transaction, without HTTP. */
export async function storeAll(server: ServerApp, resources: Resource[], project = 'default'): Promise<void> {
  for (let i = 0; i < resources.length; i += 500) {
    await server.core.repository.in(project).transaction((tx) => tx.putMany(resources.slice(i, i + 500)));
  }
}
