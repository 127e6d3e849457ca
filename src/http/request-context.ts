import type { FastifyRequest } from 'fastify';
import { parsePrefer, type RequestContext } from '../context/request-context';
import { DEFAULT_PROJECT } from '../context/projects';
import { operatorIn } from '../auth/principal';

/** The context of an HTTP request (principal, project, deadline, base URL, Prefer): what the REST core is given. */
export function requestContext(request: FastifyRequest, baseUrl: string, timeoutMs: number): RequestContext {
  const prefer = request.headers.prefer;
  // Set by the authentication hook; a server without authentication serves everyone as an operator of the default project.
  const principal = request.principal ?? operatorIn(DEFAULT_PROJECT);
  return {
    requestId: request.id,
    project: principal.project,
    principal,
    log: request.log,
    deadline: Date.now() + timeoutMs,
    baseUrl,
    prefer: parsePrefer(Array.isArray(prefer) ? prefer.join(', ') : prefer),
    validateOnWrite: headerText(request.headers['x-validate-on-write']),
  };
}

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}
