import type Database from 'better-sqlite3';
import { yieldIfHeld } from '../../context/budget';
import { INDEX_KINDS, INDEX_TABLES, indexInsertSql, type IndexRows } from '../index-schema';
import { optionalVersion, versionFromRow, type StoreReader, type VersionRow } from '../store';

/** The current version of each resource, with its content. */
export const CURRENT = `SELECT v.project, v.type, v.id, v.version, v.last_updated, v.content
  FROM resources r JOIN resource_versions v ON v.project = r.project AND v.type = r.type AND v.id = r.id AND v.version = r.version`;

export type ReadStatements = ReturnType<typeof readStatements>;
export type WriteStatements = ReturnType<typeof writeStatements>;

export function readStatements(db: Database.Database) {
  return {
    read: db.prepare(`${CURRENT} WHERE r.project = ? AND r.type = ? AND r.id = ?`),
    readVersion: db.prepare(
      'SELECT * FROM resource_versions WHERE project = ? AND type = ? AND id = ? AND version = ?',
    ),
    history: db.prepare(
      'SELECT * FROM resource_versions WHERE project = ? AND type = ? AND id = ? ORDER BY version DESC',
    ),
  };
}

export function writeStatements(db: Database.Database) {
  return {
    current: db.prepare('SELECT rid, version, deleted FROM resources WHERE project = ? AND type = ? AND id = ?'),
    nextRid: db.prepare('SELECT COALESCE(MAX(rid), 0) + 1 AS rid FROM resources'),
    insertVersion: db.prepare(
      'INSERT INTO resource_versions (project, type, id, version, last_updated, content, method) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ),
    bumpMark: db.prepare(
      `INSERT INTO change_marks (project, type, seq) VALUES (?, ?, 1)
       ON CONFLICT (project, type) DO UPDATE SET seq = seq + 1 RETURNING seq`,
    ),
    upsertCurrent: db.prepare(
      `INSERT INTO resources (project, type, id, version, deleted, url, canonical_version, seq, rid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (project, type, id) DO UPDATE SET version = excluded.version, deleted = excluded.deleted,
         url = excluded.url, canonical_version = excluded.canonical_version, seq = excluded.seq`,
    ),
    deleteIndex: INDEX_KINDS.map((kind) => db.prepare(`DELETE FROM ${INDEX_TABLES[kind].name} WHERE rid = ?`)),
    insertIndex: Object.fromEntries(INDEX_KINDS.map((kind) => [kind, db.prepare(indexInsertSql(kind))])) as Record<
      keyof IndexRows,
      Database.Statement
    >,
    getSetting: db.prepare('SELECT value FROM settings WHERE key = ?'),
    setSetting: db.prepare(
      'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
    ),
  };
}

export function readerOf(statements: ReadStatements, db: Database.Database): StoreReader {
  return {
    read: async (project, type, id) => {
      await yieldIfHeld();
      return optionalVersion(statements.read.get(project, type, id) as VersionRow | undefined);
    },
    readVersion: async (project, type, id, versionId) => {
      await yieldIfHeld();
      return optionalVersion(statements.readVersion.get(project, type, id, versionId) as VersionRow | undefined);
    },
    history: async (project, type, id) => {
      await yieldIfHeld();
      return (statements.history.all(project, type, id) as VersionRow[]).map((row) => versionFromRow(row));
    },
    query: async <R extends object>(sql: string, params: readonly unknown[]) => {
      await yieldIfHeld();
      return cachedStatement(db, sql).all(...params) as R[];
    },
  };
}

/** Statements the search layer builds repeat in shape; preparing each text once saves the parse. */
const statementCache = new WeakMap<Database.Database, Map<string, Database.Statement>>();
const STATEMENT_CACHE_SIZE = 500;

/** Runs one statement on a connection: its rows when it answers any (a SELECT, a RETURNING). */
export const runOn = (db: Database.Database, sql: string, params: unknown[]): Record<string, unknown>[] => {
  const statement = cachedStatement(db, sql);
  return statement.reader ? (statement.all(...params) as Record<string, unknown>[]) : (statement.run(...params), []);
};

export function cachedStatement(db: Database.Database, sql: string): Database.Statement {
  let cache = statementCache.get(db);
  if (!cache) {
    cache = new Map();
    statementCache.set(db, cache);
  }
  let statement = cache.get(sql);
  if (!statement) {
    statement = db.prepare(sql);
    if (cache.size >= STATEMENT_CACHE_SIZE) cache.delete(cache.keys().next().value as string);
    cache.set(sql, statement);
  }
  return statement;
}
