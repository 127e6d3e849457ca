import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type * as FhirPath from 'fhirpath';
import { referencedType, type BundleIndex } from '../references';

/**
 * HL7's FHIRPath engine for JS with the R4 model, loaded once on first use (its grammar and UCUM
 * tables cost start-up time nobody should pay for a server that never evaluates FHIRPath). This
 * is the one place that loads it: expressions the server trusts (the bundled R4 definitions'
 * invariants, the core search parameters) call it in-process; expressions users wrote go through
 * `FhirPathPool` (pool.ts), whose workers call it too.
 */

export interface FhirPathEngine {
  fhirpath: typeof FhirPath;
  model: FhirPath.Model;
}

/** A compiled expression: answers the engine's result collection for a focus and environment. */
export type Compiled = (focus: unknown, vars: Record<string, unknown>) => unknown[];

const require = createRequire(import.meta.url);
let engine: FhirPathEngine | undefined;
let invariantOptions: Record<string, unknown> | undefined;

export function fhirpathEngine(): FhirPathEngine {
  engine ??= { fhirpath: require('fhirpath') as typeof FhirPath, model: require('fhirpath/fhir-context/r4') as FhirPath.Model };
  return engine;
}

/** Compiles an expression (throws on a syntax error); `base` is the element path it is evaluated at, for type information. */
export function compileExpression(expression: string, options: { base?: string; invariant?: boolean } = {}): Compiled {
  const { fhirpath, model } = fhirpathEngine();
  const path = options.base ? { base: options.base, expression } : expression;
  const compiled = fhirpath.compile(path, model, (options.invariant ? invariantEngineOptions() : { async: false }) as { async: false });
  return (focus, vars) => compiled(focus as never, vars as never) as unknown[];
}

/**
 * R4 invariants that HL7's Java FHIRPath engine reads leniently and the JS engine strictly, so
 * that, as written, they fail valid resources: que-7 tests a FHIR boolean with the System type
 * name `Boolean`.
 */
const CORRECTED: Record<string, string> = {
  "operator = 'exists' implies (answer is Boolean)": "operator = 'exists' implies (answer is boolean)",
};

/** An invariant's expression as the JS engine should read it. */
export function correctedInvariant(expression: string): string {
  return CORRECTED[expression] ?? expression;
}

/** The environment of invariants: `%ucum`, `%sct`, `%loinc`, and `%resource`/`%rootResource`/the Bundle index given. */
export function invariantVars(env: { resource: unknown; rootResource: unknown; bundle?: BundleIndex }): Record<string, unknown> {
  return { ucum: 'http://unitsofmeasure.org', sct: 'http://snomed.info/sct', loinc: 'http://loinc.org', resource: env.resource, rootResource: env.rootResource, bundle: env.bundle };
}

interface ResNode {
  data: unknown;
}

/**
 * resolve() without fetching anything: contained resources, Bundle entries, and otherwise a
 * resource of the type the reference names (enough for the `resolve() is X` of R4 invariants).
 */
function invariantEngineOptions(): Record<string, unknown> {
  if (invariantOptions) return invariantOptions;
  const entry = require.resolve('fhirpath');
  // The engine's own node type, so that what resolve() answers is typed (`resolve() is Practitioner`).
  const { ResourceNode } = require(join(dirname(entry), 'types.js')) as {
    ResourceNode: { makeResNode(ctx: unknown, data: unknown, parent: null, path: null, data2: null, type: null): ResNode };
  };
  const resolve = function (this: { vars: Record<string, unknown> }, items: ResNode[]): ResNode[] {
    const out: ResNode[] = [];
    for (const item of items ?? []) {
      const data = item?.data ?? item;
      const ref = typeof data === 'string' ? data : (data as { reference?: unknown } | null)?.reference;
      if (typeof ref !== 'string') continue;
      const found = resolveLocally(ref, this.vars);
      if (found) out.push(ResourceNode.makeResNode(this, found, null, null, null, null));
    }
    return out;
  };
  invariantOptions = { async: false, traceFn: () => undefined, userInvocationTable: { resolve: { fn: resolve, internalStructures: true } } };
  return invariantOptions;
}

function resolveLocally(ref: string, vars: Record<string, unknown>): unknown {
  if (ref.startsWith('#')) {
    const root = vars.rootResource as { contained?: { id?: unknown }[] } | undefined;
    if (ref === '#') return root;
    return root?.contained?.find((c) => c?.id === ref.slice(1));
  }
  const type = referencedType(ref, vars.bundle as BundleIndex | undefined);
  return type ? { resourceType: type } : undefined;
}
