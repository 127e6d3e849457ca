import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type * as FhirPath from 'fhirpath';
import { referencedType } from './references';
import { compileSimple } from './simple-fhirpath';

/**
 * Invariants (`constraint.expression`) evaluated by HL7's FHIRPath engine for JS, each expression
 * compiled once per base path and kept. The engine (with its grammar and UCUM tables) is loaded
 * on the first invariant evaluated, never at start-up and never by the structural check of writes.
 */

type Evaluator = (focus: unknown, env: Record<string, unknown>) => unknown[];

export interface InvariantEnv {
  /** `%resource`: the resource the element is in (a contained one for its own elements). */
  resource: unknown;
  /** `%rootResource`: the resource that holds it (the container for a contained resource). */
  rootResource: unknown;
  /** The resource types of the entries of the Bundle the resource is in, by fullUrl (for `resolve()`). */
  bundle?: Map<string, string>;
  /** The engine's environment variables, made once per resource. */
  vars?: Record<string, unknown>;
}

const OK: InvariantResult = { ok: true };
const FAIL: InvariantResult = { ok: false };

export type InvariantResult = { ok: true } | { ok: false } | { ok: 'unknown'; reason: string };

const require = createRequire(import.meta.url);

interface ResNode {
  data: unknown;
}
interface Engine {
  fhirpath: typeof FhirPath;
  model: FhirPath.Model;
  options: Record<string, unknown>;
}

let engine: Engine | undefined;

function loadEngine(): Engine {
  if (engine) return engine;
  const entry = require.resolve('fhirpath');
  // The engine's own node type, so that what resolve() answers is typed (`resolve() is Practitioner`).
  const { ResourceNode } = require(join(dirname(entry), 'types.js')) as {
    ResourceNode: { makeResNode(ctx: unknown, data: unknown, parent: null, path: null, data2: null, type: null): ResNode };
  };
  // resolve() without fetching anything: contained resources, Bundle entries, and otherwise a
  // resource of the type the reference names (enough for the `resolve() is X` of R4 invariants).
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
  engine = {
    fhirpath: require('fhirpath') as typeof FhirPath,
    model: require('fhirpath/fhir-context/r4') as FhirPath.Model,
    options: { async: false, traceFn: () => undefined, userInvocationTable: { resolve: { fn: resolve, internalStructures: true } } },
  };
  return engine;
}

function resolveLocally(ref: string, vars: Record<string, unknown>): unknown {
  if (ref.startsWith('#')) {
    const root = vars.rootResource as { contained?: { id?: unknown }[] } | undefined;
    if (ref === '#') return root;
    return root?.contained?.find((c) => c?.id === ref.slice(1));
  }
  const type = referencedType(ref, vars.bundle as Map<string, string> | undefined);
  return type ? { resourceType: type } : undefined;
}

/**
 * R4 invariants that HL7's Java FHIRPath engine reads leniently and the JS engine strictly, so
 * that, as written, they fail valid resources: que-7 tests a FHIR boolean with the System type
 * name `Boolean`.
 */
const CORRECTED: Record<string, string> = {
  "operator = 'exists' implies (answer is Boolean)": "operator = 'exists' implies (answer is boolean)",
};

const SYSTEMS = { ucum: 'http://unitsofmeasure.org', sct: 'http://snomed.info/sct', loinc: 'http://loinc.org' };

export class Invariants {
  private readonly compiled = new Map<string, Evaluator | Error>();

  /** Whether `expression` holds for `focus` (an element's JSON), with the element's path for type information. */
  check(expression: string, focus: unknown, basePath: string, env: InvariantEnv): InvariantResult {
    const simple = compileSimple(expression);
    if (simple) {
      const answer = simple(focus, env);
      if (answer !== 'engine') return answer === false ? FAIL : OK;
    }
    const evaluate = this.evaluator(CORRECTED[expression] ?? expression, basePath);
    if (evaluate instanceof Error) return { ok: 'unknown', reason: evaluate.message };
    let result: unknown[];
    try {
      env.vars ??= { ...SYSTEMS, resource: env.resource, rootResource: env.rootResource, bundle: env.bundle };
      result = evaluate(focus, env.vars);
    } catch (err) {
      return { ok: 'unknown', reason: (err as Error).message };
    }
    // An expression that evaluates to nothing passes; only a single false fails.
    return result.length === 1 && result[0] === false ? FAIL : OK;
  }

  private evaluator(expression: string, basePath: string): Evaluator | Error {
    const key = `${basePath}\u0000${expression}`;
    let evaluate = this.compiled.get(key);
    if (evaluate) return evaluate;
    const { fhirpath, model, options } = loadEngine();
    try {
      const compiled = fhirpath.compile({ base: basePath, expression }, model, options as { async: false });
      evaluate = (focus, env) => compiled(focus as never, env as never) as unknown[];
    } catch (err) {
      evaluate = new Error(`cannot be compiled (${(err as Error).message.split('\n')[0]})`);
    }
    this.compiled.set(key, evaluate);
    return evaluate;
  }

  get size(): number {
    return this.compiled.size;
  }
}
