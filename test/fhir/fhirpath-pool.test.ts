import { afterEach, describe, expect, test } from 'vitest';
import { FhirPathPool } from '../../src/fhir/fhirpath/pool';
import { until } from '../helpers/process';

/**
 * The pool that evaluates FHIRPath users wrote: answers in order, a syntax error is `invalid`, an
 * expression out of memory is stopped like one out of time (the process lives on), and close()
 * ends the work in flight and every worker.
 */

describe('FhirPathPool', () => {
  let pool: FhirPathPool | undefined;
  afterEach(async () => {
    await pool?.close();
  });

  const patient = {
    resourceType: 'Patient',
    gender: 'female',
    name: Array.from({ length: 2000 }, (_, i) => ({ family: `F${i}`, given: [`G${i}`] })),
  };

  test('answers each job of a batch in order; a syntax error is invalid', async () => {
    pool = new FhirPathPool({ workers: 1, timeoutMs: 60_000, memoryMb: 128 });
    const answers = await pool.evaluate([
      { expression: "gender = 'female'", focus: patient },
      { expression: 'name.(', focus: patient },
      { expression: "gender = 'male'", focus: patient },
      { expression: 'name.count()', focus: patient, values: true },
    ]);
    expect(answers[0]).toEqual({ ok: true, summary: { length: 1, first: true, hasFalse: false } });
    expect(answers[1]).toMatchObject({ ok: false, error: 'invalid' });
    expect(answers[2]).toEqual({ ok: true, summary: { length: 1, first: false, hasFalse: true } });
    expect(answers[3]).toMatchObject({ ok: true, values: [2000] });
  });

  test('an expression that needs more than the heap is stopped, and the next batch gets a fresh worker', async () => {
    pool = new FhirPathPool({ workers: 1, timeoutMs: 600_000, memoryMb: 32 });
    const [answer] = await pool.evaluate([
      {
        expression: 'name.select(%current.name.given).select(%current.name).count()',
        focus: patient,
        vars: { current: patient },
      },
    ]);
    expect(answer).toMatchObject({ ok: false, error: 'budget', message: 'it ran out of memory (32 MB)' });
    expect(await pool.evaluate([{ expression: 'name.exists()', focus: patient }])).toMatchObject([
      { ok: true, summary: { first: true } },
    ]);
  });

  test('close() answers the batch in flight and stops every worker', async () => {
    pool = new FhirPathPool({ workers: 2, timeoutMs: 600_000, memoryMb: 512 });
    const running = pool.evaluate([
      { expression: 'name.select(%current.name.given).count()', focus: patient, vars: { current: patient } },
    ]);
    await until(() => pool?.stats.batches === 1, 'the batch is with a worker');
    await pool.close();
    expect(await running).toEqual([{ ok: false, error: 'unavailable', message: 'the server is stopping' }]);
    expect(pool.size).toBe(0);
  });
});
