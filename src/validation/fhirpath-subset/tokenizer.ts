import { Unsupported } from './unsupported';

/**
 * The subset's tokens: names (with `` `quoted` `` names, `%resource`, `%rootResource` and
 * `$this`), string literals without escapes, integers, operators and punctuation. Anything else
 * (decimals, escapes, other variables, unknown characters) is outside the subset.
 */

export type Token = { kind: 'name' | 'string' | 'number' | 'op' | 'punct'; text: string };

/** A token read at a position, and the position after it. */
interface Read {
  token: Token;
  end: number;
}

export function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    if (/\s/.test(text[i])) {
      i++;
      continue;
    }
    const read = readName(text, i) ?? readLiteral(text, i) ?? readOperator(text, i) ?? readVariable(text, i);
    if (!read) throw new Unsupported();
    tokens.push(read.token);
    i = read.end;
  }
  return tokens;
}

/** A name, or a `` `quoted` `` one. */
function readName(text: string, i: number): Read | undefined {
  const c = text[i];
  if (/[A-Za-z_]/.test(c)) {
    let j = i + 1;
    while (j < text.length && /[A-Za-z0-9_]/.test(text[j])) j++;
    return { token: { kind: 'name', text: text.slice(i, j) }, end: j };
  }
  if (c === '`') {
    const j = text.indexOf('`', i + 1);
    if (j < 0) throw new Unsupported();
    return { token: { kind: 'name', text: text.slice(i + 1, j) }, end: j + 1 };
  }
  return undefined;
}

/** A string literal (without escapes) or an integer. */
function readLiteral(text: string, i: number): Read | undefined {
  const c = text[i];
  if (c === "'") {
    let j = i + 1;
    let value = '';
    while (j < text.length && text[j] !== "'") {
      if (text[j] === '\\') throw new Unsupported();
      value += text[j++];
    }
    if (j >= text.length) throw new Unsupported();
    return { token: { kind: 'string', text: value }, end: j + 1 };
  }
  if (/[0-9]/.test(c)) {
    let j = i + 1;
    while (j < text.length && /[0-9]/.test(text[j])) j++;
    if (text[j] === '.') throw new Unsupported();
    return { token: { kind: 'number', text: text.slice(i, j) }, end: j };
  }
  return undefined;
}

function readOperator(text: string, i: number): Read | undefined {
  const c = text[i];
  if (c === '!' && text[i + 1] === '=') return { token: { kind: 'op', text: '!=' }, end: i + 2 };
  if (c === '=' || c === '|' || c === '+' || c === '&') return { token: { kind: 'op', text: c }, end: i + 1 };
  if (c === '<' || c === '>') {
    const orEqual = text[i + 1] === '=';
    return { token: { kind: 'op', text: orEqual ? `${c}=` : c }, end: i + (orEqual ? 2 : 1) };
  }
  if (c === '(' || c === ')' || c === '.') return { token: { kind: 'punct', text: c }, end: i + 1 };
  return undefined;
}

/** `%resource`, `%rootResource` and `$this`, read as names. */
function readVariable(text: string, i: number): Read | undefined {
  const c = text[i];
  if (c === '%' && /^%(resource|rootResource)(?![A-Za-z0-9_])/.test(text.slice(i))) {
    const name = text.startsWith('%resource', i) ? '%resource' : '%rootResource';
    return { token: { kind: 'name', text: name }, end: i + name.length };
  }
  if (c === '$' && text.startsWith('$this', i) && !/[A-Za-z0-9_]/.test(text[i + 5] ?? '')) {
    return { token: { kind: 'name', text: '$this' }, end: i + 5 };
  }
  return undefined;
}
