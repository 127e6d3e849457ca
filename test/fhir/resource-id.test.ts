import { expect, test } from 'vitest';
import { newResourceId } from '../../src/fhir/resource-id';

test('server-assigned ids are UUIDv7s, unique, and sort in the order they were made (also many in one millisecond)', () => {
  const ids = Array.from({ length: 20_000 }, () => newResourceId());
  for (const id of ids.slice(0, 100))
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  expect(new Set(ids).size).toBe(ids.length);
  expect([...ids].sort()).toEqual(ids);
  // The leading 48 bits are the time in milliseconds.
  const ms = Number.parseInt(ids[0].replace(/-/g, '').slice(0, 12), 16);
  expect(Math.abs(ms - Date.now())).toBeLessThan(60_000);
  // A clock that steps back does not break the order.
  const later = newResourceId(Date.now() - 10_000);
  expect(later > ids[ids.length - 1]).toBe(true);
});
