import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { serverApp } from '../helpers/server-app';
import {
  clinicalExamples,
  errorsByFile,
  expectOnlyKnownErrors,
  KNOWN_INVALID,
  KNOWN_INVALID_DEFINITIONS,
  knownAmong,
  terminologyAndSearchDefinitions,
} from '../validation/corpus';

/**
 * The whole examples package, too slow for the fast suite: the 708 clinical examples under 1 MB,
 * the 11 of 1 MB and more (up to the 35 MB bundle of every resource definition), and the 3,778
 * SearchParameters, CodeSystems and ValueSets. No error but the known ones, each with its reason.
 */
describe('the large R4 examples and the package definitions validate', () => {
  let server: { app: FastifyInstance; close: () => Promise<void> };
  beforeAll(async () => {
    server = await serverApp({ bodyLimit: 64 * 1024 * 1024, operationTimeoutMs: 600_000 });
  });
  afterAll(async () => {
    await server?.close();
  });

  test('the 708 clinical examples under 1 MB', { timeout: 600_000 }, async () => {
    const examples = clinicalExamples().filter((e) => e.size < 1_000_000);
    expect(examples).toHaveLength(708);
    expectOnlyKnownErrors(await errorsByFile(server.app, examples), knownAmong(examples, KNOWN_INVALID));
  });

  test('the 11 clinical examples of 1 MB or more', { timeout: 600_000 }, async () => {
    const examples = clinicalExamples().filter((e) => e.size >= 1_000_000);
    expect(examples).toHaveLength(11);
    expectOnlyKnownErrors(await errorsByFile(server.app, examples), knownAmong(examples, KNOWN_INVALID));
  });

  test('the SearchParameters, CodeSystems and ValueSets', { timeout: 600_000 }, async () => {
    const definitions = terminologyAndSearchDefinitions();
    expect(definitions).toHaveLength(1400 + 1062 + 1316);
    expectOnlyKnownErrors(await errorsByFile(server.app, definitions), KNOWN_INVALID_DEFINITIONS);
  });
});
