import { RE2JS } from 're2js';
import { fhirpathModel } from '../fhir/fhirpath/load';


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
 */

/** A collection: the values found (JSON values; a primitive with only `_x` is present with no value). */
type Collection = unknown[];
type Expr = (focus: Collection, env: SimpleEnv) => Collection;

/** `%resource` and `%rootResource`, as the engine is given them. */
export interface SimpleEnv {
  resource?: unknown;
  rootResource?: unknown;
}

/** Stands for a primitive that has extensions but no value (`_birthDate` without `birthDate`). */
const NO_VALUE = Symbol('no value');

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

class Unsupported extends Error {}

type Token = { kind: 'name' | 'string' | 'number' | 'op' | 'punct'; text: string };

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (/[A-Za-z_]/.test(c)) {
      let j = i + 1;
      while (j < text.length && /[A-Za-z0-9_]/.test(text[j])) j++;
      tokens.push({ kind: 'name', text: text.slice(i, j) });
      i = j;
      continue;
    }
    if (c === '`') {
      const j = text.indexOf('`', i + 1);
      if (j < 0) throw new Unsupported();
      tokens.push({ kind: 'name', text: text.slice(i + 1, j) });
      i = j + 1;
      continue;
    }
    if (c === "'") {
      let j = i + 1;
      let value = '';
      while (j < text.length && text[j] !== "'") {
        if (text[j] === '\\') throw new Unsupported();
        value += text[j++];
      }
      if (j >= text.length) throw new Unsupported();
      tokens.push({ kind: 'string', text: value });
      i = j + 1;
      continue;
    }
    if (/[0-9]/.test(c)) {
      let j = i + 1;
      while (j < text.length && /[0-9]/.test(text[j])) j++;
      if (text[j] === '.') throw new Unsupported();
      tokens.push({ kind: 'number', text: text.slice(i, j) });
      i = j;
      continue;
    }
    if (c === '!' && text[i + 1] === '=') {
      tokens.push({ kind: 'op', text: '!=' });
      i += 2;
      continue;
    }
    if (c === '=' || c === '|' || c === '+' || c === '&') {
      tokens.push({ kind: 'op', text: c });
      i++;
      continue;
    }
    if (c === '<' || c === '>') {
      const orEqual = text[i + 1] === '=';
      tokens.push({ kind: 'op', text: orEqual ? `${c}=` : c });
      i += orEqual ? 2 : 1;
      continue;
    }
    if (c === '%' && /^%(resource|rootResource)(?![A-Za-z0-9_])/.test(text.slice(i))) {
      const name = text.startsWith('%resource', i) ? '%resource' : '%rootResource';
      tokens.push({ kind: 'name', text: name });
      i += name.length;
      continue;
    }
    if (c === '$' && text.startsWith('$this', i) && !/[A-Za-z0-9_]/.test(text[i + 5] ?? '')) {
      tokens.push({ kind: 'name', text: '$this' });
      i += 5;
      continue;
    }
    if (c === '(' || c === ')' || c === '.') {
      tokens.push({ kind: 'punct', text: c });
      i++;
      continue;
    }
    throw new Unsupported();
  }
  return tokens;
}

const KEYWORDS = new Set(['and', 'or', 'xor', 'implies', 'true', 'false']);

class Parser {
  private at = 0;
  constructor(private readonly tokens: Token[]) {}

  done(): boolean {
    return this.at === this.tokens.length;
  }

  private peek(): Token | undefined {
    return this.tokens[this.at];
  }

  private take(text?: string): Token {
    const token = this.tokens[this.at];
    if (!token || (text !== undefined && token.text !== text)) throw new Unsupported();
    this.at++;
    return token;
  }

  private isWord(text: string): boolean {
    const t = this.peek();
    return t?.kind === 'name' && t.text === text;
  }

  /** implies (lowest) < or/xor < and < equality < path. */
  expression(): Expr {
    let left = this.orExpr();
    while (this.isWord('implies')) {
      this.take();
      const l = left;
      const r = this.orExpr();
      left = (focus, env) => implies(bool(l(focus, env)), () => bool(r(focus, env)));
    }
    return left;
  }

  private orExpr(): Expr {
    let left = this.andExpr();
    while (this.isWord('or') || this.isWord('xor')) {
      const op = this.take().text;
      const l = left;
      const r = this.andExpr();
      left = op === 'or' ? (focus, env) => or(bool(l(focus, env)), () => bool(r(focus, env))) : (focus, env) => xor(bool(l(focus, env)), bool(r(focus, env)));
    }
    return left;
  }

  private andExpr(): Expr {
    let left = this.membership();
    while (this.isWord('and')) {
      this.take();
      const l = left;
      const r = this.membership();
      left = (focus, env) => and(bool(l(focus, env)), () => bool(r(focus, env)));
    }
    return left;
  }

  /** `status in ('proposed' | 'cancelled')`: a code against a list of string literals. */
  private membership(): Expr {
    const left = this.equality();
    if (!this.isWord('in')) return left;
    this.take();
    const listed = new Set<string>();
    this.take('(');
    for (;;) {
      const literal = this.take();
      if (literal.kind !== 'string') throw new Unsupported();
      listed.add(literal.text);
      if (this.peek()?.text !== '|') break;
      this.take('|');
    }
    this.take(')');
    return (focus, env) => {
      const c = left(focus, env);
      if (c.length === 0) return [];
      if (c.length > 1 || typeof c[0] !== 'string' || temporal(c[0])) throw new Unsupported();
      return [listed.has(c[0])];
    };
  }

  private equality(): Expr {
    const left = this.comparison();
    const t = this.peek();
    if (t?.text !== '=' && t?.text !== '!=') return left;
    this.take();
    const right = this.comparison();
    const negate = t.text === '!=';
    return binary(left, right, (x, y) => {
      if (typeof x === 'object' || typeof y === 'object' || typeof x !== typeof y || temporal(x) || temporal(y)) throw new Unsupported();
      return (x === y) !== negate;
    });
  }

  /** `resource.is(Composition)`: a resource's own type against a concrete resource type. */
  private isType(input: Expr): Expr {
    const type = this.take();
    if (type.kind !== 'name' || !/^[A-Z][A-Za-z]*$/.test(type.text) || ABSTRACT_TYPES.has(type.text)) throw new Unsupported();
    this.take(')');
    return (focus, env) => {
      const c = input(focus, env);
      if (c.length === 0) return [];
      if (c.length > 1 || !isResource(c[0])) throw new Unsupported();
      return [c[0].resourceType === type.text];
    };
  }

  /**
   * `<`, `<=`, `>`, `>=` between numbers, and between dates or dateTimes written to the same
   * precision in the same time zone (which order as text); other dates and quantities are left to the engine.
   */
  private comparison(): Expr {
    const left = this.additive();
    const t = this.peek();
    if (t?.text !== '<' && t?.text !== '<=' && t?.text !== '>' && t?.text !== '>=') return left;
    this.take();
    const right = this.additive();
    const op = t.text;
    return binary(left, right, (x, y) => {
      if (!(typeof x === 'number' && typeof y === 'number') && !sameDatePrecision(x, y)) throw new Unsupported();
      const [p, q] = [x as number | string, y as number | string];
      return op === '<' ? p < q : op === '<=' ? p <= q : op === '>' ? p > q : p >= q;
    });
  }

  /**
   * `+` between integers (`identifier.count() + name.count()`; strings and decimals are left to
   * the engine), and `&` between strings, where an empty side is the empty string.
   */
  private additive(): Expr {
    let left = this.path();
    while (this.peek()?.text === '+' || this.peek()?.text === '&') {
      const op = this.take().text;
      const l = left;
      const r = this.path();
      left =
        op === '+'
          ? binary(l, r, (x, y) => {
              if (!Number.isInteger(x) || !Number.isInteger(y)) throw new Unsupported();
              return (x as number) + (y as number);
            })
          : (focus, env) => [text(l(focus, env)) + text(r(focus, env))];
    }
    return left;
  }

  /** A term, then `.name` and `.fn()` steps. */
  private path(): Expr {
    let expr = this.term();
    while (this.peek()?.text === '.') {
      this.take('.');
      const name = this.take();
      if (name.kind !== 'name' || KEYWORDS.has(name.text)) throw new Unsupported();
      if (this.peek()?.text === '(') expr = this.call(expr, name.text);
      else expr = child(expr, name.text);
    }
    return expr;
  }

  private term(): Expr {
    const t = this.take();
    if (t.kind === 'string') return () => [t.text];
    if (t.kind === 'number') {
      const n = Number(t.text);
      return () => [n];
    }
    if (t.text === '(') {
      const inner = this.expression();
      this.take(')');
      return inner;
    }
    if (t.kind === 'name') {
      if (t.text === 'true' || t.text === 'false') {
        const value = t.text === 'true';
        return () => [value];
      }
      if (t.text === '$this') return (focus) => focus;
      if (t.text === '%resource') return (_focus, env) => (env.resource === undefined ? [] : [env.resource]);
      if (t.text === '%rootResource') return (_focus, env) => (env.rootResource === undefined ? [] : [env.rootResource]);
      if (/^[A-Z]/.test(t.text)) return this.typeName(t.text);
      if (KEYWORDS.has(t.text)) throw new Unsupported();
      if (this.peek()?.text === '(') return this.call((focus) => focus, t.text);
      return child((focus) => focus, t.text);
    }
    throw new Unsupported();
  }

  /**
   * A leading type name (`Appointment.status`) is a type test in FHIRPath: on a resource of that
   * type it is the resource itself; anything else (a data type's focus) is left to the engine.
   */
  private typeName(name: string): Expr {
    if (this.peek()?.text !== '.') throw new Unsupported();
    return (focus) => {
      for (const item of focus) if (!isResource(item) || item.resourceType !== name) throw new Unsupported();
      return focus;
    };
  }

  private call(input: Expr, name: string): Expr {
    this.take('(');
    if (this.peek()?.text !== ')') return this.callWithArgument(input, name);
    this.take(')');
    switch (name) {
      case 'exists':
        return (focus, env) => [input(focus, env).length > 0];
      case 'empty':
        return (focus, env) => [input(focus, env).length === 0];
      case 'count':
        return (focus, env) => [input(focus, env).length];
      case 'first':
        return (focus, env) => input(focus, env).slice(0, 1);
      case 'isDistinct':
        return (focus, env) => {
          const c = input(focus, env);
          if (c.some((v) => typeof v !== 'string' || temporal(v))) throw new Unsupported();
          return [new Set(c).size === c.length];
        };
      case 'allFalse':
        return (focus, env) => {
          const c = input(focus, env);
          if (c.some((b) => typeof b !== 'boolean')) throw new Unsupported();
          return [c.every((b) => b === false)];
        };
      case 'not':
        return (focus, env) => {
          const b = bool(input(focus, env));
          return b === undefined ? [] : [!b];
        };
      case 'hasValue':
        return (focus, env) => {
          const c = input(focus, env);
          return [c.length === 1 && c[0] !== NO_VALUE && (typeof c[0] !== 'object' || c[0] === null)];
        };
      default:
        throw new Unsupported();
    }
  }

  private callWithArgument(input: Expr, name: string): Expr {
    if (name === 'where' || name === 'all' || name === 'exists' || name === 'select') {
      const criterion = this.expression();
      this.take(')');
      const holds = (item: unknown, env: SimpleEnv) => bool(criterion([item], env)) === true;
      if (name === 'where') return (focus, env) => input(focus, env).filter((item) => holds(item, env));
      if (name === 'select') return (focus, env) => input(focus, env).flatMap((item) => criterion([item], env));
      if (name === 'exists') return (focus, env) => [input(focus, env).some((item) => holds(item, env))];
      return (focus, env) => [input(focus, env).every((item) => holds(item, env))];
    }
    if (name === 'is') return this.isType(input);
    const arg = this.take();
    if (arg.kind !== 'string') throw new Unsupported();
    this.take(')');
    const text = arg.text;
    let test: (s: string) => boolean;
    switch (name) {
      case 'contains':
        test = (s) => s.includes(text);
        break;
      case 'startsWith':
        test = (s) => s.startsWith(text);
        break;
      case 'endsWith':
        test = (s) => s.endsWith(text);
        break;
      case 'matches': {
        let re: RE2JS;
        try {
          re = RE2JS.compile(withoutOptionalTail(text), RE2JS.DOTALL);
        } catch {
          throw new Unsupported();
        }
        test = (s) => re.matcher(s).find();
        break;
      }
      default:
        throw new Unsupported();
    }
    return (focus, env) => {
      const c = input(focus, env);
      if (c.length === 0) return [];
      if (c.length > 1 || typeof c[0] !== 'string' || temporal(c[0])) throw new Unsupported();
      return [test(c[0])];
    };
  }
}

/**
 * The pattern less a last atom that may repeat zero times (`x{0,n}`), which cannot change whether
 * an unanchored search finds a match: a match of the rest is a match of the whole with no
 * repetitions. R4's `[A-Z]([A-Za-z0-9_]){0,254}` (the name of 30 canonical resource types)
 * compiles in RE2 as 254 nested copies, 15 to 25 ms; without its tail, in well under one.
 */
export function withoutOptionalTail(pattern: string): string {
  const quantifier = /\{0(,\d*)?\}\??$/.exec(pattern);
  if (!quantifier) return pattern;
  const atomEnd = quantifier.index;
  // Where each atom starts, scanning forward (escapes, classes and groups are single atoms).
  const groups: number[] = [];
  let lastAtom = -1;
  for (let i = 0; i < atomEnd; i++) {
    const c = pattern[i];
    if (c === '\\') {
      // `\{0,2}` is a literal brace, not a quantifier.
      if (i + 1 === atomEnd) return pattern;
      lastAtom = i++;
    } else if (c === '[') {
      lastAtom = i;
      i++;
      if (pattern[i] === '^') i++;
      if (pattern[i] === ']') i++;
      while (i < atomEnd && pattern[i] !== ']') i += pattern[i] === '\\' ? 2 : 1;
      if (i >= atomEnd) return pattern;
    } else if (c === '(') {
      groups.push(i);
    } else if (c === ')') {
      const start = groups.pop();
      if (start === undefined) return pattern;
      lastAtom = start;
    } else if ('*+?{|'.includes(c)) {
      // A quantifier belongs to the atom before it; an alternative starts afresh.
      if (c === '{') {
        const close = pattern.indexOf('}', i);
        if (close < 0 || close >= atomEnd) return pattern;
        i = close;
      }
      if (c === '|') lastAtom = -1;
    } else {
      lastAtom = i;
    }
  }
  // The quantifier must follow an atom directly, at the top level.
  if (groups.length > 0 || lastAtom < 0 || '*+?}'.includes(pattern[atomEnd - 1]) && pattern[atomEnd - 2] !== '\\') return pattern;
  return pattern.slice(0, lastAtom);
}

/** A side of `&`: one string, or nothing (the empty string). */
function text(c: Collection): string {
  if (c.length === 0) return '';
  if (c.length > 1 || typeof c[0] !== 'string') throw new Unsupported();
  return c[0];
}

/** An operator on two single values: empty when either side is, left to the engine when either has several. */
function binary(left: Expr, right: Expr, apply: (x: unknown, y: unknown) => unknown): Expr {
  return (focus, env) => {
    const a = left(focus, env);
    const b = right(focus, env);
    if (a.length === 0 || b.length === 0) return [];
    if (a.length !== 1 || b.length !== 1) throw new Unsupported();
    return [apply(a[0], b[0])];
  };
}

/** Concrete resource types are tested by name; the abstract ones take the engine's type model. */
const ABSTRACT_TYPES = new Set(['Resource', 'DomainResource', 'MetadataResource', 'CanonicalResource']);

function isResource(item: unknown): item is { resourceType: string } {
  return typeof item === 'object' && item !== null && !Array.isArray(item) && typeof (item as { resourceType?: unknown }).resourceType === 'string';
}

/** `name` on each item: arrays flattened, `_name` counted where `name` has no value, choice names found. */
function child(input: Expr, name: string): Expr {
  return (focus, env) => {
    const out: unknown[] = [];
    for (const item of input(focus, env)) {
      if (typeof item !== 'object' || item === null || Array.isArray(item)) continue;
      const obj = item as Record<string, unknown>;
      if (obj.resourceType !== undefined && name === obj.resourceType) throw new Unsupported();
      let found = false;
      found = collect(obj, name, out) || found;
      if (!found && isChoiceName(name)) {
        // A choice element (`value`) is written with its type (`valueQuantity`).
        for (const key in obj) {
          if (key.length > name.length && key.startsWith(name) && /[A-Z]/.test(key[name.length])) collect(obj, key, out);
        }
      }
    }
    return out;
  };
}

let choiceNames: Set<string> | undefined;

/**
 * Whether some R4 element of this name is a choice (`value`, `onset`): only then may a longer key
 * (`valueQuantity`) stand for it; `responseCode` is not a `response`. From the FHIRPath engine's
 * model, read once (the engine loads it too).
 */
function isChoiceName(name: string): boolean {
  if (!choiceNames) {
    const model = fhirpathModel();
    choiceNames = new Set(Object.keys(model.choiceTypePaths).map((path) => path.slice(path.lastIndexOf('.') + 1)));
  }
  return choiceNames.has(name);
}

function collect(obj: Record<string, unknown>, key: string, out: unknown[]): boolean {
  const value = obj[key];
  const ext = obj[`_${key}`];
  if (value === undefined && ext === undefined) return false;
  const values = value === undefined ? [] : Array.isArray(value) ? value : [value];
  const exts = ext === undefined ? [] : Array.isArray(ext) ? ext : [ext];
  const n = Math.max(values.length, exts.length);
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (v !== undefined && v !== null) out.push(v);
    else if (exts[i] !== undefined && exts[i] !== null) out.push(NO_VALUE);
  }
  return true;
}

/**
 * A string that may be a date, dateTime or time: the engine compares those as temporal values
 * (with precision), which only it knows the types to do; they are left to it.
 */
function temporal(value: unknown): boolean {
  return typeof value === 'string' && /^(\d{4}(-\d\d)?(-\d\d)?(T|$)|\d\d:\d\d)/.test(value);
}

/** Dates (`2020`, `2020-01`, `2020-01-02`) or dateTimes to the second with a zone, alike in precision and zone. */
const DATE_OR_DATETIME = /^\d{4}(-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01])(T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(Z|[+-]\d\d:\d\d))?)?)?$/;

function sameDatePrecision(x: unknown, y: unknown): boolean {
  if (typeof x !== 'string' || typeof y !== 'string' || x.length !== y.length || !DATE_OR_DATETIME.test(x) || !DATE_OR_DATETIME.test(y)) return false;
  return x.length <= 10 || x.slice(19) === y.slice(19);
}

/** A collection as a boolean: empty is unknown, a single boolean is itself, any other single item is true. */
function bool(c: Collection): boolean | undefined {
  if (c.length === 0) return undefined;
  if (c.length > 1) throw new Unsupported();
  return typeof c[0] === 'boolean' ? c[0] : true;
}

function wrap(b: boolean | undefined): Collection {
  return b === undefined ? [] : [b];
}

function and(a: boolean | undefined, right: () => boolean | undefined): Collection {
  if (a === false) return [false];
  const b = right();
  if (b === false) return [false];
  return a === true && b === true ? [true] : [];
}

function or(a: boolean | undefined, right: () => boolean | undefined): Collection {
  if (a === true) return [true];
  const b = right();
  if (b === true) return [true];
  return a === false && b === false ? [false] : [];
}

function xor(a: boolean | undefined, b: boolean | undefined): Collection {
  return a === undefined || b === undefined ? [] : [a !== b];
}

function implies(a: boolean | undefined, right: () => boolean | undefined): Collection {
  if (a === false) return [true];
  const b = right();
  if (a === true) return wrap(b);
  return b === true ? [true] : [];
}
