import type { FastifyRequest } from 'fastify';

/**
 * The absolute URL of the FHIR base for one request: every absolute URL the server writes
 * (Location, Bundle fullUrl and links) goes through here. With BASE_URL configured it is that,
 * whatever Host the client sent (a Host header is the client's to choose, and reflecting it lets
 * anyone plant links to a server of theirs in answers others read); without, the request's own
 * scheme and Host, as before.
 */
export type BaseUrlOf = (request: FastifyRequest) => string;

export function baseUrlResolver(options: { baseUrl?: string; basePath: string }): BaseUrlOf {
  const configured = options.baseUrl;
  if (configured !== undefined) return () => configured;
  return (request) => `${request.protocol}://${request.host}${options.basePath}`;
}

/**
 * The token endpoint's URLs a client assertion's `aud` may name (SMART Backend Services). Never
 * the request's Host: whoever sends the request chooses that, and an assertion made for another
 * server (whose token URL the sender names as Host) would pass here. With BASE_URL, its origin's
 * `/oauth2/token`; without, the names of the address the server listens on (a loopback or
 * wildcard address: localhost, 127.0.0.1 and [::1]; a wildcard also the machine's host name), at
 * its port. A server reached by any other name sets BASE_URL.
 */
export function tokenEndpoints(options: {
  baseUrl?: string;
  basePath: string;
  host: string;
  port: number;
  hostname?: string;
}): string[] {
  const path = '/oauth2/token';
  const base = options.baseUrl;
  if (base !== undefined)
    return [
      `${base.endsWith(options.basePath) ? base.slice(0, base.length - options.basePath.length) : new URL(base).origin}${path}`,
    ];
  const wildcard = options.host === '0.0.0.0' || options.host === '::' || options.host === '';
  const loopback = wildcard || options.host === 'localhost' || options.host === '::1' || /^127\./.test(options.host);
  const names = new Set<string>(loopback ? ['localhost', '127.0.0.1', '[::1]'] : []);
  if (!wildcard)
    names.add(options.host.includes(':') && !options.host.startsWith('[') ? `[${options.host}]` : options.host);
  if (wildcard && options.hostname) names.add(options.hostname);
  const ports = options.port === 80 ? ['', ':80'] : [`:${options.port}`];
  return [...names].flatMap((name) => ports.map((port) => `http://${name}${port}${path}`));
}
