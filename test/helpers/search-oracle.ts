import { createRequire } from 'node:module';
import type { Bundle, Resource } from 'fhir/r4';
import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';

/**
 * What a search should answer, worked out without the server: the SearchParameter's FHIRPath
 * evaluated by HL7's engine (`fhirpath`) on the loaded resources, and the comparison rules of
 * R4 search.html written out here a second time, plainly.
 */

const require = createRequire(import.meta.url);
const fhirpath = require('fhirpath') as {
  evaluate(resource: unknown, expression: string, env?: unknown, model?: unknown): unknown[];
};
const r4 = require('fhirpath/fhir-context/r4');

export function fp(resource: Resource, expression: string): unknown[] {
  return fhirpath.evaluate(resource, expression, undefined, r4);
}

/** The ids of the resources for which `test` holds, sorted. */
export function expectedIds(resources: Resource[], type: string, test: (r: Resource) => boolean): string[] {
  return resources
    .filter((r) => r.resourceType === type && test(r))
    .map((r) => r.id as string)
    .sort();
}

/** Every page of a search, followed by its next links: the ids of the matches, in order. */
export async function searchAll(
  app: FastifyInstance,
  url: string,
  between?: () => Promise<void>,
): Promise<{ ids: string[]; pages: Bundle[] }> {
  const ids: string[] = [];
  const pages: Bundle[] = [];
  let next: string | undefined = url;
  while (next) {
    const res = await app.inject({ method: 'GET', url: next });
    expect(res.statusCode, res.body).toBe(200);
    const bundle = res.json() as Bundle;
    pages.push(bundle);
    for (const e of bundle.entry ?? []) if (e.search?.mode === 'match') ids.push(e.resource?.id as string);
    const link = bundle.link?.find((l) => l.relation === 'next')?.url;
    next = link ? link.replace(/^https?:\/\/[^/]+/, '') : undefined;
    if (next && between) await between();
  }
  return { ids, pages };
}

export async function searchIds(app: FastifyInstance, url: string): Promise<string[]> {
  return (await searchAll(app, url)).ids.sort();
}

/** The instants a FHIR date/dateTime covers (independent of the server's parser). */
export function instantRange(value: string): [number, number] {
  const [datePart, timePart] = value.split('T');
  const pieces = datePart.split('-').map(Number);
  if (timePart === undefined) {
    const [y, m, d] = pieces;
    const start = Date.UTC(y, (m ?? 1) - 1, d ?? 1);
    const end =
      d !== undefined ? Date.UTC(y, m - 1, d + 1) : m !== undefined ? Date.UTC(y, m, 1) : Date.UTC(y + 1, 0, 1);
    return [start, end - 1];
  }
  const at = Date.parse(value);
  const seconds = /:\d\d:\d\d/.test(timePart);
  return [at, at + (seconds ? 999 : 59_999)];
}

/** R4's prefixes over ranges: the target [low, high] against the search value's range. */
export function prefixHolds(prefix: string, target: [number, number], search: [number, number]): boolean {
  const [low, high] = target;
  const [vl, vh] = search;
  switch (prefix) {
    case 'eq':
      return low >= vl && high <= vh;
    case 'ne':
      return !(low >= vl && high <= vh);
    case 'gt':
      return high > vh;
    case 'lt':
      return low < vl;
    case 'ge':
      return high > vh || (low >= vl && high <= vh);
    case 'le':
      return low < vl || (low >= vl && high <= vh);
    case 'sa':
      return low > vh;
    case 'eb':
      return high < vl;
    default:
      throw new Error(prefix);
  }
}

export function normalized(text: string): string {
  return text
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase();
}
