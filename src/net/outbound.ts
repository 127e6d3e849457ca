import { lookup } from 'node:dns';
import { createRequire } from 'node:module';
import { isIP } from 'node:net';
import type * as Undici from 'undici';

// undici is loaded with the first outbound request, not at start (it is a tenth of the start-up).
const require = createRequire(import.meta.url);
let undici: typeof Undici | undefined;
const loadUndici = (): typeof Undici => (undici ??= require('undici') as typeof Undici);

/**
 * Requests the server makes to addresses users give it (a client's jwksUri, subscriptions' rest-hook endpoints, a bot's fetch):
 * never to loopback, link-local or private addresses (where the server's own neighbours live)
 * unless OUTBOUND_ALLOW_PRIVATE=true, checked on the address actually connected to (a name that
 * resolves to 127.0.0.1 is refused too); bounded in time and in size.
 */

export interface OutboundOptions {
  allowPrivate: boolean;
  timeoutMs?: number;
  maxBytes?: number;
}

export class OutboundError extends Error {}

export interface FetchedText {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export class Outbound {
  private agentMade: Undici.Agent | undefined;
  private readonly timeoutMs: number;
  private readonly maxBytes: number;

  constructor(private readonly options: OutboundOptions) {
    this.timeoutMs = options.timeoutMs ?? 5000;
    this.maxBytes = options.maxBytes ?? 256 * 1024;
  }

  /** The connection pool, made with the first request. */
  private get agent(): Undici.Agent {
    this.agentMade ??= new (loadUndici().Agent)({
      connect: {
        timeout: this.timeoutMs,
        lookup: (hostname, lookupOptions, callback) => {
          lookup(hostname, { ...lookupOptions, all: true }, (err, addresses) => {
            if (err) return callback(err, '', 4);
            const list = Array.isArray(addresses) ? addresses : [{ address: String(addresses), family: 4 }];
            const refused = list.find((a) => isRefusedAddress(a.address, this.options.allowPrivate));
            if (refused) return callback(new OutboundError(`${hostname} is a private address (${refused.address}); set OUTBOUND_ALLOW_PRIVATE=true to allow it`), '', 4);
            if (lookupOptions.all) return callback(null, list as never, 4);
            return callback(null, list[0].address, list[0].family);
          });
        },
      },
    });
    return this.agentMade;
  }

  async getText(url: string): Promise<FetchedText> {
    return this.send({ method: 'GET', url });
  }

  /**
   * One request (no redirects followed: undici's request never does, a 3xx is an answer like any
   * other), bounded in time and in the size of the answer read.
   */
  async send(call: { method: string; url: string; headers?: Record<string, string>; body?: string }): Promise<FetchedText> {
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
   * unless private addresses are allowed, neither a private literal nor a name resolving to one.
   * A name that does not resolve now is accepted (it is checked again at each connection).
   */
  async check(url: string): Promise<void> {
    this.refuseLiteral(url);
    const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
    if (isIP(host)) return;
    const addresses = await new Promise<{ address: string }[]>((resolve) => lookup(host, { all: true }, (err, list) => resolve(err ? [] : list)));
    const refused = addresses.find((a) => isRefusedAddress(a.address, this.options.allowPrivate));
    if (refused) throw new OutboundError(`${host} is a private address (${refused.address}); set OUTBOUND_ALLOW_PRIVATE=true to allow it`);
  }

  private refuseLiteral(url: string): void {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new OutboundError(`'${url.slice(0, 200)}' is not an absolute URL`);
    }
    if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new OutboundError(`only http(s) URLs are called, not ${parsed.protocol}`);
    // A literal address never goes through the lookup: check it here.
    const host = parsed.hostname.replace(/^\[|\]$/g, '');
    if (isIP(host) && isRefusedAddress(host, this.options.allowPrivate)) {
      throw new OutboundError(`${host} is a private address; set OUTBOUND_ALLOW_PRIVATE=true to allow it (cloud metadata addresses never are)`);
    }
  }

  async close(): Promise<void> {
    await this.agentMade?.close();
  }
}

/** Cloud metadata services: refused even when private addresses are allowed (they hand out credentials). */
const METADATA_ADDRESSES = new Set(['169.254.169.254', 'fd00:ec2::254', '::ffff:169.254.169.254']);

export function isRefusedAddress(address: string, allowPrivate: boolean): boolean {
  return METADATA_ADDRESSES.has(address.toLowerCase()) || (!allowPrivate && isPrivateAddress(address));
}

/** Loopback, private (RFC 1918, unique local), link-local, unspecified, CGNAT and mapped forms of them. */
export function isPrivateAddress(address: string): boolean {
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  if (isIP(v4) === 4) {
    const [a, b] = v4.split('.').map(Number);
    return a === 0 || a === 10 || a === 127 || (a === 169 && b === 254) || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 100 && b >= 64 && b <= 127);
  }
  const v6 = address.toLowerCase();
  return v6 === '::' || v6 === '::1' || v6.startsWith('fc') || v6.startsWith('fd') || v6.startsWith('fe80');
}
