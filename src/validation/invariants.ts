import { compileExpression, correctedInvariant, invariantVars, type Compiled } from '../fhir/fhirpath/engine';
import { compileSimple } from './simple-fhirpath';

/**
 * Invariants (`constraint.expression`) of the bundled R4 definitions, evaluated in-process by
 * HL7's FHIRPath engine for JS, each expression compiled once per base path and kept. The engine
 * (with its grammar and UCUM tables) is loaded on the first invariant evaluated, never at start-up
 * and never by the structural check of writes. Invariants users wrote (stored profiles) are not
 * evaluated here but in `FhirPathPool`'s workers, under a time limit (see user-invariants.ts).
 */

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

export class Invariants {
  private readonly compiled = new Map<string, Compiled | Error>();

  /** Whether `expression` holds for `focus` (an element's JSON), with the element's path for type information. */
  check(expression: string, focus: unknown, basePath: string, env: InvariantEnv): InvariantResult {
    const simple = compileSimple(expression);
    if (simple) {
      const answer = simple(focus, env);
      if (answer !== 'engine') return answer === false ? FAIL : OK;
    }
    const evaluate = this.evaluator(correctedInvariant(expression), basePath);
    if (evaluate instanceof Error) return { ok: 'unknown', reason: evaluate.message };
    let result: unknown[];
    try {
      env.vars ??= invariantVars(env);
      result = evaluate(focus, env.vars);
    } catch (err) {
      return { ok: 'unknown', reason: (err as Error).message };
    }
    // An expression that evaluates to nothing passes; only a single false fails.
    return result.length === 1 && result[0] === false ? FAIL : OK;
  }

  private evaluator(expression: string, basePath: string): Compiled | Error {
    const key = `${basePath}\u0000${expression}`;
    let evaluate = this.compiled.get(key);
    if (evaluate) return evaluate;
    try {
      evaluate = compileExpression(expression, { base: basePath, invariant: true });
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
