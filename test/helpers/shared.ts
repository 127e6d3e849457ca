import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { test } from 'vitest';
import { PROJECT_ROOT } from './process';

/**
 * `../shared`, a folder beside the checkout (not part of it): HL7's terminology test suite and its
 * judge, the SQL on FHIR tests, 100 Synthea patients and a published eCQM. It is optional: a
 * test that needs a piece of it skips with the reason when the piece is absent, as the
 * PostgreSQL tests do without TEST_DATABASE_URL, so a fresh clone passes `npm test`.
 * REQUIRE_SHARED=1 turns an absence into a failure, for runs (CI) that must not silently skip.
 */
export const SHARED_DIR = resolve(PROJECT_ROOT, '..', 'shared');
export const REQUIRE_SHARED = process.env.REQUIRE_SHARED === '1';

export interface SharedMaterial {
  path: string;
  present: boolean;
  skipReason: string;
}

/** A piece of ../shared (`segments` below it), and why its tests skip when it is absent. */
export function sharedMaterial(what: string, ...segments: string[]): SharedMaterial {
  const path = resolve(SHARED_DIR, ...segments);
  const present = existsSync(path);
  if (!present && REQUIRE_SHARED) throw new Error(`REQUIRE_SHARED=1 but ${path} is missing`);
  return {
    path,
    present,
    skipReason: `${what} tests skipped: ${path} is missing (../shared beside the checkout is optional; see README)`,
  };
}

/** Stands in for the tests that need `material`: one skipped test named for the reason, said on the console too. */
export function skipWithout(material: SharedMaterial): void {
  console.warn(material.skipReason);
  test.skip(material.skipReason, () => undefined);
}
