import { INDEX_KINDS, INDEX_TABLES, type ColumnKind, type IndexTable } from '../index-schema';
import type { Dialect, Migration } from './dialect';

/**
 * Search: every resource gets an integer row id that its index rows are keyed by (a sequence on
 * PostgreSQL; on SQLite the rows of before are numbered in the order they were written), the
 * settings table, and the index tables.
 */
export const searchIndex: Migration = {
  version: 2,
  up: (d) => `${d.name === 'postgres' ? POSTGRES_ROW_IDS : SQLITE_ROW_IDS}
   CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)${d.keyedTable};
   ${indexTableDdl(d)}`,
};

const SQLITE_ROW_IDS = `ALTER TABLE resources ADD COLUMN rid INTEGER;
   CREATE TEMP TABLE rid_map AS SELECT type, id FROM resources ORDER BY seq;
   CREATE UNIQUE INDEX temp.rid_map_key ON rid_map (type, id);
   UPDATE resources SET rid = (SELECT m.rowid FROM rid_map m WHERE m.type = resources.type AND m.id = resources.id);
   DROP TABLE temp.rid_map;
   CREATE UNIQUE INDEX resources_by_rid ON resources (rid);`;

const POSTGRES_ROW_IDS = `CREATE SEQUENCE resource_rid_seq;
   ALTER TABLE resources ADD COLUMN rid BIGINT;
   UPDATE resources SET rid = nextval('resource_rid_seq');
   ALTER TABLE resources ALTER COLUMN rid SET NOT NULL;
   CREATE UNIQUE INDEX resources_by_rid ON resources (rid);`;

/** An index value column's type. */
export function columnType(d: Dialect, kind: ColumnKind): string {
  return kind === 'text' ? d.bytewiseText : kind === 'int' ? d.bigint : d.real;
}

/**
 * The index tables as this migration created them (before projects): read from INDEX_TABLES, whose
 * columns and lookups never change, since migrations that ran must mean the same on a new database.
 * Text columns compare byte-wise on both backends, so a prefix search can be a range over an index.
 */
function indexTableDdl(d: Dialect): string {
  const type = (kind: ColumnKind) => columnType(d, kind);
  const statements: string[] = [];
  for (const kind of INDEX_KINDS) {
    const table = INDEX_TABLES[kind] as IndexTable;
    const columns = table.columns.map((c) => `${c.name} ${type(c.kind)}`).join(', ');
    statements.push(
      `CREATE TABLE ${table.name} (type ${type('text')} NOT NULL, param ${type('text')} NOT NULL, rid ${type('int')} NOT NULL, grp INTEGER NOT NULL, ${columns})`,
    );
    statements.push(`CREATE INDEX ${table.name}_rid ON ${table.name} (rid, param)`);
    table.lookups.forEach((cols, i) =>
      statements.push(`CREATE INDEX ${table.name}_l${i} ON ${table.name} (type, param, ${cols.join(', ')})`),
    );
  }
  return statements.map((s) => `${s};`).join('\n');
}
