import type { Resource, Subscription } from 'fhir/r4';
import type { ContextLog } from '../context/request-context';
import type { FhirPathPool } from '../fhir/fhirpath/pool';
import type { JobHandler, JobQueue } from '../jobs/queue';
import type { Outbound } from '../net/outbound';
import type { Repository } from '../storage/repository';
import { compileSubscription, type SubscriptionDeps } from './definition';
import { SubscriptionDelivery } from './delivery';
import { OVERRUN_JOB, SubscriptionMatcher, type OverrunInput } from './matcher';
import { WebsocketHub } from './websocket';

/**
 * R4 Subscriptions, wired: the check and status change of a Subscription when it is written, the
 * matcher that enqueues deliveries in every write's transaction, and the delivery jobs.
 */
export interface SubscriptionsOptions extends SubscriptionDeps {
  repository: Repository;
  /** Where FHIRPath criteria are evaluated, bounded. */
  fhirpath: FhirPathPool;
  jobs: JobQueue;
  outbound: Outbound;
  retryMs?: number;
  log?: ContextLog;
}

export class Subscriptions {
  readonly matcher: SubscriptionMatcher;
  readonly delivery: SubscriptionDelivery;
  readonly websocket: WebsocketHub;

  constructor(private readonly options: SubscriptionsOptions) {
    this.matcher = new SubscriptionMatcher({ ...options, jobs: options.jobs });
    this.delivery = new SubscriptionDelivery({
      repository: options.repository,
      outbound: options.outbound,
      retryMs: options.retryMs,
      log: options.log,
    });
    options.repository.observe(this.matcher);
    // Jobs enqueued in a transaction are claimable once it commits: wake the workers then.
    options.repository.onWrite(() => {
      if (!this.matcher.pending) return;
      this.matcher.pending = false;
      options.jobs.wake();
    });
    options.jobs.register(this.delivery.handler());
    const overrun: JobHandler<OverrunInput> = {
      kind: OVERRUN_JOB,
      run: async (job) => this.delivery.markError(job.project, job.input.subscription, job.input.reason),
    };
    options.jobs.register(overrun);
    const store = options.repository.store;
    this.websocket = new WebsocketHub({
      notices: store.notices,
      ephemeral: store.ephemeral,
      repository: options.repository,
      log: options.log,
    });
    this.delivery.registerChannelHandler('websocket', this.websocket.channelHandler());
  }

  /** Starts listening for websocket events (from every process). */
  start(): Promise<void> {
    return this.websocket.start();
  }

  stop(): void {
    this.websocket.close();
  }

  /** Before a Subscription is stored: criteria, channel and endpoint must be runnable (400 otherwise); `requested` becomes `active`. */
  async prepare(resource: Resource): Promise<void> {
    if (resource.resourceType !== 'Subscription') return;
    const sub = resource as Subscription;
    compileSubscription(sub, this.options);
    await this.delivery.checkEndpoint(sub);
    if (sub.status === 'requested') sub.status = 'active';
  }
}
