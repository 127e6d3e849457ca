import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { RequestContext } from '../../context/request-context';
import { fhirError } from '../../fhir/errors';
import { listProjectJobs } from '../../jobs/admin-view';
import type { JobQueue } from '../../jobs/queue';

/**
 * `GET /admin/jobs[?kind=&_count=]`: the project's newest background jobs, for its administrators
 * (and operators, in the project X-Project names). JSON `{ jobs: [...] }`; 403 for anyone else.
 */
export function registerAdminRoutes(
  app: FastifyInstance,
  deps: { jobs: JobQueue; contextOf: (request: FastifyRequest) => RequestContext },
): void {
  app.get('/admin/jobs', async (request, reply) => {
    const query = request.query as { kind?: string; _count?: string };
    const limit = query._count === undefined ? undefined : Number(query._count);
    if (limit !== undefined && (!Number.isInteger(limit) || limit < 1))
      throw fhirError('ERR_PARAM_VALUE', {
        name: '_count',
        type: 'positiveInt',
        value: String(query._count).slice(0, 40),
      });
    const jobs = await listProjectJobs(deps.jobs, { kind: query.kind, limit }, deps.contextOf(request));
    return reply.header('cache-control', 'no-store').type('application/json').send({ jobs });
  });
}
