import { Cron } from 'croner';
import type { Resource, Timing } from 'fhir/r4';
import type { BotResource } from '../fhir/admin-types';
import { fhirError } from '../fhir/errors';

/**
 * A Bot's schedule (`Bot.cron[x]`, Medplum's element): `cronString`, a cron expression of five
 * fields (minute hour day-of-month month day-of-week) or six (seconds first), read in UTC; or
 * `cronTiming`, a FHIR Timing of the forms that say one clock schedule (times of day on days of
 * the week, or every N seconds, minutes, hours, days, weeks, months or years). A schedule that
 * cannot be run is refused when the Bot is written, so a stored Bot's schedule always runs.
 */

export type BotSchedule = { pattern: string; cron: Cron };

/** Before a resource is stored: a Bot's schedule must be one it can be run by (ERR_BOT_SCHEDULE, 400). */
export function checkBotSchedule(resource: Resource): void {
  if (resource.resourceType === 'Bot') scheduleOf(resource as BotResource);
}

/** The Bot's schedule, or undefined when it has none; throws ERR_BOT_SCHEDULE (400) for one it cannot be run by. */
export function scheduleOf(bot: BotResource): BotSchedule | undefined {
  if (bot.cronString !== undefined) return compile(bot.cronString, 'Bot.cronString');
  if (bot.cronTiming !== undefined) return compile(patternOfTiming(bot.cronTiming), 'Bot.cronTiming');
  return undefined;
}

/** The first instant of the schedule strictly after `after` (epoch ms), or undefined when there is none. */
export function nextRun(schedule: BotSchedule, after: number): number | undefined {
  return schedule.cron.nextRun(new Date(after))?.getTime();
}

function compile(pattern: string, path: string): BotSchedule {
  const fields = pattern.trim().split(/\s+/);
  // Croner also reads a seventh field (years); Medplum's schedules have five, six with seconds.
  if (!pattern.trim().startsWith('@') && fields.length !== 5 && fields.length !== 6) {
    throw refused(
      path,
      `'${pattern.slice(0, 100)}' has ${fields.length} fields; a schedule has five (minute hour day month weekday) or six (seconds first)`,
    );
  }
  let cron: Cron;
  try {
    cron = new Cron(pattern, { timezone: 'UTC', paused: true });
  } catch (err) {
    throw refused(path, `'${pattern.slice(0, 100)}' is not a cron expression (${(err as Error).message})`);
  }
  if (cron.nextRun() === null) throw refused(path, `'${pattern.slice(0, 100)}' never runs`);
  return { pattern, cron };
}

const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];

/** The cron pattern a Timing stands for; refuses the forms that are not one clock schedule. */
function patternOfTiming(timing: Timing): string {
  const repeat = timing.repeat;
  if (!repeat) throw refused('Bot.cronTiming', 'it has no repeat');
  const days = (repeat.dayOfWeek ?? []).map((d) => DAYS.indexOf(d));
  if (days.includes(-1))
    throw refused('Bot.cronTiming.repeat.dayOfWeek', `'${repeat.dayOfWeek?.join(', ')}' names no day of the week`);
  const weekdays = days.length > 0 ? days.sort((a, b) => a - b).join(',') : '*';
  if (repeat.timeOfDay?.length) {
    if (
      (repeat.period ?? 1) !== 1 ||
      (repeat.frequency ?? 1) !== 1 ||
      (repeat.periodUnit && repeat.periodUnit !== 'd' && repeat.periodUnit !== 'wk')
    ) {
      throw refused(
        'Bot.cronTiming.repeat',
        'times of day repeat every day (or on the days of dayOfWeek); use cronString for other schedules',
      );
    }
    // Times of day on the given days (every day when none): one pattern when they share minute and second.
    const times = repeat.timeOfDay.map((t) => /^(\d\d):(\d\d)(?::(\d\d))?$/.exec(t));
    if (times.some((t) => !t)) throw refused('Bot.cronTiming.repeat.timeOfDay', 'a time of day is hh:mm:ss');
    const parsed = times.map((t) => (t as RegExpExecArray).slice(1, 4).map((n) => Number(n ?? 0)));
    const [, minute, second] = parsed[0];
    if (parsed.some(([, m, s]) => m !== minute || s !== second))
      throw refused(
        'Bot.cronTiming.repeat.timeOfDay',
        'times of day that differ in their minutes or seconds are not one schedule; use cronString',
      );
    const hours = [...new Set(parsed.map(([h]) => h))].sort((a, b) => a - b).join(',');
    return `${second} ${minute} ${hours} * * ${weekdays}`;
  }
  const unit = repeat.periodUnit;
  const period = repeat.period ?? 1;
  const frequency = repeat.frequency ?? 1;
  if (!unit || !Number.isInteger(period) || period < 1 || !Number.isInteger(frequency) || frequency < 1) {
    throw refused('Bot.cronTiming.repeat', 'it needs timeOfDay, or a whole period with periodUnit');
  }
  // `frequency` times per `period` units: an interval that must come out whole in the unit below.
  const every = (per: number, perUnitBelow: number) => {
    if (frequency === 1) return { step: per, below: false };
    const total = per * perUnitBelow;
    if (total % frequency !== 0)
      throw refused(
        'Bot.cronTiming.repeat.frequency',
        `${frequency} times every ${period} ${unit} is not a whole interval`,
      );
    return { step: total / frequency, below: true };
  };
  const step = (n: number) => (n === 1 ? '*' : `*/${n}`);
  switch (unit) {
    case 's':
      if (frequency !== 1)
        throw refused('Bot.cronTiming.repeat.frequency', 'more than once a second is not a schedule');
      return `${step(period)} * * * * *`;
    case 'min': {
      const e = every(period, 60);
      return e.below ? `${step(e.step)} * * * * *` : `0 ${step(e.step)} * * * *`;
    }
    case 'h': {
      const e = every(period, 60);
      return e.below ? `0 ${step(e.step)} * * * *` : `0 0 ${step(e.step)} * * *`;
    }
    case 'd': {
      // Both a day of the month and a weekday restricted would mean either, in cron: not this.
      if (period > 1 && days.length > 0)
        throw refused(
          'Bot.cronTiming.repeat',
          'every few days and dayOfWeek together are not one schedule; use cronString',
        );
      const e = every(period, 24);
      return e.below ? `0 0 ${step(e.step)} * * ${weekdays}` : `0 0 0 ${step(e.step)} * ${weekdays}`;
    }
    case 'wk':
      if (period !== 1 || frequency !== 1)
        throw refused('Bot.cronTiming.repeat', 'weeks repeat once a week (with dayOfWeek for the day)');
      return `0 0 0 * * ${days.length > 0 ? weekdays : '0'}`;
    case 'mo':
      if (frequency !== 1) throw refused('Bot.cronTiming.repeat.frequency', 'months repeat once per period');
      return `0 0 0 1 ${step(period)} *`;
    case 'a':
      if (period !== 1 || frequency !== 1) throw refused('Bot.cronTiming.repeat', 'years repeat once a year');
      return '0 0 0 1 1 *';
    default:
      throw refused('Bot.cronTiming.repeat.periodUnit', `'${String(unit)}' is not a unit of time`);
  }
}

function refused(path: string, reason: string) {
  return fhirError('ERR_BOT_SCHEDULE', { path, reason });
}
