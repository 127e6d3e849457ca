import { resources } from './001-resources';
import { searchIndex } from './002-search-index';
import { historyByTime } from './003-history-by-time';
import { projects } from './004-projects';
import { ephemeral } from './005-ephemeral';
import { jobs } from './006-jobs';
import { jobsByProject } from './007-jobs-by-project';
import { jobsNotify } from './008-jobs-notify';
import { leanerLookups } from './009-leaner-lookups';
import { versionMethod } from './010-version-method';
import { changeMarksNotify } from './011-change-marks-notify';
import type { Migration } from './dialect';

export { POSTGRES, SQLITE } from './dialect';
export { runMigrations, type MigrationTarget, type MigrationSession } from './runner';

/**
 * The schema of both backends, in the order it grew. A migration that ran is never edited (a
 * database that ran it would not run it again): a change is a new file with the next number.
 */
export const MIGRATIONS: readonly Migration[] = [
  resources,
  searchIndex,
  historyByTime,
  projects,
  ephemeral,
  jobs,
  jobsByProject,
  jobsNotify,
  leanerLookups,
  versionMethod,
  changeMarksNotify,
];

/** The version a database has once every migration ran. */
export const LATEST_VERSION = MIGRATIONS[MIGRATIONS.length - 1].version;
