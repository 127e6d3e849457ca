import { JOBS_NOTICE_CHANNEL } from '../jobs';
import type { Migration } from './dialect';

/**
 * New jobs wake the idle workers of every process (src/jobs/queue.ts listens): NOTIFY from the
 * inserting statement itself, delivered when its transaction commits; no round trip of its own.
 * PostgreSQL only: SQLite has no NOTIFY, and one SQLite process wakes its own workers (the
 * version is recorded all the same, so the numbers stay one sequence on both backends).
 */
export const jobsNotify: Migration = {
  version: 8,
  up: (d) =>
    d.name !== 'postgres'
      ? ''
      : `CREATE FUNCTION ${JOBS_NOTICE_CHANNEL}_notify() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN PERFORM pg_notify('${JOBS_NOTICE_CHANNEL}', ''); RETURN NULL; END $$;
   CREATE TRIGGER jobs_inserted AFTER INSERT ON jobs FOR EACH STATEMENT EXECUTE FUNCTION ${JOBS_NOTICE_CHANNEL}_notify();`,
};
