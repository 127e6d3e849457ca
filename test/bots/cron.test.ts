import type { AuditEvent, Bundle, Resource } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { FHIR_JSON, onBothBackends, type OpenServer } from '../helpers/server-app';

/**
 * Bots on a schedule (Bot.cronString, Bot.cronTiming), on both backends: a schedule that cannot
 * run is refused on write; a scheduled bot runs by itself, with itself as input, as its own
 * membership; a failed run does not stop the schedule; changing or deleting the Bot ends the old
 * schedule's chain of jobs. Every wait is for the jobs and AuditEvents it checks.
 */

const EVERY_SECOND = '* * * * * *';

function suite(name: string, open: () => Promise<OpenServer>) {
  describe(`bot schedules (${name})`, () => {
    let server: ServerApp;
    let cleanup: () => Promise<void>;
    const inject = (method: string, url: string, payload?: unknown, headers: Record<string, string> = {}) =>
      server.app.inject({
        method: method as 'GET',
        url: `/fhir/R4/${url}`,
        headers: { ...(payload !== undefined ? FHIR_JSON : {}), ...headers },
        payload: payload as object,
      });
    const cronJobs = (bot: string) =>
      server.core.repository.store.query<{ id: string; state: string; last_error: string | null }>(
        "SELECT id, state, last_error FROM jobs WHERE kind = 'bot-cron' AND id LIKE ?",
        [`bot-cron:%:${bot}:%`],
      );
    const audits = async (bot: string) =>
      ((await inject('GET', `AuditEvent?entity=Bot/${bot}&_count=1000`)).json() as Bundle).entry?.map(
        (e) => e.resource as AuditEvent,
      ) ?? [];
    /** Polls `check` until it holds (the test's own timeout is the bound). */
    const until = async (check: () => Promise<boolean>) => {
      while (!(await check())) await new Promise((resolve) => setTimeout(resolve, 25));
    };
    async function deploy(id: string, code: string, bot: object) {
      const put = await inject('PUT', `Bot/${id}`, { resourceType: 'Bot', id, name: id, ...bot });
      expect(put.statusCode, put.body).toBeLessThan(300);
      const res = await inject('POST', `Bot/${id}/$deploy`, {
        resourceType: 'Parameters',
        parameter: [
          { name: 'code', valueString: code },
          { name: 'filename', valueString: `${id}.js` },
        ],
      });
      expect(res.statusCode, res.body).toBe(200);
    }

    beforeAll(async () => {
      ({ server, cleanup } = await open());
    });
    afterAll(() => cleanup?.());

    test('a schedule that cannot be run is refused, and nothing is stored', async () => {
      for (const [bot, words] of [
        [{ cronString: 'every minute' }, "'every minute' has 2 fields"],
        [{ cronString: '61 * * * *' }, 'is not a cron expression'],
        [{ cronTiming: { repeat: { period: 1, periodUnit: 'fortnight' } } }, "'fortnight' is not a unit of time"],
        [{ cronTiming: { repeat: { timeOfDay: ['09:00:00', '17:30:00'] } } }, 'differ in their minutes'],
      ] as const) {
        const res = await inject('PUT', 'Bot/badly-timed', {
          resourceType: 'Bot',
          id: 'badly-timed',
          name: 'x',
          ...bot,
        });
        expect(res.statusCode, res.body).toBe(400);
        expect(res.json().resourceType).toBe('OperationOutcome');
        expect(res.json().issue[0].details.text).toContain(words);
      }
      expect((await inject('GET', 'Bot/badly-timed')).statusCode).toBe(404);
      expect(await cronJobs('badly-timed')).toEqual([]);
      // A Timing that is one clock schedule is taken.
      const ok = await inject('PUT', 'Bot/weekly', {
        resourceType: 'Bot',
        id: 'weekly',
        name: 'weekly',
        cronTiming: { repeat: { dayOfWeek: ['mon'], timeOfDay: ['09:00:00'] } },
      });
      expect(ok.statusCode, ok.body).toBe(201);
      const [queued] = await cronJobs('weekly');
      const at = Number(queued.id.split(':').at(-1));
      expect(new Date(at).getUTCDay()).toBe(1);
      expect(new Date(at).toISOString()).toMatch(/T09:00:00\.000Z$/);
      expect(at).toBeGreaterThan(Date.now());
    });

    test('a scheduled bot runs by itself, with the Bot as input, until its schedule is taken away', async () => {
      const code =
        "export async function handler(medplum, event) { console.log('tick for ' + event.input.resourceType + '/' + event.input.id); return true; }";
      await deploy('ticker', code, { cronString: EVERY_SECOND });
      await until(async () => (await audits('ticker')).filter((a) => a.outcome === '0').length >= 2);
      const runs = (await audits('ticker')).filter((a) => a.outcome === '0');
      expect(runs[0].outcomeDesc).toContain('tick for Bot/ticker');
      // As its own membership: the agent is the Bot (no user asked).
      expect(runs[0].agent[0].who?.reference).toBe('Bot/ticker');

      // The schedule taken away: the chain of jobs ends (the last one finds the Bot changed), and
      // with no job left nothing can run it again.
      const bot = (await inject('GET', 'Bot/ticker')).json() as Resource & { cronString?: string };
      delete bot.cronString;
      expect((await inject('PUT', 'Bot/ticker', bot)).statusCode).toBe(200);
      await until(async () => (await cronJobs('ticker')).every((j) => j.state === 'done' || j.state === 'dead'));
      expect(await cronJobs('ticker')).not.toContainEqual(expect.objectContaining({ state: 'queued' }));
    }, 60_000);

    test('a run that fails is recorded and the schedule goes on; a deleted Bot runs no more', async () => {
      await deploy('failing', "export async function handler() { throw new Error('nothing to do'); }", {
        cronString: EVERY_SECOND,
      });
      // Two failed runs: the first did not end the schedule.
      await until(
        async () =>
          (await cronJobs('failing')).filter((j) => j.state === 'dead' && j.last_error?.includes('nothing to do'))
            .length >= 2,
      );
      expect((await audits('failing')).some((a) => a.outcome === '4' && a.outcomeDesc?.includes('nothing to do'))).toBe(
        true,
      );
      expect((await inject('DELETE', 'Bot/failing')).statusCode).toBeLessThan(300);
      await until(async () => (await cronJobs('failing')).every((j) => j.state === 'done' || j.state === 'dead'));
    }, 60_000);
  });
}

onBothBackends(suite);
