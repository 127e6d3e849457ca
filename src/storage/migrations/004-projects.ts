import { INDEX_KINDS, INDEX_TABLES, type IndexTable } from '../index-schema';
import { columnType } from './002-search-index';
import type { Dialect, Migration } from './dialect';

/**
 * Projects: every row belongs to one (the rows of before to the default project), and a resource's
 * key is (project, type, id). The backends differ in how: SQLite cannot change a primary key, so
 * its WITHOUT ROWID tables are rebuilt with their new keys; PostgreSQL alters them in place.
 */
export const projects: Migration = {
  version: 4,
  up: (d) =>
    d.name === 'postgres'
      ? `${POSTGRES_TABLES}\n   ${projectIndex(d)}\n   ${POSTGRES_NO_DEFAULTS}`
      : `${SQLITE_TABLES}\n   ${projectIndex(d)}`,
};

const SQLITE_TABLES = `CREATE TABLE resources_p (
     project TEXT NOT NULL, type TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL, deleted INTEGER NOT NULL,
     url TEXT, canonical_version TEXT, seq INTEGER NOT NULL, rid INTEGER,
     PRIMARY KEY (project, type, id)
   ) WITHOUT ROWID;
   INSERT INTO resources_p SELECT 'default', type, id, version, deleted, url, canonical_version, seq, rid FROM resources;
   DROP TABLE resources;
   ALTER TABLE resources_p RENAME TO resources;
   CREATE UNIQUE INDEX resources_by_rid ON resources (rid);
   CREATE INDEX resources_by_url ON resources (project, type, url) WHERE url IS NOT NULL;
   CREATE INDEX resources_by_seq ON resources (project, type, seq);
   CREATE TABLE resource_versions_p (
     project TEXT NOT NULL, type TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL,
     last_updated TEXT NOT NULL, content TEXT,
     PRIMARY KEY (project, type, id, version)
   ) WITHOUT ROWID;
   INSERT INTO resource_versions_p SELECT 'default', type, id, version, last_updated, content FROM resource_versions;
   DROP TABLE resource_versions;
   ALTER TABLE resource_versions_p RENAME TO resource_versions;
   CREATE INDEX resource_versions_by_time ON resource_versions (project, last_updated);
   CREATE INDEX resource_versions_by_type_time ON resource_versions (project, type, last_updated);
   CREATE TABLE change_marks_p (project TEXT NOT NULL, type TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (project, type)) WITHOUT ROWID;
   INSERT INTO change_marks_p SELECT 'default', type, seq FROM change_marks;
   DROP TABLE change_marks;
   ALTER TABLE change_marks_p RENAME TO change_marks;`;

const POSTGRES_TABLES = `ALTER TABLE resources ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
   ALTER TABLE resources DROP CONSTRAINT resources_pkey;
   ALTER TABLE resources ADD PRIMARY KEY (project, type, id);
   DROP INDEX resources_by_url;
   DROP INDEX resources_by_seq;
   CREATE INDEX resources_by_url ON resources (project, type, url) WHERE url IS NOT NULL;
   CREATE INDEX resources_by_seq ON resources (project, type, seq);
   ALTER TABLE resource_versions ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
   ALTER TABLE resource_versions DROP CONSTRAINT resource_versions_pkey;
   ALTER TABLE resource_versions ADD PRIMARY KEY (project, type, id, version);
   DROP INDEX resource_versions_by_time;
   DROP INDEX resource_versions_by_type_time;
   CREATE INDEX resource_versions_by_time ON resource_versions (project, last_updated);
   CREATE INDEX resource_versions_by_type_time ON resource_versions (project, type, last_updated);
   ALTER TABLE change_marks ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
   ALTER TABLE change_marks DROP CONSTRAINT change_marks_pkey;
   ALTER TABLE change_marks ADD PRIMARY KEY (project, type);`;

/** The rows of before were given the default project by a column default; new rows always name theirs. */
const POSTGRES_NO_DEFAULTS = `ALTER TABLE resources ALTER COLUMN project DROP DEFAULT;
   ALTER TABLE resource_versions ALTER COLUMN project DROP DEFAULT;
   ALTER TABLE change_marks ALTER COLUMN project DROP DEFAULT;
   ${INDEX_KINDS.map((kind) => `ALTER TABLE ${INDEX_TABLES[kind].name} ALTER COLUMN project DROP DEFAULT;`).join('\n')}`;

/**
 * Every index row belongs to the project of its resource (rows of before are the default
 * project's), and lookups lead with the project, so one project's search reads only its own rows
 * and a reference `Patient/x` is matched within the project it was written in.
 */
function projectIndex(d: Dialect): string {
  const statements: string[] = [];
  for (const kind of INDEX_KINDS) {
    const table = INDEX_TABLES[kind] as IndexTable;
    statements.push(`ALTER TABLE ${table.name} ADD COLUMN project ${columnType(d, 'text')} NOT NULL DEFAULT 'default'`);
    table.lookups.forEach((cols, i) => {
      statements.push(`DROP INDEX ${table.name}_l${i}`);
      statements.push(`CREATE INDEX ${table.name}_p${i} ON ${table.name} (project, type, param, ${cols.join(', ')})`);
    });
  }
  return statements.map((s) => `${s};`).join('\n');
}
