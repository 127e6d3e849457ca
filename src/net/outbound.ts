import { lookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { createRequire } from 'node:module';
import { isIP } from 'node:net';
import type * as Undici from 'undici';
import { addressKind } from './addresses';

// undici is loaded with the first outbound request, not at start (it is a tenth of the start-up).
const require = createRequire(import.meta.url);
let undici: typeof Undici | undefined;
const loadUndici = (): typeof Undici => (undici ??= require('undici') as typeof Undici);

/**
 * Requests the server makes to addresses users give it (a client's jwksUri, subscriptions' rest-hook endpoints, a bot's fetch):
 * never to loopback, link-local or private addresses (where the server's own neighbours live)
 * unless OUTBOUND_ALLOW_PRIVATE=true, never to cloud metadata, in whatever form the address is
 * written (src/net/addresses.ts reads it as numbers); checked on the address actually connected
 * to (a name that resolves to 127.0.0.1 is refused too); bounded in time and in size. Every
 * outbound call goes through this class: nothing else in src/ opens a connection to a user's URL.
 */

export interface OutboundOptions {
  allowPrivate: boolean;
  timeoutMs?: number;
  maxBytes?: number;
  /**
   * The resolver (node's dns.lookup by default). Tests give one that maps a name to an address,
   * to see the guard judge what a name resolves to without any DNS.
   */
  lookup?: typeof lookup;
  /**
   * `address:port` pairs that may be called although private (`10.0.0.5:8443`, `[::1]:9000`,
   * OUTBOUND_ALLOW_TARGETS): one internal receiver rather than the whole network, and for tests
   * one loopback target that answers (a redirect's first hop). Literal addresses only: the lookup
   * of a name does not know the port. Metadata and unroutable addresses are never let through.
   */
  allowTargets?: readonly string[];
}

export class OutboundError extends Error {}

export interface FetchedText {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

export class Outbound {
  private agentMade: Undici.Agent | undefined;
  private readonly timeoutMs: number;
  private readonly maxBytes: number;

  constructor(private readonly options: OutboundOptions) {
    this.timeoutMs = options.timeoutMs ?? 5000;
    this.maxBytes = options.maxBytes ?? 256 * 1024;
  }

  /**
   * The connection pool, made with the first request. The guard is in its connector, which runs
   * for every new connection (a redirect followed by the caller, a reconnect, a retry): a literal
   * address is judged there, a name by the addresses the guarded lookup hands to the socket. What
   * was checked is what is connected to, so a name that resolves to a public address when checked
   * and to 127.0.0.1 when connected (DNS rebinding) is refused at the connection.
   */
  private get agent(): Undici.Agent {
    if (this.agentMade) return this.agentMade;
    const { Agent, buildConnector } = loadUndici();
    const connectTo = buildConnector({
      timeout: this.timeoutMs,
      lookup: (hostname: string, options: LookupOptions, callback: LookupCallback) =>
        this.guardedLookup(hostname, options, callback),
    });
    const connect: Undici.buildConnector.connector = (target, callback) => {
      const port = target.port || (target.protocol === 'https:' ? 443 : 80);
      const refusal = isIP(target.hostname) ? this.refusal(target.hostname, target.hostname, port) : undefined;
      if (refusal) return callback(refusal, null);
      return connectTo(target, callback);
    };
    this.agentMade = new Agent({ connect });
    return this.agentMade;
  }

  /** Every address a name resolves to is judged, not only the first: the socket may try any of them. */
  private guardedLookup(hostname: string, options: LookupOptions, callback: LookupCallback): void {
    (this.options.lookup ?? lookup)(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 4);
      const list = Array.isArray(addresses) ? addresses : [{ address: String(addresses), family: 4 }];
      const refusal = this.refusalOfAll(hostname, list);
      if (refusal) return callback(refusal, '', 4);
      if (list.length === 0) return callback(new OutboundError(`${hostname} resolves to no address`), '', 4);
      if (options.all) return callback(null, list);
      return callback(null, list[0].address, list[0].family);
    });
  }

  /** Why `address` (what `host` is or resolves to) may not be connected to, or undefined if it may. */
  private refusal(host: string, address: string, port?: string | number): OutboundError | undefined {
    const kind = addressKind(address);
    if (kind === 'public') return undefined;
    if (kind === 'private' && (this.options.allowPrivate || this.isAllowedTarget(address, port))) return undefined;
    const shown = host === address ? address : `${host} (${address})`;
    if (kind === 'metadata')
      return new OutboundError(
        `${shown} is a cloud metadata address: refused always, whatever OUTBOUND_ALLOW_PRIVATE says`,
      );
    if (kind === 'private')
      return new OutboundError(`${shown} is a private address; set OUTBOUND_ALLOW_PRIVATE=true to allow it`);
    return new OutboundError(
      `${shown} is not an address the server calls (unspecified, multicast, reserved or unreadable)`,
    );
  }

  private isAllowedTarget(address: string, port: string | number | undefined): boolean {
    if (port === undefined || !this.options.allowTargets) return false;
    const shown = address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
    return this.options.allowTargets.includes(shown);
  }

  async getText(url: string): Promise<FetchedText> {
    return this.send({ method: 'GET', url });
  }

  /**
   * One request (no redirects followed: undici's request never does, a 3xx is an answer like any
   * other), bounded in time and in the size of the answer read.
   */
  async send(call: {
    method: string;
    url: string;
    headers?: Record<string, string>;
    body?: string;
  }): Promise<FetchedText> {
    const { url } = call;
    this.refuseLiteral(url);
    const response = await loadUndici().request(url, {
      dispatcher: this.agent,
      method: call.method as 'GET',
      headers: call.headers,
      body: call.body,
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
      signal: AbortSignal.timeout(this.timeoutMs * 2),
    });
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of response.body) {
      size += (chunk as Buffer).length;
      if (size > this.maxBytes) {
        response.body.destroy();
        throw new OutboundError(`the answer of ${url} is larger than ${this.maxBytes} bytes`);
      }
      chunks.push(chunk as Buffer);
    }
    return { status: response.statusCode, headers: response.headers, body: Buffer.concat(chunks).toString('utf8') };
  }

  /**
   * Whether a URL may be called, checked before it is stored (a webhook's endpoint): http(s), and
   * neither a refused literal nor a name resolving to a refused address. A name that does not
   * resolve now is accepted: the connection checks it again, every time.
   */
  async check(url: string): Promise<void> {
    const parsed = this.refuseLiteral(url);
    const host = parsed.hostname.replace(/^\[|\]$/g, '');
    if (isIP(host)) return;
    const addresses = await new Promise<LookupAddress[]>((resolve) =>
      (this.options.lookup ?? lookup)(host, { all: true }, (err, list) => resolve(err ? [] : list)),
    );
    const refusal = this.refusalOfAll(host, addresses);
    if (refusal) throw refusal;
  }

  /**
   * The refusal for a name by all its addresses, one that no setting lifts before a private one:
   * a name resolving to a private and a metadata address must not be answered with "set
   * OUTBOUND_ALLOW_PRIVATE=true", since the call would still be refused with it set.
   */
  private refusalOfAll(host: string, addresses: readonly LookupAddress[]): OutboundError | undefined {
    const refused = addresses.flatMap((a) => {
      const refusal = this.refusal(host, a.address);
      return refusal ? [{ kind: addressKind(a.address), refusal }] : [];
    });
    return (refused.find((r) => r.kind !== 'private') ?? refused[0])?.refusal;
  }

  /**
   * The URL's scheme, and its host when it is an address, before any work is done (the connector
   * judges it again; this gives the caller the reason rather than a failed connection). The URL
   * parser has already turned `2130706433`, `0x7f000001`, `0177.0.0.1` and `127.1` into
   * 127.0.0.1, and `[::ffff:127.0.0.1]` into `[::ffff:7f00:1]`, which addressKind reads as numbers.
   */
  private refuseLiteral(url: string): URL {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new OutboundError(`'${url.slice(0, 200)}' is not an absolute URL`);
    }
    if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')
      throw new OutboundError(`only http(s) URLs are called, not ${parsed.protocol}`);
    const host = parsed.hostname.replace(/^\[|\]$/g, '');
    if (isIP(host)) {
      const refusal = this.refusal(host, host, parsed.port || (parsed.protocol === 'https:' ? 443 : 80));
      if (refusal) throw refusal;
    }
    return parsed;
  }

  async close(): Promise<void> {
    await this.agentMade?.close();
  }
}

/** Whether an outbound call may not reach `address` (metadata and unroutable ones never; private ones unless allowed). */
export function isRefusedAddress(address: string, allowPrivate: boolean): boolean {
  const kind = addressKind(address);
  return kind !== 'public' && !(kind === 'private' && allowPrivate);
}
