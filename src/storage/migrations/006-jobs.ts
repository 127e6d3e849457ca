import type { Migration } from './dialect';

/** The durable job queue (src/storage/jobs.ts) and bulk export's files (src/storage/bulk.ts). */
export const jobs: Migration = {
  version: 6,
  up: (d) => `CREATE TABLE jobs (
     id ${d.bytewiseText} PRIMARY KEY, kind ${d.bytewiseText} NOT NULL, project ${d.bytewiseText} NOT NULL, principal TEXT NOT NULL, input TEXT NOT NULL,
     state ${d.bytewiseText} NOT NULL, attempts INTEGER NOT NULL, max_attempts INTEGER NOT NULL, run_at BIGINT NOT NULL,
     lease_until BIGINT, worker TEXT, progress TEXT, result TEXT, last_error TEXT,
     created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, finished_at BIGINT
   );
   CREATE INDEX jobs_ready ON jobs (state, run_at);
   CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
   CREATE TABLE bulk_files (
     job_id ${d.bytewiseText} NOT NULL, file ${d.bytewiseText} NOT NULL, part INTEGER NOT NULL, count INTEGER NOT NULL, content TEXT NOT NULL,
     PRIMARY KEY (job_id, file, part)
   );`,
};
