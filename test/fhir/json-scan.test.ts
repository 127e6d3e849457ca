import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { containsNulEscape, DepthScanner } from '../../src/fhir/json-scan';
import { seedFuzzing } from '../helpers/fuzz-seed';

seedFuzzing();

/** Nesting depth of a parsed value, the plain recursive way (root container = 1). */
function depthOf(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  return 1 + Math.max(0, ...children.map(depthOf));
}

function scan(text: string, limit: number, cuts: number[]): boolean {
  const bytes = Buffer.from(text, 'utf8');
  const scanner = new DepthScanner(limit);
  let from = 0;
  for (const cut of [...cuts.filter((c) => c > 0 && c < bytes.length).sort((a, b) => a - b), bytes.length]) {
    if (!scanner.feed(bytes.subarray(from, cut))) return false;
    from = cut;
  }
  return true;
}

describe('the depth scan of a JSON body', () => {
  test('agrees with the parsed depth however the bytes are cut into chunks', () => {
    const tricky = fc.constantFrom('[', ']', '{', '}', '"', '\\', '\\"', '\\\\', 'é', '€', '"[[["');
    const value = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small' },
        fc.string({ unit: fc.oneof(fc.string({ maxLength: 1 }), tricky) }),
        fc.array(tie('node'), { maxLength: 3 }),
        fc.dictionary(fc.string({ unit: fc.oneof(fc.string({ maxLength: 1 }), tricky), maxLength: 4 }), tie('node'), {
          maxKeys: 3,
        }),
      ),
    })).node;
    fc.assert(
      fc.property(
        value,
        fc.integer({ min: 1, max: 6 }),
        fc.array(fc.nat({ max: 200 }), { maxLength: 4 }),
        (v, limit, cuts) => {
          const text = JSON.stringify(v);
          expect(scan(text, limit, cuts), text).toBe(depthOf(v) <= limit);
        },
      ),
      { numRuns: 2000 },
    );
  });

  test('refuses 10 MB of [ after its first chunk', () => {
    const scanner = new DepthScanner(64);
    expect(scanner.feed(Buffer.from('['.repeat(64 * 1024)))).toBe(false);
  });

  test('a backslash run split across chunks still decides whether the quote ends the string', () => {
    // "a\\" then ,[[ : the string ends at the quote after two backslashes.
    expect(scan('["a\\\\",[[1]]]', 3, [4, 5])).toBe(true);
    expect(scan('["a\\\\",[[1]]]', 2, [4, 5])).toBe(false);
    // "a\"[[[" : an escaped quote, the brackets are inside the string.
    expect(scan('["a\\"[[[[",1]', 1, [3, 4])).toBe(true);
  });
});

describe('the NUL check', () => {
  test.each([
    ['{"a":"x\\u0000"}', true],
    ['{"a":"x\\\\u0000"}', false],
    ['{"a":"x\\\\\\u0000"}', true],
    ['{"a":"u0000"}', false],
  ])('%s: %s', (text, nul) => {
    expect(containsNulEscape(text)).toBe(nul);
  });
});
