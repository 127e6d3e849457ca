import type { Migration } from './dialect';

/** Versions, the current version of each resource, and a change mark per type. */
export const resources: Migration = {
  version: 1,
  up: (d) => `CREATE TABLE resource_versions (
     type TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL,
     last_updated ${d.timestamp} NOT NULL, content TEXT,
     PRIMARY KEY (type, id, version)
   )${d.keyedTable};
   CREATE TABLE resources (
     type TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL, deleted ${d.bool} NOT NULL,
     url TEXT, canonical_version TEXT, seq ${d.bigint} NOT NULL,
     PRIMARY KEY (type, id)
   )${d.keyedTable};
   CREATE INDEX resources_by_url ON resources (type, url) WHERE url IS NOT NULL;
   CREATE INDEX resources_by_seq ON resources (type, seq);
   CREATE TABLE change_marks (type TEXT PRIMARY KEY, seq ${d.bigint} NOT NULL)${d.keyedTable};`,
};
