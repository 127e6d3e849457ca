/**
 * One background job as the administrators' view shows it (`GET /admin/jobs`, the console's Jobs
 * table). No imports: the console's browser code shares this type.
 */
export interface JobSummary {
  id: string;
  kind: string;
  /** queued, running, done or dead. */
  state: string;
  attempts: number;
  progress?: string;
  lastError?: string;
  createdAt: string;
  finishedAt?: string;
  /** Who asked: `operator`, or the client and user of the token. */
  requestedBy: string;
}
