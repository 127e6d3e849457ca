import type { InvariantEnv } from '../invariants';
import type { Scope } from '../resource-rules';

/**
 * Where the walk is: the FHIRPath of the element (issues are located by it), the invariant
 * environment and the scope of the resource the element is in, and how deep in the JSON it is
 * (past a limit the walk refuses). Each step down derives the next cursor; a contained or entry
 * resource starts its own.
 */
export class Cursor {
  constructor(
    readonly path: string,
    readonly env: InvariantEnv,
    readonly scope: Scope,
    readonly depth: number,
  ) {}

  /** A property of the element (`name`, or `value.ofType(Quantity)` for a choice): one level deeper. */
  child(name: string): Cursor {
    return new Cursor(`${this.path}.${name}`, this.env, this.scope, this.depth + 1);
  }

  /** Item `i` of the array at this cursor: at the level of the property that holds the array. */
  index(i: number): Cursor {
    return new Cursor(`${this.path}[${i}]`, this.env, this.scope, this.depth);
  }
}
