/**
 * The few ways the two backends' DDL differs, so a migration declares its tables once. Each value
 * is what today's schema already says on that backend: a migration that ran must mean the same on a
 * new database, so these never change (a new type difference gets a new member).
 */
export interface Dialect {
  name: 'sqlite' | 'postgres';
  /** An instant (resource_versions.last_updated): ISO text on SQLite. */
  timestamp: string;
  /** A flag (resources.deleted): 0/1 on SQLite. */
  bool: string;
  /** A 64-bit integer (row ids, change marks); SQLite's INTEGER is one. */
  bigint: string;
  /** A float (the index's number and quantity bounds). */
  real: string;
  /** Text that compares byte-wise, so a prefix search can be a range over an index (PostgreSQL's COLLATE "C"). */
  bytewiseText: string;
  /** After a table keyed by its primary key alone: SQLite stores it as that key's B-tree (WITHOUT ROWID). */
  keyedTable: string;
}

export const SQLITE: Dialect = {
  name: 'sqlite',
  timestamp: 'TEXT',
  bool: 'INTEGER',
  bigint: 'INTEGER',
  real: 'REAL',
  bytewiseText: 'TEXT',
  keyedTable: ' WITHOUT ROWID',
};

export const POSTGRES: Dialect = {
  name: 'postgres',
  timestamp: 'TIMESTAMPTZ',
  bool: 'BOOLEAN',
  bigint: 'BIGINT',
  real: 'DOUBLE PRECISION',
  bytewiseText: 'TEXT COLLATE "C"',
  keyedTable: '',
};

/** One numbered step of the schema, run once per database, in order, in a transaction of its own. */
export interface Migration {
  /** Its number: the file's, and what `schema_migrations` records once it ran. */
  version: number;
  /** The statements, `;`-separated, on the dialect's backend; '' where that backend has nothing to do. */
  up(d: Dialect): string;
}
