import { describe, expect, test } from 'vitest';
import type { Timing } from 'fhir/r4';
import { nextRun, scheduleOf } from '../../src/bots/schedule';
import type { BotResource } from '../../src/fhir/admin-types';

/** Bot.cron[x] read as a schedule: the times it gives, and the forms it refuses. */

const bot = (cron: { cronString?: string; cronTiming?: Timing }): BotResource => ({ resourceType: 'Bot', ...cron });
const FROM = Date.parse('2026-11-24T10:17:30.250Z');
/** The next `n` times after FROM, as ISO strings. */
function times(cron: { cronString?: string; cronTiming?: Timing }, n = 3): string[] {
  const schedule = scheduleOf(bot(cron));
  if (!schedule) return [];
  const out: string[] = [];
  let at = FROM;
  for (let i = 0; i < n; i++) {
    at = nextRun(schedule, at) as number;
    out.push(new Date(at).toISOString());
  }
  return out;
}

describe('bot schedules', () => {
  test('a Bot without cron[x] has none', () => {
    expect(scheduleOf(bot({}))).toBeUndefined();
  });

  test('cronString: five fields in UTC, or six with seconds first', () => {
    expect(times({ cronString: '*/15 * * * *' })).toEqual([
      '2026-11-24T10:30:00.000Z',
      '2026-11-24T10:45:00.000Z',
      '2026-11-24T11:00:00.000Z',
    ]);
    expect(times({ cronString: '0 9 * * mon' }, 2)).toEqual(['2026-11-30T09:00:00.000Z', '2026-12-07T09:00:00.000Z']);
    expect(times({ cronString: '*/10 * * * * *' }, 2)).toEqual([
      '2026-11-24T10:17:40.000Z',
      '2026-11-24T10:17:50.000Z',
    ]);
  });

  test('cronTiming: times of day on days of the week, and periods', () => {
    expect(
      times({ cronTiming: { repeat: { dayOfWeek: ['tue', 'thu'], timeOfDay: ['08:30:00', '16:30:00'] } } }),
    ).toEqual(['2026-11-24T16:30:00.000Z', '2026-11-26T08:30:00.000Z', '2026-11-26T16:30:00.000Z']);
    expect(times({ cronTiming: { repeat: { timeOfDay: ['07:00:00'] } } }, 2)).toEqual([
      '2026-11-25T07:00:00.000Z',
      '2026-11-26T07:00:00.000Z',
    ]);
    expect(times({ cronTiming: { repeat: { period: 5, periodUnit: 'min' } } }, 2)).toEqual([
      '2026-11-24T10:20:00.000Z',
      '2026-11-24T10:25:00.000Z',
    ]);
    expect(times({ cronTiming: { repeat: { period: 1, periodUnit: 'h' } } }, 2)).toEqual([
      '2026-11-24T11:00:00.000Z',
      '2026-11-24T12:00:00.000Z',
    ]);
    expect(times({ cronTiming: { repeat: { frequency: 4, period: 1, periodUnit: 'd' } } }, 2)).toEqual([
      '2026-11-24T12:00:00.000Z',
      '2026-11-24T18:00:00.000Z',
    ]);
    expect(times({ cronTiming: { repeat: { period: 30, periodUnit: 's' } } }, 2)).toEqual([
      '2026-11-24T10:18:00.000Z',
      '2026-11-24T10:18:30.000Z',
    ]);
    expect(times({ cronTiming: { repeat: { period: 1, periodUnit: 'wk', dayOfWeek: ['fri'] } } }, 1)).toEqual([
      '2026-11-27T00:00:00.000Z',
    ]);
    expect(times({ cronTiming: { repeat: { period: 1, periodUnit: 'mo' } } }, 1)).toEqual(['2026-12-01T00:00:00.000Z']);
  });

  test('forms that are not one schedule are refused with the element and the reason', () => {
    const refused = (cron: { cronString?: string; cronTiming?: Timing }) => {
      try {
        scheduleOf(bot(cron));
      } catch (err) {
        return (err as Error).message;
      }
      return 'taken';
    };
    expect(refused({ cronString: '* * *' })).toContain('Bot.cronString');
    expect(refused({ cronString: '0 0 30 2 *' })).toContain('never runs');
    expect(refused({ cronTiming: {} })).toContain('it has no repeat');
    expect(refused({ cronTiming: { repeat: { frequency: 7, period: 1, periodUnit: 'd' } } })).toContain(
      'not a whole interval',
    );
    expect(refused({ cronTiming: { repeat: { period: 3, periodUnit: 'd', dayOfWeek: ['mon'] } } })).toContain(
      'dayOfWeek together',
    );
    expect(refused({ cronTiming: { repeat: { period: 2, periodUnit: 'd', timeOfDay: ['09:00:00'] } } })).toContain(
      'times of day repeat every day',
    );
    expect(refused({ cronTiming: { repeat: { dayOfWeek: ['someday' as 'mon'], timeOfDay: ['09:00:00'] } } })).toContain(
      'names no day',
    );
  });
});
