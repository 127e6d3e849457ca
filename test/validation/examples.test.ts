import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { serverApp } from '../helpers/server-app';
import {
  clinicalExamples,
  errorsByFile,
  expectOnlyKnownErrors,
  KNOWN_INVALID,
  knownAmong,
  type ExampleFile,
} from './corpus';

/**
 * The specification's clinical examples through POST [type]/$validate, bindings checked: no error
 * but the known ones. Here the first example of each of the 125 resource types they cover (so every
 * type's definition is compiled and walked); all 719, and the package's SearchParameters,
 * CodeSystems and ValueSets, in test/hardening/validation-corpus.test.ts.
 */
describe('the R4 examples validate', () => {
  let server: { app: FastifyInstance; close: () => Promise<void> };
  beforeAll(async () => {
    server = await serverApp();
  });
  afterAll(async () => {
    await server?.close();
  });

  test('one example of every resource type has no error, except those known to be invalid', async () => {
    const byType = new Map<string, ExampleFile>();
    for (const e of clinicalExamples().filter((x) => x.size < 1_000_000)) {
      const type = e.file.split('-')[0];
      if (!byType.has(type)) byType.set(type, e);
    }
    const examples = [...byType.values()];
    expect(examples.length).toBeGreaterThan(120);
    expectOnlyKnownErrors(await errorsByFile(server.app, examples), knownAmong(examples, KNOWN_INVALID));
  });
});
