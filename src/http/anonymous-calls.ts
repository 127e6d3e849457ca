import type { FastifyInstance } from 'fastify';
import type { AnonymousCalls } from '../bots/protocol';

/**
 * A bot's calls to this server's routes outside the REST core (the CapabilityStatement, SMART
 * discovery), answered in-process. They carry a bearer token no one holds, never no token: a
 * server run without AUTH_TOKENS takes a request without one for an operator, and a bot must
 * get only what anyone may read. Public routes answer; every other is 401.
 */
const NOBODY = 'Bearer bot-anonymous-call';

export function anonymousCalls(app: FastifyInstance): AnonymousCalls {
  return async (request) => {
    const headers: Record<string, string> = { ...(request.headers ?? {}), authorization: NOBODY };
    delete headers['x-project'];
    const res = await app.inject({
      method: request.method as 'GET',
      url: request.pathAndQuery,
      headers,
      payload: request.body,
    });
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(res.headers))
      if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : String(value);
    return { status: res.statusCode, headers: out, text: res.body };
  };
}
