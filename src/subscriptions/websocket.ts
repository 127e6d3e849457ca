import { randomBytes, randomUUID } from 'node:crypto';
import type { OperationOutcome, Resource } from 'fhir/r4';
import type { ContextLog } from '../context/request-context';
import type { EphemeralStore } from '../storage/ephemeral';
import type { Notices } from '../storage/notices';
import type { Repository } from '../storage/repository';
import type { ChannelHandler } from './delivery';
import type { Interaction } from './definition';

/**
 * The websocket channel, Medplum's protocol: a client gets a short-lived binding token from
 * `Subscription/[id]/$get-ws-binding-token`, opens `/ws/subscriptions-r4`, and sends
 * `{"type": "bind-with-token", "payload": {"token": ...}}`; it then receives a handshake and, for
 * each event, an R4B-backport-style notification Bundle (a SubscriptionStatus, then the resource).
 *
 * Delivery is best effort: the delivery job publishes the event's name (project, subscription,
 * resource version) as a notice to every process (PostgreSQL NOTIFY; in-process with SQLite);
 * the processes holding sockets bound to that Subscription read the version and send it.
 */

export const WS_NOTICE_CHANNEL = 'fhir_subscription_events';
const TOKEN_KIND = 'ws-binding-token';
export const TOKEN_TTL_MS = 60 * 60_000;

/** What the hub needs of a socket (the route's websocket). */
export interface HubSocket {
  send(text: string): void;
  close(code?: number, reason?: string): void;
}

interface Binding {
  project: string;
  subscription: string;
}

interface Event extends Binding {
  type: string;
  id: string;
  versionId: number;
  interaction: Interaction;
}

export class WebsocketHub {
  private readonly bound = new Map<string, Set<HubSocket>>();
  private readonly bindings = new Map<HubSocket, string>();
  private eventNumber = 0;
  private stop?: () => void;
  private readonly log?: ContextLog;

  constructor(
    private readonly deps: { notices: Notices; ephemeral: EphemeralStore; repository: Repository; log?: ContextLog },
  ) {
    this.log = deps.log;
  }

  /** Listens for events from every process. */
  async start(): Promise<void> {
    this.stop ??= await this.deps.notices.listen(WS_NOTICE_CHANNEL, (payload) => {
      void this.dispatch(payload).catch((err: Error) =>
        this.log?.warn({ err: err.message }, 'websocket notification failed'),
      );
    });
  }

  close(): void {
    this.stop?.();
    for (const socket of this.bindings.keys()) socket.close(1001, 'server stopping');
  }

  async issueToken(project: string, subscription: string): Promise<{ token: string; expiresAt: number }> {
    const token = randomBytes(32).toString('base64url');
    const expiresAt = Date.now() + TOKEN_TTL_MS;
    await this.deps.ephemeral.put(
      TOKEN_KIND,
      token,
      JSON.stringify({ project, subscription } satisfies Binding),
      expiresAt,
    );
    return { token, expiresAt };
  }

  /** A client's message: bind-with-token (answered with a handshake, or an error and the socket closed), ping. */
  async message(socket: HubSocket, text: string): Promise<void> {
    let message: { type?: unknown; payload?: { token?: unknown } };
    try {
      message = JSON.parse(text) as typeof message;
    } catch {
      return this.refuse(socket, 'the message is not JSON');
    }
    if (message.type === 'ping') return socket.send(JSON.stringify({ type: 'pong' }));
    if (message.type !== 'bind-with-token')
      return this.refuse(socket, `unknown message type '${String(message.type).slice(0, 50)}'`);
    const token = message.payload?.token;
    const value =
      typeof token === 'string' && token.length < 200 ? await this.deps.ephemeral.peek(TOKEN_KIND, token) : undefined;
    if (!value)
      return this.refuse(
        socket,
        'the binding token is not valid (get one from Subscription/[id]/$get-ws-binding-token)',
      );
    const binding = JSON.parse(value) as Binding;
    const key = keyOf(binding);
    this.unbind(socket);
    this.bindings.set(socket, key);
    let set = this.bound.get(key);
    if (!set) this.bound.set(key, (set = new Set()));
    set.add(socket);
    socket.send(JSON.stringify(statusBundle(binding, 'handshake', [])));
  }

  /** Whether the socket has bound to a Subscription (a socket that has not is closed after WS_BIND_TIMEOUT_MS). */
  isBound(socket: HubSocket): boolean {
    return this.bindings.has(socket);
  }

  unbind(socket: HubSocket): void {
    const key = this.bindings.get(socket);
    if (key === undefined) return;
    this.bindings.delete(socket);
    const set = this.bound.get(key);
    set?.delete(socket);
    if (set?.size === 0) this.bound.delete(key);
  }

  /** The delivery side: an event is announced to every process. */
  channelHandler(): ChannelHandler {
    return {
      deliver: async (n) => {
        const event: Event = {
          project: n.project,
          subscription: n.subscription.id as string,
          type: n.type,
          id: n.id,
          versionId: n.versionId,
          interaction: n.interaction,
        };
        await this.deps.notices.publish(WS_NOTICE_CHANNEL, JSON.stringify(event));
      },
    };
  }

  private async dispatch(payload: string): Promise<void> {
    const event = JSON.parse(payload) as Event;
    const sockets = this.bound.get(keyOf(event));
    if (!sockets || sockets.size === 0) return;
    const versionId = event.interaction === 'delete' ? event.versionId - 1 : event.versionId;
    const version = await this.deps.repository.store.readVersion(event.project, event.type, event.id, versionId);
    const focus = { reference: `${event.type}/${event.id}` };
    const bundle = statusBundle(
      event,
      'event-notification',
      [{ eventNumber: String(++this.eventNumber), timestamp: new Date().toISOString(), focus }],
      version?.resource ?? undefined,
    );
    const text = JSON.stringify(bundle);
    for (const socket of sockets) socket.send(text);
  }

  private refuse(socket: HubSocket, reason: string): void {
    const outcome: OperationOutcome = {
      resourceType: 'OperationOutcome',
      issue: [{ severity: 'error', code: 'security', details: { text: reason } }],
    };
    socket.send(JSON.stringify({ type: 'error', payload: outcome }));
    socket.close(1008, 'refused');
  }
}

function keyOf(binding: Binding): string {
  return `${binding.project}/${binding.subscription}`;
}

/** A notification Bundle as the R4B Subscriptions backport shapes it (Medplum's websocket messages). */
function statusBundle(
  binding: Binding,
  type: 'handshake' | 'event-notification',
  events: object[],
  resource?: Resource,
): object {
  const now = new Date().toISOString();
  const status = {
    resourceType: 'SubscriptionStatus',
    id: randomUUID(),
    status: 'active',
    type,
    subscription: { reference: `Subscription/${binding.subscription}` },
    ...(events.length > 0 ? { notificationEvent: events } : {}),
  };
  const entry: object[] = [{ fullUrl: `urn:uuid:${status.id}`, resource: status }];
  if (resource) entry.push({ fullUrl: `${resource.resourceType}/${resource.id}`, resource });
  return { resourceType: 'Bundle', id: randomUUID(), type: 'history', timestamp: now, entry };
}
