import { RE2JS } from 're2js';

/**
 * A small evaluator for the FHIRPath that most invariants are written in: paths of element names,
 * `exists()`, `empty()`, `hasValue()`, `not()`, `count()`, `where()`/`all()`/`exists()` with a
 * criterion, `contains`/`startsWith`/`endsWith`/`matches` with a string literal,
 * `and`/`or`/`xor`/`implies`, and `=`/`!=` against literals. About two thirds of the invariants a validation meets are of this shape; run as
 * closures over the JSON they cost a tenth of a full FHIRPath evaluation. Any expression outside
 * this subset is not compiled here (the caller falls back to the FHIRPath engine), so the subset's
 * answers must be, and are, those of FHIRPath: empty collections propagate through the logic
 * operators with the specification's three-valued tables. `matches` runs on RE2 (linear time), so
 * a profile's regular expression cannot stall validation; one RE2 cannot read goes to the engine.
 */

/** A collection: the values found (JSON values; a primitive with only `_x` is present with no value). */
type Collection = unknown[];
type Expr = (focus: Collection) => Collection;

/** Stands for a primitive that has extensions but no value (`_birthDate` without `birthDate`). */
const NO_VALUE = Symbol('no value');

/** true or false; undefined for an empty answer (which passes); 'engine' when only the full engine can say. */
export type SimpleInvariant = (focus: unknown) => boolean | undefined | 'engine';

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
        compiled = (focus) => {
          let result: Collection;
          try {
            result = expr([focus]);
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
    if (c === '=') {
      tokens.push({ kind: 'op', text: '=' });
      i++;
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
      left = (focus) => implies(bool(l(focus)), () => bool(r(focus)));
    }
    return left;
  }

  private orExpr(): Expr {
    let left = this.andExpr();
    while (this.isWord('or') || this.isWord('xor')) {
      const op = this.take().text;
      const l = left;
      const r = this.andExpr();
      left = op === 'or' ? (focus) => or(bool(l(focus)), () => bool(r(focus))) : (focus) => xor(bool(l(focus)), bool(r(focus)));
    }
    return left;
  }

  private andExpr(): Expr {
    let left = this.equality();
    while (this.isWord('and')) {
      this.take();
      const l = left;
      const r = this.equality();
      left = (focus) => and(bool(l(focus)), () => bool(r(focus)));
    }
    return left;
  }

  private equality(): Expr {
    const left = this.path();
    const t = this.peek();
    if (t?.kind !== 'op') return left;
    this.take();
    const right = this.path();
    const negate = t.text === '!=';
    return (focus) => {
      const a = left(focus);
      const b = right(focus);
      if (a.length === 0 || b.length === 0) return [];
      if (a.length !== 1 || b.length !== 1) throw new Unsupported();
      const x = a[0];
      const y = b[0];
      if (typeof x === 'object' || typeof y === 'object' || typeof x !== typeof y || temporal(x) || temporal(y)) throw new Unsupported();
      return [(x === y) !== negate];
    };
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
      // A leading type name (`Patient.name`) is a type test in FHIRPath: left to the engine.
      if (KEYWORDS.has(t.text) || /^[A-Z]/.test(t.text)) throw new Unsupported();
      if (this.peek()?.text === '(') return this.call((focus) => focus, t.text);
      return child((focus) => focus, t.text);
    }
    throw new Unsupported();
  }

  private call(input: Expr, name: string): Expr {
    this.take('(');
    if (this.peek()?.text !== ')') return this.callWithArgument(input, name);
    this.take(')');
    switch (name) {
      case 'exists':
        return (focus) => [input(focus).length > 0];
      case 'empty':
        return (focus) => [input(focus).length === 0];
      case 'count':
        return (focus) => [input(focus).length];
      case 'not':
        return (focus) => {
          const b = bool(input(focus));
          return b === undefined ? [] : [!b];
        };
      case 'hasValue':
        return (focus) => {
          const c = input(focus);
          return [c.length === 1 && c[0] !== NO_VALUE && (typeof c[0] !== 'object' || c[0] === null)];
        };
      default:
        throw new Unsupported();
    }
  }

  private callWithArgument(input: Expr, name: string): Expr {
    if (name === 'where' || name === 'all' || name === 'exists') {
      const criterion = this.expression();
      this.take(')');
      const holds = (item: unknown) => bool(criterion([item])) === true;
      if (name === 'where') return (focus) => input(focus).filter(holds);
      if (name === 'exists') return (focus) => [input(focus).some(holds)];
      return (focus) => [input(focus).every(holds)];
    }
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
          re = RE2JS.compile(text, RE2JS.DOTALL);
        } catch {
          throw new Unsupported();
        }
        test = (s) => re.matcher(s).find();
        break;
      }
      default:
        throw new Unsupported();
    }
    return (focus) => {
      const c = input(focus);
      if (c.length === 0) return [];
      if (c.length > 1 || typeof c[0] !== 'string' || temporal(c[0])) throw new Unsupported();
      return [test(c[0])];
    };
  }
}

/** `name` on each item: arrays flattened, `_name` counted where `name` has no value, choice names found. */
function child(input: Expr, name: string): Expr {
  return (focus) => {
    const out: unknown[] = [];
    for (const item of input(focus)) {
      if (typeof item !== 'object' || item === null || Array.isArray(item)) continue;
      const obj = item as Record<string, unknown>;
      if (obj.resourceType !== undefined && name === obj.resourceType) throw new Unsupported();
      let found = false;
      found = collect(obj, name, out) || found;
      if (!found) {
        // A choice element (`value`) is written with its type (`valueQuantity`).
        for (const key in obj) {
          if (key.length > name.length && key.startsWith(name) && /[A-Z]/.test(key[name.length])) collect(obj, key, out);
        }
      }
    }
    return out;
  };
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
