import { readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { buildModel, MODEL_FILE } from '../../src/fhir/model/generate';

/**
 * The R4 element model is derived from the pinned StructureDefinitions and checked in
 * (definitions/model/r4-model.json), so that start-up does not parse 35 MB for it. This test
 * derives it again and insists on the same file: `npx tsx src/fhir/model/generate.ts` rewrites it.
 */

describe('the R4 element model', () => {
  test('is what src/fhir/model/generate.ts derives from the bundled definitions', () => {
    expect(`${JSON.stringify(buildModel())}\n` === readFileSync(MODEL_FILE, 'utf8')).toBe(true);
  }, 60_000);
});
