import type { UcumLibrary } from './ucum-library';

/**
 * UCUM expressions read into their parts, for what the library does not say: the expression in
 * words ("(milligram) / (deciliter)"), and where an unknown unit starts ("at character 1").
 * Annotations (`{...}`) carry no meaning in UCUM; the library refuses some characters in them
 * (spaces) that UCUM users write, so expressions are parsed with their annotations emptied.
 */

/** The expression with every annotation emptied, as the library is asked to parse it. */
export function withoutAnnotationText(expression: string): string {
  return expression.replace(/\{[^{}]*\}/g, '{a}');
}

interface Token {
  kind: 'symbol' | 'number' | 'annotation' | 'operator' | 'open' | 'close';
  text: string;
  /** 1-based position in the expression. */
  at: number;
}

function tokens(expression: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < expression.length) {
    const c = expression[i];
    const at = i + 1;
    if (c === '.' || c === '/') {
      out.push({ kind: 'operator', text: c, at });
      i++;
    } else if (c === '(' || c === ')') {
      out.push({ kind: c === '(' ? 'open' : 'close', text: c, at });
      i++;
    } else if (c === '{') {
      const end = expression.indexOf('}', i);
      const stop = end < 0 ? expression.length : end + 1;
      out.push({ kind: 'annotation', text: expression.slice(i, stop), at });
      i = stop;
    } else {
      let j = i;
      while (j < expression.length && !'./(){'.includes(expression[j])) {
        if (expression[j] === '[') j = Math.max(j + 1, expression.indexOf(']', j) + 1 || expression.length);
        else j++;
      }
      const text = expression.slice(i, j);
      out.push({ kind: /^\d+$/.test(text) ? 'number' : 'symbol', text, at });
      i = j;
    }
  }
  return out;
}

/** A unit symbol with its exponent split off: `cm2` is `cm` squared. */
function splitExponent(symbol: string): { unit: string; exponent?: string } {
  const m = /^(.*?[^\d+-])([+-]?\d+)$/.exec(symbol);
  return m && !m[1].endsWith('*') && !m[1].endsWith('^') ? { unit: m[1], exponent: m[2] } : { unit: symbol };
}

/** Names UCUM's essence gives where the library's tables differ. */
const NAMES: Record<string, string> = { l: 'liter', L: 'liter', '%': 'percent' };

function nameOf(lib: UcumLibrary, unit: string): string | undefined {
  const direct = lib.unit(unit);
  if (direct) return NAMES[unit] ?? direct.name_;
  for (const length of [2, 1]) {
    const prefix = lib.prefix(unit.slice(0, length));
    const base = lib.unit(unit.slice(length));
    if (prefix && base?.isMetric_) return prefix.name_ + (NAMES[unit.slice(length)] ?? base.name_);
  }
  return undefined;
}

/** The expression in words: `mg/dL` is "(milligram) / (deciliter)"; an annotation counts as 1. */
export function describeExpression(lib: UcumLibrary, expression: string): string {
  let out = '';
  for (const t of tokens(expression)) {
    if (t.kind === 'operator') out += t.text === '/' ? ' / ' : ' * ';
    else if (t.kind === 'open' || t.kind === 'close') out += t.text;
    else if (t.kind === 'number') out += t.text;
    else if (t.kind === 'annotation') out += out === '' || out.endsWith(' ') || out.endsWith('(') ? '1' : ' * 1';
    else {
      const { unit, exponent } = splitExponent(t.text);
      out += `(${nameOf(lib, unit) ?? unit})${exponent ? ` ^ ${exponent}` : ''}`;
    }
  }
  return out;
}

/** The first unit symbol the library does not know, and where it starts. */
export function firstUnknownUnit(lib: UcumLibrary, expression: string): { unit: string; at: number } | undefined {
  for (const t of tokens(expression)) {
    if (t.kind !== 'symbol') continue;
    const { unit } = splitExponent(t.text);
    if (!nameOf(lib, unit) && !lib.parse(t.text).unit) return { unit: t.text, at: t.at };
  }
  return undefined;
}
