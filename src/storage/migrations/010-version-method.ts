import type { Migration } from './dialect';

/** How a client asked for each version (history's request.method); null for versions before. */
export const versionMethod: Migration = {
  version: 10,
  up: () => 'ALTER TABLE resource_versions ADD COLUMN method TEXT',
};
