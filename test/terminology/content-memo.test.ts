import { describe, expect, test } from 'vitest';
import { ContentMemo } from '../../src/terminology/content-memo';

/** The memo of expansions is bounded by what its entries hold, not only by their number. */
describe('ContentMemo', () => {
  test('the oldest entries go once the total weight passes the budget; a value over the whole budget is not kept', () => {
    const memo = new ContentMemo(64, 100);
    const vs = {};
    memo.set(vs, 'a', 'A', 40);
    memo.set(vs, 'b', 'B', 40);
    expect(memo.heldWeight).toBe(80);
    memo.set(vs, 'c', 'C', 40);
    expect(memo.get(vs, 'a')).toBeUndefined();
    expect([memo.get(vs, 'b'), memo.get(vs, 'c')]).toEqual(['B', 'C']);
    expect(memo.heldWeight).toBe(80);
    memo.set(vs, 'huge', 'H', 101);
    expect(memo.get(vs, 'huge')).toBeUndefined();
    expect(memo.heldWeight).toBe(80);
  });

  test('setting a key again replaces its weight and makes it the newest; the entry count still bounds', () => {
    const memo = new ContentMemo(2, 1000);
    const vs = {};
    memo.set(vs, 'a', 1, 10);
    memo.set(vs, 'b', 2, 10);
    memo.set(vs, 'a', 3, 30);
    expect(memo.heldWeight).toBe(40);
    memo.set(vs, 'c', 4, 1);
    // 'b' was the oldest once 'a' was set again.
    expect([memo.get(vs, 'a'), memo.get(vs, 'b'), memo.get(vs, 'c')]).toEqual([3, undefined, 4]);
    expect(memo.heldWeight).toBe(31);
  });
});
