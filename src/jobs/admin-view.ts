import type { RequestContext } from '../context/request-context';
import { fhirError } from '../fhir/errors';
import type { JobSummary } from './job-summary';
import type { JobQueue } from './queue';

/**
 * The project's background work as its administrators see it (the console's Jobs view): the
 * newest jobs with their state and progress, who asked, and the last error. Inputs and results
 * stay out (an export's manifest is for whoever kicked it off, through its status URL).
 */
export async function listProjectJobs(
  jobs: JobQueue,
  query: { kind?: string; limit?: number },
  ctx: RequestContext,
): Promise<JobSummary[]> {
  if (!ctx.principal.admin)
    throw fhirError('ERR_AUTH_FORBIDDEN', { reason: "only the project's administrators see its jobs" });
  const views = await jobs.list(ctx.project, query);
  return views.map((job) => ({
    id: job.id,
    kind: job.kind,
    state: job.state,
    attempts: job.attempts,
    progress: job.progress,
    lastError: job.lastError,
    createdAt: new Date(job.createdAt).toISOString(),
    finishedAt: job.finishedAt === undefined ? undefined : new Date(job.finishedAt).toISOString(),
    requestedBy: job.principal.operator
      ? 'operator'
      : [
          job.principal.client && `ClientApplication/${job.principal.client}`,
          job.principal.user && `User/${job.principal.user}`,
        ]
          .filter(Boolean)
          .join(', ') || 'unknown',
  }));
}
