import type { Resource } from 'fhir/r4';
import { operatorIn } from '../auth/principal';
import { internalContext, type ContextLog, type RequestContext } from '../context/request-context';
import type { BotResource } from '../fhir/admin-types';
import { FhirError } from '../fhir/errors';
import type { JobHandler, JobQueue } from '../jobs/queue';
import type { RestService } from '../rest/rest-service';
import type { WriteEvent, WriteObserver } from '../storage/repository';
import type { StoreTx } from '../storage/store';
import { nextRun, scheduleOf } from './schedule';
import type { BotService } from './service';

/**
 * Bots that run by themselves (`Bot.cronString`, `Bot.cronTiming`), on the durable job queue, so
 * that any number of processes over one database run each scheduled time once, and a schedule
 * survives restarts. Writing a Bot with a schedule enqueues, in the write's transaction, a job for
 * its next time; that job, when it runs, first enqueues the one after (so a crash during the run
 * loses no later time) and then runs the bot. Each job belongs to one version of the Bot: a job
 * that finds the Bot changed or gone ends without running it, and the new version's own chain
 * (begun by its write) takes over. The job ids name Bot, version and time, so a time is never
 * queued twice, and each time runs at most once: a run that fails, or whose process died under it,
 * is recorded dead with its reason (the jobs view shows it) and not tried again, as the next time
 * is queued already. A time missed while no process ran is run once when one starts, and the next
 * time counts from then: no burst of catching up.
 */

export const BOT_CRON_JOB = 'bot-cron';

interface CronInput {
  bot: string;
  version: string;
  /** The scheduled time (epoch ms). */
  at: number;
}

export interface BotCronDeps {
  bots: BotService;
  rest: RestService;
  jobs: JobQueue;
  baseUrl?: string;
  /** Where a schedule that cannot run is logged. */
  log?: ContextLog;
}

export class BotCron implements WriteObserver {
  private readonly log?: ContextLog;

  constructor(private readonly deps: BotCronDeps) {
    this.log = deps.log;
  }

  /** A Bot written with a schedule: its first time, queued with the write. */
  async written(tx: StoreTx, project: string, events: WriteEvent[]): Promise<void> {
    for (const { version } of events) {
      if (version.type !== 'Bot' || version.resource === null) continue;
      const bot = version.resource as BotResource;
      if (bot.cronString === undefined && bot.cronTiming === undefined) continue;
      await this.queue({ bot: version.id, version: String(version.versionId), at: Date.now() }, bot, project, tx);
    }
  }

  handler(): JobHandler<CronInput> {
    return {
      kind: BOT_CRON_JOB,
      // A run's lasting record is its AuditEvent: a schedule of every few seconds would otherwise
      // keep a week of done rows (failed ones are kept as long as any dead job).
      keepDoneMs: 24 * 3_600_000,
      // A failed run is not tried again: the schedule's next time is the next try.
      run: async (job) => {
        const { bot: id, version } = job.input;
        const ctx = internalContext({ project: job.project, baseUrl: this.deps.baseUrl, log: this.log });
        const bot = await this.current(id, ctx);
        if (!bot || bot.meta?.versionId !== version)
          return { skipped: bot ? 'the Bot changed; its new version keeps its own schedule' : 'the Bot is gone' };
        await this.queue({ bot: id, version, at: Math.max(Date.now(), job.input.at) }, bot, job.project);
        // Scheduled before its code was deployed ($deploy writes a new version, with its own schedule).
        if (!bot.executableCode) return { skipped: 'the Bot has no deployed code yet' };
        const answer = await this.deps.bots.executeForServer(
          bot,
          { input: bot, contentType: 'application/fhir+json' },
          ctx,
        );
        return { ran: new Date(job.input.at).toISOString(), log: answer.log.slice(0, 1000) };
      },
    };
  }

  /** Queues the Bot's first scheduled time after `after.at`, unless it is queued already. */
  private async queue(after: CronInput, bot: BotResource, project: string, tx?: StoreTx): Promise<void> {
    let schedule;
    try {
      schedule = scheduleOf(bot);
    } catch (err) {
      // Stored before its schedule was checked on write: it cannot run, and says so in the log.
      this.log?.warn({ project, bot: after.bot, err: (err as Error).message }, 'a bot schedule cannot be run');
      return;
    }
    const at = schedule && nextRun(schedule, after.at);
    if (at === undefined) return;
    const input: CronInput = { bot: after.bot, version: after.version, at };
    const id = `${BOT_CRON_JOB}:${project}:${after.bot}:${after.version}:${at}`;
    try {
      await this.deps.jobs.enqueue(
        { kind: BOT_CRON_JOB, project, principal: operatorIn(project), input, maxAttempts: 1, id, runAt: at },
        tx,
      );
    } catch (err) {
      // Queued already: the id is the time, and the primary key says no to a second one.
      if (!tx && (await this.deps.jobs.get(id))) return;
      throw err;
    }
  }

  private async current(id: string, ctx: RequestContext): Promise<BotResource | undefined> {
    try {
      return (await this.deps.rest.readResource('Bot', id, ctx)) as Resource as BotResource;
    } catch (err) {
      if (err instanceof FhirError && (err.status === 404 || err.status === 410)) return undefined;
      throw err;
    }
  }
}
