import { afterAll, describe, expect, test } from 'vitest';
import { BotRunner } from '../../src/bots/runner';
import type { RunLimits } from '../../src/bots/protocol';

/** The sandbox process: restarted when it dies, its executions failed rather than left hanging. */

const LIMITS: RunLimits = { memoryMb: 64, timeoutMs: 5000, outputBytes: 1024, logBytes: 1024 };
const bot = (body: string) => `exports.handler = async (medplum, event) => { ${body} };`;
const noClient = async () => ({ status: 500, message: 'no client in this test' });

describe('BotRunner', () => {
  const runner = new BotRunner();
  afterAll(() => runner.close());

  test('a sandbox that dies fails what it was running, and the next execution starts a new one', async () => {
    expect(await runner.run(bot('return event.n + 1;'), '{"n":1}', LIMITS, noClient)).toMatchObject({ ok: true, result: { kind: 'json', value: '2' } });
    const first = runner.pid as number;
    expect(first).toBeGreaterThan(0);
    const hanging = runner.run(bot('await new Promise(() => {});'), '{}', LIMITS, noClient);
    process.kill(first, 'SIGKILL');
    expect(await hanging).toMatchObject({ ok: false, error: expect.stringContaining('sandbox stopped') });
    expect(await runner.run(bot('return "again";'), '{}', LIMITS, noClient)).toMatchObject({ ok: true, result: { kind: 'text', value: 'again' } });
    expect(runner.pid).not.toBe(first);
  });

  test('answers bigger than the limit and logs beyond the limit are cut, not kept', async () => {
    const big = await runner.run(bot("return 'x'.repeat(5000);"), '{}', LIMITS, noClient);
    expect(big).toMatchObject({ ok: false, error: expect.stringContaining('larger than 1024 bytes') });
    const chatty = await runner.run(bot("for (let i = 0; i < 1000; i++) console.log('line', i); return 1;"), '{}', LIMITS, noClient);
    expect(chatty.ok).toBe(true);
    expect(chatty.log.length).toBeLessThan(1200);
    expect(chatty.log).toContain('log cut at 1024 bytes');
  });

  test('the client answers reach the bot; an error status throws in the bot', async () => {
    const outcome = await runner.run(
      bot("const a = await medplum.readResource('Patient', 'p1'); try { await medplum.readResource('Patient', 'gone'); } catch (e) { return [a.id, e.status, e.message]; }"),
      '{}',
      LIMITS,
      async (request) => (request.path === 'Patient/p1' ? { status: 200, body: { resourceType: 'Patient', id: 'p1' } } : { status: 404, message: 'not found' }),
    );
    expect(outcome).toMatchObject({ ok: true, result: { kind: 'json', value: '["p1",404,"not found"]' } });
  });
});
