import { RE2JS } from 're2js';
import {
  ABSTRACT_TYPES,
  and,
  binary,
  bool,
  child,
  implies,
  isResource,
  NO_VALUE,
  or,
  sameDatePrecision,
  temporal,
  text,
  xor,
  type Expr,
  type SimpleEnv,
} from './evaluator';
import type { Token } from './tokenizer';
import { Unsupported } from './unsupported';

/**
 * The subset's parser: reads the tokens by precedence (implies < or/xor < and < in < equality <
 * comparison < additive < path) and composes, as it goes, the closures that evaluate the
 * expression (evaluator.ts). A construct outside the subset throws `Unsupported`.
 */

const KEYWORDS = new Set(['and', 'or', 'xor', 'implies', 'true', 'false']);

export class Parser {
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
      left =
        op === 'or'
          ? (focus, env) => or(bool(l(focus, env)), () => bool(r(focus, env)))
          : (focus, env) => xor(bool(l(focus, env)), bool(r(focus, env)));
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
      if (typeof x === 'object' || typeof y === 'object' || typeof x !== typeof y || temporal(x) || temporal(y))
        throw new Unsupported();
      return (x === y) !== negate;
    });
  }

  /** `resource.is(Composition)`: a resource's own type against a concrete resource type. */
  private isType(input: Expr): Expr {
    const type = this.take();
    if (type.kind !== 'name' || !/^[A-Z][A-Za-z]*$/.test(type.text) || ABSTRACT_TYPES.has(type.text))
      throw new Unsupported();
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
      if (t.text === '%rootResource')
        return (_focus, env) => (env.rootResource === undefined ? [] : [env.rootResource]);
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
  if (groups.length > 0 || lastAtom < 0 || ('*+?}'.includes(pattern[atomEnd - 1]) && pattern[atomEnd - 2] !== '\\'))
    return pattern;
  return pattern.slice(0, lastAtom);
}
