/**
 * A part the composition root builds after a part that needs it: the one way a cycle of the
 * composition is closed (the REST core runs operations whose handlers use the REST core; bots
 * call routes of the HTTP app that serves them). It is constructed before both, given to the
 * earlier part at construction, and bound once when the later part exists; nothing patches a
 * field afterwards. The earlier part asks for the value only at call time.
 */
export class LateBound<T> {
  private value?: T;

  /** `what`: the part it stands for, named in the error of a use before it is bound. */
  constructor(private readonly what: string) {}

  /** Binds the part once; a second binding is a composition error. */
  bind(value: T): void {
    if (this.value !== undefined) throw new Error(`${this.what} is bound twice`);
    this.value = value;
  }

  /** The part, or undefined before it is bound (for parts that answer without it until then). */
  peek(): T | undefined {
    return this.value;
  }

  /** The part; throws when it is used before it is bound (a composition error). */
  get(): T {
    if (this.value === undefined) throw new Error(`${this.what} is used before it is bound`);
    return this.value;
  }
}
