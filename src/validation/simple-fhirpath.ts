import { Parser } from './fhirpath-subset/parser';
import { tokenize } from './fhirpath-subset/tokenizer';
import { Unsupported } from './fhirpath-subset/unsupported';
import type { Collection, SimpleEnv } from './fhirpath-subset/evaluator';

/**
 * A small evaluator for the FHIRPath that most invariants are written in: paths of element names
 * (after a leading resource type name, `%resource` or `%rootResource`), `exists()`, `empty()`,
 * `hasValue()`, `not()`, `count()`, `first()`, `isDistinct()`, `allFalse()`, `is(Type)`,
 * `where()`/`all()`/`exists()`/`select()` with a criterion, `contains`/`startsWith`/`endsWith`/
 * `matches` with a string literal, `and`/`or`/`xor`/`implies`, `=`/`!=`, `in` a list of string
 * literals, `<`/`<=`/`>`/`>=` on numbers and same-precision dates, integer `+` and string `&`.
 * Five sixths of the invariant evaluations of the R4 examples are of this shape. Run as closures
 * over the JSON they cost a tenth of a full FHIRPath evaluation, and nothing for the engine's
 * parser to compile (5 to 40 ms an expression while it is cold, paid by a type's first
 * validation). Any expression outside this subset is not compiled here (the caller falls back to
 * the FHIRPath engine), so the subset's answers must be, and are, those of FHIRPath: empty
 * collections propagate through the logic operators with the specification's three-valued
 * tables. `matches` runs on RE2 (linear time), so a profile's regular expression cannot stall
 * validation; one RE2 cannot read goes to the engine.
 *
 * fhirpath-subset/ holds its stages: tokenizer.ts, parser.ts (which composes the closures as it
 * reads) and evaluator.ts (navigation over JSON and the three-valued logic).
 */

/** true or false; undefined for an empty answer (which passes); 'engine' when only the full engine can say. */
export type SimpleInvariant = (focus: unknown, env: SimpleEnv) => boolean | undefined | 'engine';

const cache = new Map<string, SimpleInvariant | null>();

/** The compiled invariant, or undefined when the expression is outside the subset. */
export function compileSimple(expression: string): SimpleInvariant | undefined {
  let compiled = cache.get(expression);
  if (compiled === undefined) {
    compiled = null;
    try {
      const parser = new Parser(tokenize(expression));
      const expr = parser.expression();
      if (parser.done()) {
        compiled = (focus, env) => {
          let result: Collection;
          try {
            result = expr([focus], env);
          } catch (err) {
            if (err instanceof Unsupported) return 'engine';
            throw err;
          }
          if (result.length === 0) return undefined;
          if (result.length === 1 && typeof result[0] === 'boolean') return result[0];
          return true;
        };
      }
    } catch {
      compiled = null;
    }
    cache.set(expression, compiled);
  }
  return compiled ?? undefined;
}
