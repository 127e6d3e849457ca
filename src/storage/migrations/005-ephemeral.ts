import type { Migration } from './dialect';

/** Short-lived shared state (authorization codes, replay marks, signing keys, password hashes): src/storage/ephemeral.ts. */
export const ephemeral: Migration = {
  version: 5,
  up: (d) => `CREATE TABLE ephemeral (
  kind TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, expires_at BIGINT NOT NULL,
  PRIMARY KEY (kind, key)
)${d.keyedTable};
   CREATE INDEX ephemeral_by_expiry ON ephemeral (expires_at);`,
};
