import { afterAll, describe, expect, test } from 'vitest';
import { BotRunner, type ClientHandler } from '../../src/bots/runner';
import type { ClientRequest, RunLimits } from '../../src/bots/protocol';

/** The sandbox process: restarted when it dies, its executions failed rather than left hanging. */

const LIMITS: RunLimits = { memoryMb: 64, timeoutMs: 5000, outputBytes: 1024, logBytes: 1024, bodyBytes: 1024 * 1024 };
const bot = (body: string) => `exports.handler = async (medplum, event) => { ${body} };`;
const noClient = async () => ({ status: 500, message: 'no client in this test' });

describe('BotRunner', () => {
  const runner = new BotRunner();
  const run = (code: string, event: string, client: ClientHandler = noClient) =>
    runner.run({ code, event, limits: LIMITS, client, project: 'p' });
  afterAll(() => runner.close());

  test('a sandbox that dies fails what it was running, and the next execution starts a new one', async () => {
    expect(await run(bot('return event.n + 1;'), '{"n":1}')).toMatchObject({
      ok: true,
      result: { kind: 'json', value: '2' },
    });
    const first = runner.pid as number;
    expect(first).toBeGreaterThan(0);
    const hanging = run(bot('await new Promise(() => {});'), '{}');
    process.kill(first, 'SIGKILL');
    expect(await hanging).toMatchObject({ ok: false, error: expect.stringContaining('sandbox stopped') });
    expect(await run(bot('return "again";'), '{}')).toMatchObject({
      ok: true,
      result: { kind: 'text', value: 'again' },
    });
    expect(runner.pid).not.toBe(first);
  });

  test('answers bigger than the limit and logs beyond the limit are cut, not kept', async () => {
    const big = await run(bot("return 'x'.repeat(5000);"), '{}');
    expect(big).toMatchObject({ ok: false, error: expect.stringContaining('larger than 1024 bytes') });
    const chatty = await run(bot("for (let i = 0; i < 1000; i++) console.log('line', i); return 1;"), '{}');
    expect(chatty.ok).toBe(true);
    expect(chatty.log.length).toBeLessThan(1200);
    expect(chatty.log).toContain('log cut at 1024 bytes');
  });

  test('the client answers reach the bot; an error status throws in the bot', async () => {
    const outcome = await run(
      bot(
        "const a = await medplum.readResource('Patient', 'p1'); try { await medplum.readResource('Patient', 'gone'); } catch (e) { return [a.id, e.status, e.message]; }",
      ),
      '{}',
      async (request: ClientRequest) =>
        request.path === 'Patient/p1'
          ? { status: 200, body: { resourceType: 'Patient', id: 'p1' } }
          : { status: 404, message: 'not found' },
    );
    expect(outcome).toMatchObject({ ok: true, result: { kind: 'json', value: '["p1",404,"not found"]' } });
  });
});
