import type { Migration } from './dialect';

/** The admin view lists a project's newest jobs. */
export const jobsByProject: Migration = {
  version: 7,
  up: () => 'CREATE INDEX jobs_by_project ON jobs (project, created_at)',
};
