import { CHANGES_NOTICE_CHANNEL } from '../change-watch';
import type { Migration } from './dialect';

/**
 * Every process learns of stored content changing (FRESHNESS_CHECK=notify, src/storage/change-watch.ts):
 * NOTIFY from the statement that moves a change mark, delivered when its transaction commits (one
 * per transaction: PostgreSQL folds identical notices). PostgreSQL only: over one SQLite file
 * other processes' commits are found by PRAGMA data_version (see SqliteStore's `changes`).
 */
export const changeMarksNotify: Migration = {
  version: 11,
  up: (d) =>
    d.name !== 'postgres'
      ? ''
      : `CREATE FUNCTION ${CHANGES_NOTICE_CHANNEL}_notify() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN PERFORM pg_notify('${CHANGES_NOTICE_CHANNEL}', ''); RETURN NULL; END $$;
   CREATE TRIGGER change_marks_moved AFTER INSERT OR UPDATE ON change_marks FOR EACH STATEMENT EXECUTE FUNCTION ${CHANGES_NOTICE_CHANNEL}_notify();`,
};
