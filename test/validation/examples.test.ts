import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { serverApp } from '../helpers/server-app';
import { clinicalExamples, errorsByFile, expectOnlyKnownErrors, KNOWN_INVALID, knownAmong } from './corpus';

/**
 * The specification's 708 clinical examples under 1 MB, through POST [type]/$validate with
 * bindings checked: no error but the known ones. (The 11 larger ones, and the package's
 * SearchParameters, CodeSystems and ValueSets, are in test/hardening/validation-corpus.test.ts.)
 */
describe('the R4 examples validate', () => {
  let server: { app: FastifyInstance; close: () => Promise<void> };
  beforeAll(async () => {
    server = await serverApp();
  });
  afterAll(async () => {
    await server?.close();
  });

  test('the 708 clinical examples under 1 MB have no error, except those known to be invalid', async () => {
    const examples = clinicalExamples().filter((e) => e.size < 1_000_000);
    expect(examples).toHaveLength(708);
    expectOnlyKnownErrors(await errorsByFile(server.app, examples), knownAmong(examples, KNOWN_INVALID));
  });
});
