import { createHmac } from 'node:crypto';
import type { Resource, Subscription } from 'fhir/r4';
import type { ContextLog } from '../context/request-context';
import { fhirError } from '../fhir/errors';
import type { Job, JobHandler } from '../jobs/queue';
import type { Outbound } from '../net/outbound';
import type { Repository } from '../storage/repository';
import { deliveryMode, secretOf, type Interaction } from './definition';
import { DELIVERY_JOB, type DeliveryInput } from './matcher';

/**
 * Runs the delivery jobs the matcher enqueued: reads the Subscription (gone or no longer active:
 * nothing to do) and the version that was written, and hands both to the channel's handler. A
 * handler that throws fails the attempt: the queue retries with exponential backoff and jitter
 * up to the Subscription's max-attempts; the last failure sets the Subscription to `error`.
 *
 * Channels are pluggable: `websocket` by channel type, `rest-hook` by the endpoint's prefix
 * (`http://`, `https://`); bots register `Bot/` (src/bots/subscription-endpoint.ts), and the
 * same registry checks such endpoints when a Subscription is stored.
 */

export interface Notification {
  project: string;
  subscription: Subscription;
  interaction: Interaction;
  type: string;
  id: string;
  versionId: number;
  /** The version written; for a delete, the version before it (what was deleted). */
  resource?: Resource;
  attempt: number;
}

export interface ChannelHandler {
  /** Checks an endpoint before a Subscription naming it is stored (throws a FhirError). */
  check?(endpoint: string): Promise<void>;
  /** Delivers one notification; throws to fail the attempt. */
  deliver(notification: Notification): Promise<void>;
}

export interface DeliveryDeps {
  repository: Repository;
  outbound: Outbound;
  /** The first retry's delay; doubled each attempt, with jitter (default 1 s). */
  retryMs?: number;
  log?: ContextLog;
}

export class SubscriptionDelivery {
  private readonly byPrefix = new Map<string, ChannelHandler>();
  private readonly byChannel = new Map<string, ChannelHandler>();
  /** Where match and delivery failures are logged (the server's logger, given at construction). */
  private readonly log?: ContextLog;

  constructor(private readonly deps: DeliveryDeps) {
    this.log = deps.log;
    const restHook = restHookHandler(deps.outbound);
    this.registerEndpointHandler('http://', restHook);
    this.registerEndpointHandler('https://', restHook);
  }

  /** Rest-hook Subscriptions whose endpoint starts with `prefix` are delivered by `handler`. */
  registerEndpointHandler(prefix: string, handler: ChannelHandler): void {
    if (this.byPrefix.has(prefix)) throw new Error(`two subscription endpoint handlers for '${prefix}'`);
    this.byPrefix.set(prefix, handler);
  }

  /** Subscriptions of this channel type (websocket) are delivered by `handler`. */
  registerChannelHandler(type: string, handler: ChannelHandler): void {
    if (this.byChannel.has(type)) throw new Error(`two subscription channel handlers for '${type}'`);
    this.byChannel.set(type, handler);
  }

  /** The handler of a Subscription's channel, or undefined when none takes it. */
  handlerOf(sub: Subscription): ChannelHandler | undefined {
    if (sub.channel.type !== 'rest-hook') return this.byChannel.get(sub.channel.type);
    const endpoint = sub.channel.endpoint ?? '';
    let best: string | undefined;
    for (const prefix of this.byPrefix.keys())
      if (endpoint.startsWith(prefix) && (best === undefined || prefix.length > best.length)) best = prefix;
    return best === undefined ? undefined : this.byPrefix.get(best);
  }

  /** The endpoint check when a Subscription is stored: a rest-hook endpoint some handler takes, and that handler's own check. */
  async checkEndpoint(sub: Subscription): Promise<void> {
    if (sub.channel.type !== 'rest-hook') return;
    const endpoint = sub.channel.endpoint;
    if (!endpoint)
      throw fhirError('ERR_SUBSCRIPTION_INVALID', {
        path: 'Subscription.channel.endpoint',
        reason: 'a rest-hook needs an endpoint',
      });
    const handler = this.handlerOf(sub);
    if (!handler)
      throw fhirError('ERR_SUBSCRIPTION_INVALID', {
        path: 'Subscription.channel.endpoint',
        reason: `'${endpoint.slice(0, 100)}' is not an http(s) URL`,
      });
    await handler.check?.(endpoint);
  }

  handler(): JobHandler<DeliveryInput> {
    const retryMs = this.deps.retryMs ?? 1000;
    return {
      kind: DELIVERY_JOB,
      // Deliveries are short and many: claimed and completed 32 at a time.
      batch: 32,
      // A delivered notification needs no record beyond a day; failed (dead) ones keep the queue's retention.
      keepDoneMs: 24 * 3_600_000,
      // Exponential, with jitter in [1/2, 1) of each step: spread out, and each gap still longer than the last.
      backoff: (attempt) => retryMs * 2 ** (attempt - 1) * (0.5 + Math.random() / 2),
      run: (job) => this.run(job),
    };
  }

  private async run(job: Job<DeliveryInput>): Promise<unknown> {
    const { input, project } = job;
    const repo = this.deps.repository.in(project);
    const current = await repo.store.read(project, 'Subscription', input.subscription);
    const sub = current?.resource as Subscription | null | undefined;
    if (!sub || sub.status !== 'active') return { skipped: 'the subscription is not active' };
    const handler = this.handlerOf(sub);
    const versionId = input.interaction === 'delete' ? input.versionId - 1 : input.versionId;
    const resource =
      versionId > 0
        ? ((await repo.store.readVersion(project, input.type, input.id, versionId))?.resource ?? undefined)
        : undefined;
    const notification: Notification = {
      project,
      subscription: sub,
      interaction: input.interaction,
      type: input.type,
      id: input.id,
      versionId: input.versionId,
      resource,
      attempt: job.attempt,
    };
    const log = {
      project,
      subscription: sub.id,
      resource: `${input.type}/${input.id}/_history/${input.versionId}`,
      attempt: job.attempt,
    };
    try {
      if (!handler)
        throw new Error(`no handler delivers channel ${sub.channel.type} to '${sub.channel.endpoint ?? ''}'`);
      await handler.deliver(notification);
      this.log?.info(log, 'subscription delivered');
      return { delivered: true };
    } catch (err) {
      const message = (err as Error).message ?? String(err);
      this.log?.warn({ ...log, err: message }, 'subscription delivery failed');
      if (job.attempt >= job.maxAttempts)
        await this.markError(
          project,
          input.subscription,
          `delivery of ${input.type}/${input.id} failed ${job.attempt} times: ${message}`,
        );
      throw err;
    }
  }

  /** R4: after repeated failure the Subscription's status is `error`, with `error` saying why. */
  async markError(project: string, id: string, error: string): Promise<void> {
    const repo = this.deps.repository.in(project);
    await repo.transaction(async (tx) => {
      const current = await tx.read('Subscription', id).catch(() => undefined);
      const sub = current?.resource as Subscription | undefined;
      if (!sub || sub.status !== 'active') return;
      const failed: Subscription = { ...sub, status: 'error', error: error.slice(0, 1000) };
      await tx.update('Subscription', id, failed);
    });
  }
}

/**
 * rest-hook. R4 (default): with a payload, `PUT [endpoint]/[type]/[id]` with the resource
 * (`DELETE [endpoint]/[type]/[id]` for a delete); without, an empty `POST [endpoint]`. Medplum
 * mode (extension delivery-mode = medplum): `POST [endpoint]` with the resource, a delete marked
 * by `X-Medplum-Deleted-Resource: [type]/[id]`. Each `header[]` is sent; with a secret,
 * `X-Signature` is the hex HMAC-SHA256 of the body. Any 2xx is success.
 */
function restHookHandler(outbound: Outbound): ChannelHandler {
  return {
    check: async (endpoint) => {
      await outbound.check(endpoint).catch((err: Error) => {
        throw fhirError('ERR_SUBSCRIPTION_INVALID', { path: 'Subscription.channel.endpoint', reason: err.message });
      });
    },
    deliver: async (n) => {
      const channel = n.subscription.channel;
      const endpoint = channel.endpoint as string;
      const contentType = channel.payload || 'application/fhir+json';
      const headers: Record<string, string> = {};
      let method: 'POST' | 'PUT' | 'DELETE' = 'POST';
      let url = endpoint;
      let body: string | undefined;
      if (deliveryMode(n.subscription) === 'medplum') {
        body = JSON.stringify(n.resource ?? {});
        headers['content-type'] = contentType;
        if (n.interaction === 'delete') headers['x-medplum-deleted-resource'] = `${n.type}/${n.id}`;
      } else if (channel.payload) {
        url = `${endpoint.replace(/\/+$/, '')}/${n.type}/${n.id}`;
        if (n.interaction === 'delete') method = 'DELETE';
        else {
          method = 'PUT';
          body = JSON.stringify(n.resource ?? {});
          headers['content-type'] = contentType;
        }
      }
      for (const header of channel.header ?? []) {
        const colon = header.indexOf(':');
        if (colon > 0) headers[header.slice(0, colon).trim().toLowerCase()] = header.slice(colon + 1).trim();
      }
      const secret = secretOf(n.subscription);
      if (secret)
        headers['x-signature'] = createHmac('sha256', secret)
          .update(body ?? '')
          .digest('hex');
      const answer = await outbound.send({ method, url, headers, body });
      if (answer.status < 200 || answer.status >= 300) throw new Error(`${method} ${url} answered ${answer.status}`);
    },
  };
}
