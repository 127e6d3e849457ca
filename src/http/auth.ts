import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { fhirError } from '../fhir/errors';
import { sendError } from './errors';
import { isCapabilityStatementMode } from './routes/metadata';
import { operatorIn, type Principal } from '../auth/principal';
import { DEFAULT_PROJECT } from '../storage/store';

declare module 'fastify' {
  interface FastifyRequest {
    /** Who is calling, set by the auth hook; absent means the operator of the default project. */
    principal?: Principal;
  }
  interface FastifyContextConfig {
    /** Served to anyone, without a token (discovery, sign-in, health). */
    public?: boolean;
    /** A page for people: HTML whatever Accept says. */
    html?: boolean;
  }
}

export interface AuthOptions {
  /** AUTH_TOKENS: the operators' tokens. */
  tokens: string[];
  base: string;
  /** The principal of an access token this server issued; undefined when it is not one. */
  verify?: (token: string) => Promise<Principal | undefined>;
  /** Whether a project exists (an operator's X-Project must name one). */
  projectExists?: (id: string) => Promise<boolean>;
}

const PROJECT_HEADER = 'x-project';

/**
 * Who each request acts for, from its bearer token:
 * - an AUTH_TOKENS token: an operator, in the default project or the one X-Project names;
 * - an access token this server issued (OAuth, src/auth/oauth.ts): that member of that project;
 * - no token: refused (401), unless the server runs without AUTH_TOKENS, where the caller is an
 *   operator (a loopback development server; the configuration refuses that elsewhere).
 * Tokens are compared as SHA-256 digests in constant time, and every configured token is compared,
 * so timing tells nothing about which or how much matched. The CapabilityStatement, discovery
 * documents, sign-in and the routes marked public need no token.
 */
export function registerAuth(app: FastifyInstance, options: AuthOptions): void {
  const digests = options.tokens.map(digest);
  const metadataPath = `${options.base}/metadata`;
  const challenge = { 'www-authenticate': 'Bearer realm="fhir"' };

  const projectOf = async (request: FastifyRequest): Promise<string> => {
    const header = request.headers[PROJECT_HEADER];
    if (header === undefined) return DEFAULT_PROJECT;
    const project = String(header).trim();
    if (project === DEFAULT_PROJECT) return project;
    // Asked each time (operators only send it): a project deleted by any process is gone at once.
    if (!/^[A-Za-z0-9\-.]{1,64}$/.test(project) || !(await options.projectExists?.(project))) {
      throw fhirError('ERR_PROJECT_HEADER', { project: project.slice(0, 64) });
    }
    return project;
  };

  // Callback style: this runs on every request, and the usual case (a server without tokens, no
  // X-Project) is decided without a promise.
  app.addHook('onRequest', (request, reply, done) => {
    if (isPublic(request, metadataPath)) return done();
    if (
      digests.length === 0 &&
      request.headers.authorization === undefined &&
      request.headers[PROJECT_HEADER] === undefined
    ) {
      request.principal = operatorIn(DEFAULT_PROJECT);
      return done();
    }
    authenticate(request, reply).then(() => {
      if (!reply.sent) done();
    }, done);
  });

  const authenticate = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const header = request.headers.authorization;
    if (header === undefined && digests.length === 0) {
      request.principal = operatorIn(await projectOf(request));
      return;
    }
    const match = typeof header === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match) {
      sendError(reply, fhirError('ERR_AUTH_MISSING', {}, { headers: challenge }));
      return;
    }
    const presented = digest(match[1]);
    let operator = false;
    for (const known of digests) operator = timingSafeEqual(presented, known) || operator;
    if (operator) {
      request.principal = operatorIn(await projectOf(request));
      return;
    }
    const principal = match[1].includes('.') ? await options.verify?.(match[1]) : undefined;
    if (!principal) {
      sendError(
        reply,
        fhirError(
          'ERR_AUTH_INVALID',
          {},
          { headers: { 'www-authenticate': 'Bearer realm="fhir", error="invalid_token"' } },
        ),
      );
      return;
    }
    const asked = request.headers[PROJECT_HEADER];
    if (asked !== undefined && String(asked).trim() !== principal.project)
      throw fhirError('ERR_PROJECT_HEADER', { project: String(asked).slice(0, 64) });
    request.principal = principal;
  };
}

/**
 * Routes marked public, and of the FHIR API only the CapabilityStatement itself: other
 * `metadata?mode=` answers (mode=terminology lists every stored code system) describe content,
 * and content needs a token.
 */
function isPublic(request: FastifyRequest, metadataPath: string): boolean {
  if (request.routeOptions.config?.public === true) return true;
  if (request.method !== 'GET' && request.method !== 'HEAD') return false;
  const path = request.url.split('?')[0].replace(/\/+$/, '');
  if (path !== metadataPath) return false;
  return isCapabilityStatementMode((request.query as { mode?: unknown } | undefined)?.mode);
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}
