import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { validateCodePool } from '../../bench/validate-code-pool';
import { serverApp } from '../helpers/server-app';

/**
 * The answers to 10,000 distinct real `$validate-code` requests (the first of bench's pool), as
 * recorded on 2026-11-24 before any work on the uncached path: each must stay byte for byte what it
 * was (status and body), so a faster engine is not a different one. A change that is meant to
 * change answers (a judge finding) records them again: `RECORD_ANSWERS=1 npx vitest run
 * test/terminology/recorded-answers.test.ts`, and the diff of the fixture shows how many moved.
 */

const FIXTURE = new URL('../fixtures/validate-code-answers.txt', import.meta.url);
const SAMPLE = 10_000;

let server: ServerApp;
beforeAll(async () => {
  server = await serverApp();
});
afterAll(() => server.close());

test('10,000 distinct validate-code requests answer byte for byte as recorded', async () => {
  const paths = validateCodePool(SAMPLE);
  expect(paths).toHaveLength(SAMPLE);
  const answers: string[] = [];
  for (const url of paths) {
    const res = await server.app.inject({ method: 'GET', url });
    answers.push(`${res.statusCode} ${createHash('sha256').update(res.rawPayload).digest('hex').slice(0, 16)}`);
  }
  if (process.env.RECORD_ANSWERS === '1') {
    writeFileSync(FIXTURE, `${answers.join('\n')}\n`);
    return;
  }
  expect(existsSync(FIXTURE), 'no recorded answers: RECORD_ANSWERS=1 records them').toBe(true);
  const recorded = readFileSync(FIXTURE, 'utf8').trimEnd().split('\n');
  expect(recorded).toHaveLength(SAMPLE);
  const moved = paths.flatMap((url, i) =>
    answers[i] === recorded[i] ? [] : [`${url}: ${recorded[i]} -> ${answers[i]}`],
  );
  expect(moved.length, moved.slice(0, 5).join('\n')).toBe(0);
}, 120_000);
