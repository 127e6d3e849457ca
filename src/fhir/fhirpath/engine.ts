import { referencedType, type BundleIndex } from '../references';
import { fhirpathEngine, fhirpathResourceNode, type ResNode } from './load';

/**
 * Compiling FHIRPath with HL7's engine (loaded by load.ts): expressions the server trusts (the
 * bundled R4 definitions' invariants, the core search parameters) are compiled and evaluated
 * in-process; expressions users wrote go through `FhirPathPool` (pool.ts), whose workers compile
 * them here too.
 */

/** A compiled expression: answers the engine's result collection for a focus and environment. */
export type Compiled = (focus: unknown, vars: Record<string, unknown>) => unknown[];

let invariantOptions: Record<string, unknown> | undefined;

/** Compiles an expression (throws on a syntax error); `base` is the element path it is evaluated at, for type information. */
export function compileExpression(expression: string, options: { base?: string; invariant?: boolean } = {}): Compiled {
  const { fhirpath, model } = fhirpathEngine();
  const path = options.base ? { base: options.base, expression } : expression;
  const compiled = fhirpath.compile(
    path,
    model,
    (options.invariant ? invariantEngineOptions() : { async: false }) as { async: false },
  );
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
export function invariantVars(env: {
  resource: unknown;
  rootResource: unknown;
  bundle?: BundleIndex;
}): Record<string, unknown> {
  return {
    ucum: 'http://unitsofmeasure.org',
    sct: 'http://snomed.info/sct',
    loinc: 'http://loinc.org',
    resource: env.resource,
    rootResource: env.rootResource,
    bundle: env.bundle,
  };
}

/**
 * resolve() without fetching anything: contained resources, Bundle entries, and otherwise a
 * resource of the type the reference names (enough for the `resolve() is X` of R4 invariants).
 */
function invariantEngineOptions(): Record<string, unknown> {
  if (invariantOptions) return invariantOptions;
  const resolve = function (this: { vars: Record<string, unknown> }, items: ResNode[]): ResNode[] {
    const out: ResNode[] = [];
    for (const item of items ?? []) {
      const data = item?.data ?? item;
      const ref = typeof data === 'string' ? data : (data as { reference?: unknown } | null)?.reference;
      if (typeof ref !== 'string') continue;
      const found = resolveLocally(ref, this.vars);
      if (found) out.push(makeResNode({ context: this, data: found }));
    }
    return out;
  };
  invariantOptions = {
    async: false,
    traceFn: () => undefined,
    userInvocationTable: { resolve: { fn: resolve, internalStructures: true } },
  };
  return invariantOptions;
}

/** A node of the engine's type for `data`, made in the evaluation `context`, with no parent or path. */
function makeResNode(options: { context: unknown; data: unknown }): ResNode {
  return fhirpathResourceNode().makeResNode(options.context, options.data, null, null, null, null);
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
