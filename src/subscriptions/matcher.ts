import type { Resource, Subscription } from 'fhir/r4';
import { operatorIn } from '../auth/principal';
import type { ContextLog } from '../context/request-context';
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
  log?: ContextLog;
}

const CACHED_PROJECTS = 10_000;

export class SubscriptionMatcher implements WriteObserver {
  private readonly projects = new Map<string, { mark: number; byType: ByType }>();
  private readonly dirty = new WeakSet<StoreTx>();
  /** Set when a job was enqueued; the composition root wakes the workers once the write commits. */
  pending = false;
  /** Where match and delivery failures are logged (the app's logger once it exists). */
  log?: ContextLog;

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
  async resend(repository: ProjectRepository, type: string, id: string, options: { interaction: Interaction; subscription?: string }): Promise<string[]> {
    return repository.transaction(async (rtx) => {
      const current = await rtx.read(type, id);
      const byType = await this.load(rtx.store, repository.project);
      const subs = (byType.get(type) ?? []).filter((s) => options.subscription === undefined || s.id === options.subscription);
      const previous = current.versionId > 1 ? { versionId: current.versionId - 1, deleted: false } : undefined;
      const event: WriteEvent = { version: current, previous };
      return this.match(rtx.store, repository.project, event, subs, options.interaction);
    });
  }

  private async active(tx: StoreTx, project: string): Promise<ByType | undefined> {
    const rows = await tx.query<{ seq: number | string }>('SELECT seq FROM change_marks WHERE project = ? AND type = ?', [project, 'Subscription']);
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
        this.log?.warn({ project, subscription: sub.id, err: (err as Error).message }, 'subscription criteria no longer compile');
      }
    }
    return byType;
  }

  private async match(tx: StoreTx, project: string, event: WriteEvent, subs: CompiledSubscription[], as?: Interaction): Promise<string[]> {
    const { version } = event;
    const interaction: Interaction = as ?? (version.resource === null ? 'delete' : !event.previous || event.previous.deleted ? 'create' : 'update');
    let previous: Promise<Resource | undefined> | undefined;
    const previousOf = () =>
      (previous ??=
        event.previous && !event.previous.deleted
          ? tx.readVersion(project, version.type, version.id, event.previous.versionId).then((v) => v?.resource ?? undefined)
          : Promise.resolve(undefined));
    const enqueued: string[] = [];
    for (const sub of subs) {
      if (!sub.interactions.has(interaction)) continue;
      const current = version.resource ?? undefined;
      const subject = interaction === 'delete' ? (current ?? (await previousOf())) : current;
      if (!subject || !sub.filter(subject)) continue;
      if (sub.fhirPath) {
        const before = sub.fhirPath.needsPrevious || interaction === 'delete' ? await previousOf() : undefined;
        if (!sub.fhirPath.test(interaction === 'delete' ? undefined : current, before)) continue;
      }
      const input: DeliveryInput = { subscription: sub.id, type: version.type, id: version.id, versionId: version.versionId, interaction };
      await this.deps.jobs.enqueue({ kind: DELIVERY_JOB, project, principal: operatorIn(project), input, maxAttempts: sub.maxAttempts }, tx);
      enqueued.push(sub.id);
      this.pending = true;
    }
    return enqueued;
  }
}
