import type { Migration } from './dialect';

/** History: type- and system-level history read versions by time. */
export const historyByTime: Migration = {
  version: 3,
  up: () => `CREATE INDEX resource_versions_by_time ON resource_versions (last_updated);
   CREATE INDEX resource_versions_by_type_time ON resource_versions (type, last_updated);`,
};
