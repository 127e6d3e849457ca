import { describe, expect, test } from 'vitest';
import { AnswerCache } from '../../src/http/answer-cache';

const answer = (n: number, size: number) => `{"n":${n},"pad":"${'x'.repeat(size)}"}`;

describe('the answer cache', () => {
  test('keeps its keys and answers under the byte bound, however many fit in entries', () => {
    const cache = new AnswerCache({
      maxEntries: 10_000,
      maxAnswerBytes: 64 * 1024,
      maxTotalBytes: 1_000_000,
      admitOnRepeat: false,
    });
    for (let i = 0; i < 2_000; i++) {
      cache.set(`GET /fhir/R4/ValueSet/$expand?n=${i}`, 't', answer(i, 5_000));
      expect(cache.size.bytes).toBeLessThanOrEqual(1_000_000);
    }
    // Entries of about 5,050 characters: at most 198 fit in 1,000,000.
    expect(cache.size.entries).toBeGreaterThan(100);
    expect(cache.size.entries).toBeLessThanOrEqual(198);
    // The newest is there, the oldest went.
    expect(cache.get('GET /fhir/R4/ValueSet/$expand?n=1999', 't')).toBe(answer(1999, 5_000));
    expect(cache.get('GET /fhir/R4/ValueSet/$expand?n=0', 't')).toBeUndefined();
  });

  test('counts a large key (a POST body) as well as the answer', () => {
    const cache = new AnswerCache({
      maxEntries: 10_000,
      maxAnswerBytes: 64 * 1024,
      maxTotalBytes: 500_000,
      admitOnRepeat: false,
    });
    const body = 'b'.repeat(60_000);
    for (let i = 0; i < 100; i++) cache.set(`POST /x\u0001${i}${body}`, 't', '{}');
    expect(cache.size.bytes).toBeLessThanOrEqual(500_000);
    expect(cache.size.entries).toBeLessThanOrEqual(8);
  });

  test('answers used since the last eviction survive it, and a replaced answer is counted once', () => {
    const cache = new AnswerCache({
      maxEntries: 8,
      maxAnswerBytes: 1000,
      maxTotalBytes: 1_000_000,
      admitOnRepeat: false,
    });
    for (let i = 0; i < 8; i++) cache.set(`k${i}`, 't', `a${i}`);
    expect(cache.get('k0', 't')).toBe('a0');
    cache.set('k8', 't', 'a8');
    expect(cache.get('k0', 't')).toBe('a0');
    expect(cache.get('k1', 't')).toBeUndefined();
    const before = cache.size.bytes;
    cache.set('k8', 't', 'a8');
    expect(cache.size.bytes).toBe(before);
  });

  test('an answer made under another state token is gone, and its bytes with it', () => {
    const cache = new AnswerCache({ admitOnRepeat: false });
    cache.set('k', 'old', 'answer');
    expect(cache.get('k', 'new')).toBeUndefined();
    expect(cache.size).toEqual({ entries: 0, bytes: 0 });
  });

  test('an answer larger than the whole bound is not kept', () => {
    const cache = new AnswerCache({
      maxEntries: 10,
      maxAnswerBytes: 10_000,
      maxTotalBytes: 2_000,
      admitOnRepeat: false,
    });
    cache.set('k', 't', 'x'.repeat(5_000));
    expect(cache.size.entries).toBe(0);
  });

  test('an answer is kept the second time it is made, and answers made once do not push out kept ones', () => {
    const cache = new AnswerCache({ maxEntries: 4, maxAnswerBytes: 1000, maxTotalBytes: 1_000_000 });
    cache.set('k', 't', 'a');
    expect(cache.get('k', 't')).toBeUndefined();
    cache.set('k', 't', 'a');
    expect(cache.get('k', 't')).toBe('a');
    // A thousand requests that never repeat: none is kept, and the repeated one stays.
    for (let i = 0; i < 1_000; i++) cache.set(`once${i}`, 't', `b${i}`);
    expect(cache.size.entries).toBe(1);
    expect(cache.get('k', 't')).toBe('a');
    // Asked for after a change of content, a kept answer is made again and kept at once.
    expect(cache.get('k', 'u')).toBeUndefined();
    cache.set('k', 'u', 'c');
    expect(cache.get('k', 'u')).toBe('c');
  });
});
