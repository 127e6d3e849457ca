import type { Resource, Subscription } from 'fhir/r4';
import { operatorIn } from '../auth/principal';
import type { ContextLog } from '../context/request-context';
import type { FhirPathPool } from '../fhir/fhirpath/pool';
import type { JobQueue } from '../jobs/queue';
import type { ProjectRepository, WriteEvent, WriteObserver } from '../storage/repository';
import type { StoreReader, StoreTx } from '../storage/store';
import { compileSubscription, type CompiledSubscription, type Interaction, type SubscriptionDeps } from './definition';

/**
 * Matches every write against the project's active Subscriptions inside the write's own
 * transaction and enqueues one delivery job per match there (a transactional outbox: a crash
 * after the commit cannot lose the notification, a rollback sends none).
 *
 * A write in a project without Subscriptions costs one read of the project's `Subscription`
 * change mark (a row that does not exist). The compiled Subscriptions of a project are kept in
 * memory under the mark they were read at, and read again when a write sees another mark: the
 * mark is read in the writing transaction, so a Subscription committed by any process before it
 * is never missed. A transaction that writes a Subscription itself reads them without keeping
 * them (it may still roll back, and another write would then take its mark).
 */

export const DELIVERY_JOB = 'subscription-delivery';
/** Sets a Subscription whose FHIRPath criteria ran out of budget to `error` (after the write that found it commits). */
export const OVERRUN_JOB = 'subscription-criteria-overrun';

export interface OverrunInput {
  subscription: string;
  reason: string;
}

export interface DeliveryInput {
  subscription: string;
  type: string;
  id: string;
  versionId: number;
  interaction: Interaction;
}

type ByType = Map<string, CompiledSubscription[]>;

export interface MatcherDeps extends SubscriptionDeps {
  jobs: Pick<JobQueue, 'enqueue'>;
  /** Where FHIRPath criteria are evaluated, bounded. */
  fhirpath: Pick<FhirPathPool, 'evaluate'>;
  log?: ContextLog;
}

const CACHED_PROJECTS = 10_000;

export class SubscriptionMatcher implements WriteObserver {
  private readonly projects = new Map<string, { mark: number; byType: ByType }>();
  private readonly dirty = new WeakSet<StoreTx>();
  /** Set when a job was enqueued; the composition root wakes the workers once the write commits. */
  pending = false;
  /** Where match and delivery failures are logged (the server's logger, given at construction). */
  private readonly log?: ContextLog;

  constructor(private readonly deps: MatcherDeps) {
    this.log = deps.log;
  }

  async written(tx: StoreTx, project: string, events: WriteEvent[]): Promise<void> {
    if (events.some((e) => e.version.type === 'Subscription')) this.dirty.add(tx);
    const byType = await this.active(tx, project);
    if (!byType) return;
    for (const event of events) {
      const subs = byType.get(event.version.type);
      if (subs) await this.match(tx, project, event, subs);
    }
  }

  /**
   * `$resend`: the current version of a resource, matched again (as `interaction`) against the
   * project's active Subscriptions (or the one named); answers the Subscriptions it was enqueued for.
   */
  async resend(
    repository: ProjectRepository,
    type: string,
    id: string,
    options: { interaction: Interaction; subscription?: string },
  ): Promise<string[]> {
    return repository.transaction(async (rtx) => {
      const current = await rtx.read(type, id);
      const byType = await this.load(rtx.store, repository.project);
      const subs = (byType.get(type) ?? []).filter(
        (s) => options.subscription === undefined || s.id === options.subscription,
      );
      const previous = current.versionId > 1 ? { versionId: current.versionId - 1, deleted: false } : undefined;
      const event: WriteEvent = { version: current, previous };
      return this.match(rtx.store, repository.project, event, subs, options.interaction);
    });
  }

  private async active(tx: StoreTx, project: string): Promise<ByType | undefined> {
    const rows = await tx.query<{ seq: number | string }>(
      'SELECT seq FROM change_marks WHERE project = ? AND type = ?',
      [project, 'Subscription'],
    );
    if (rows.length === 0) return undefined;
    const mark = Number(rows[0].seq);
    const cached = this.projects.get(project);
    if (cached && cached.mark === mark) return cached.byType.size > 0 ? cached.byType : undefined;
    const byType = await this.load(tx, project);
    if (!this.dirty.has(tx)) {
      if (this.projects.size >= CACHED_PROJECTS) this.projects.delete(this.projects.keys().next().value as string);
      this.projects.set(project, { mark, byType });
    }
    return byType.size > 0 ? byType : undefined;
  }

  /** The project's active Subscriptions, compiled, by the resource type of their criteria. */
  private async load(reader: StoreReader, project: string): Promise<ByType> {
    const rows = await reader.query<{ content: string }>(
      `SELECT v.content FROM resources r
        JOIN resource_versions v ON v.project = r.project AND v.type = r.type AND v.id = r.id AND v.version = r.version
        WHERE r.project = ? AND r.type = ? AND r.deleted = FALSE`,
      [project, 'Subscription'],
    );
    const byType: ByType = new Map();
    for (const row of rows) {
      const sub = JSON.parse(row.content) as Subscription;
      if (sub.status !== 'active') continue;
      try {
        const compiled = compileSubscription(sub, this.deps);
        const list = byType.get(compiled.type) ?? [];
        list.push(compiled);
        byType.set(compiled.type, list);
      } catch (err) {
        // Stored before a search parameter it names went away: it cannot match anything now.
        this.log?.warn(
          { project, subscription: sub.id, err: (err as Error).message },
          'subscription criteria no longer compile',
        );
      }
    }
    return byType;
  }

  private async match(
    tx: StoreTx,
    project: string,
    event: WriteEvent,
    subs: CompiledSubscription[],
    as?: Interaction,
  ): Promise<string[]> {
    const { version } = event;
    const interaction: Interaction =
      as ?? (version.resource === null ? 'delete' : !event.previous || event.previous.deleted ? 'create' : 'update');
    let previous: Promise<Resource | undefined> | undefined;
    const previousOf = () =>
      (previous ??=
        event.previous && !event.previous.deleted
          ? tx
              .readVersion(project, version.type, version.id, event.previous.versionId)
              .then((v) => v?.resource ?? undefined)
          : Promise.resolve(undefined));
    const current = version.resource ?? undefined;
    const candidates: CompiledSubscription[] = [];
    for (const sub of subs) {
      if (!sub.interactions.has(interaction) || sub.fhirPath?.overran) continue;
      const subject = interaction === 'delete' ? (current ?? (await previousOf())) : current;
      if (subject && sub.filter(subject)) candidates.push(sub);
    }
    const needsPrevious = interaction === 'delete' || candidates.some((s) => s.fhirPath?.needsPrevious);
    const before = needsPrevious && candidates.some((s) => s.fhirPath) ? await previousOf() : undefined;
    const passed = await this.criteria(tx, project, candidates, interaction === 'delete' ? undefined : current, before);
    const enqueued: string[] = [];
    for (const sub of passed) {
      const input: DeliveryInput = {
        subscription: sub.id,
        type: version.type,
        id: version.id,
        versionId: version.versionId,
        interaction,
      };
      await this.deps.jobs.enqueue(
        { kind: DELIVERY_JOB, project, principal: operatorIn(project), input, maxAttempts: sub.maxAttempts },
        tx,
      );
      enqueued.push(sub.id);
      this.pending = true;
    }
    return enqueued;
  }

  /**
   * The candidates whose FHIRPath criteria (if any) hold, all evaluated in one batch in the pool's
   * workers: the resource is sent once per write. A criterion that runs out of time or memory does
   * not match, is not evaluated again by this process, and its Subscription is set to `error`
   * (by a job enqueued with this write), so one costly criterion costs one write its time limit once.
   */
  private async criteria(
    tx: StoreTx,
    project: string,
    candidates: CompiledSubscription[],
    current: Resource | undefined,
    previous: Resource | undefined,
  ): Promise<CompiledSubscription[]> {
    const withPath = candidates.filter((s) => s.fhirPath);
    if (withPath.length === 0) return candidates;
    const vars = { current: current ?? {}, previous: previous ?? {} };
    const jobs = withPath.map((s) => ({
      expression: (s.fhirPath as { expression: string }).expression,
      focus: current ?? {},
      vars,
    }));
    const answers = await this.deps.fhirpath.evaluate(jobs, { afterOverrun: 'continue' });
    const failed = new Set<CompiledSubscription>();
    for (const [i, sub] of withPath.entries()) {
      const answer = answers[i];
      if (answer.ok && answer.summary.first === true) continue;
      failed.add(sub);
      // Only its own cost errors a Subscription off; a pool that cannot evaluate (shutdown) does not.
      if (!answer.ok && answer.error === 'budget') await this.overran(tx, project, sub, answer.message);
    }
    return candidates.filter((s) => !failed.has(s));
  }

  private async overran(tx: StoreTx, project: string, sub: CompiledSubscription, reason: string): Promise<void> {
    const fhirPath = sub.fhirPath as NonNullable<CompiledSubscription['fhirPath']>;
    fhirPath.overran = `the fhir-path-criteria-expression was stopped: ${reason}`;
    this.log?.warn({ project, subscription: sub.id, reason }, 'subscription criteria ran out of budget');
    const input: OverrunInput = { subscription: sub.id, reason: fhirPath.overran };
    await this.deps.jobs.enqueue({ kind: OVERRUN_JOB, project, principal: operatorIn(project), input }, tx);
    this.pending = true;
  }
}
