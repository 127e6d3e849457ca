import { fhirError, isFhirError } from '../../fhir/errors';
import { sendError } from '../errors';
import type { PublicRoutes } from '../public-routes';

/** A readiness check: resolves when its part works, throws (a FhirError, or anything) when not. */
export type ReadinessCheck = () => Promise<void>;

/**
 * Probes for an orchestrator, without a token: `/healthz` answers while the process can answer
 * at all; `/readyz` runs every readiness check (storage reachable, content loaded) and answers
 * 503 with an OperationOutcome naming the first that fails.
 */
export function registerHealthRoutes(routes: PublicRoutes, checks: Record<string, ReadinessCheck>): void {
  routes.get('/healthz', (_request, reply) => {
    reply.header('cache-control', 'no-store');
    return { status: 'up' };
  });
  routes.get('/readyz', async (_request, reply) => {
    reply.header('cache-control', 'no-store');
    for (const [name, check] of Object.entries(checks)) {
      try {
        await check();
      } catch (err) {
        const failure = isFhirError(err)
          ? err
          : fhirError('ERR_SERVER_NOT_READY', {
              check: name,
              reason: err instanceof Error ? err.message.slice(0, 200) : String(err).slice(0, 200),
            });
        return sendError(reply, failure);
      }
    }
    return { status: 'ready', checks: Object.keys(checks) };
  });
}
