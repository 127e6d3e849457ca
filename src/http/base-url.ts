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
