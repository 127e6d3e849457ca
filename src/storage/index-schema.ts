/**
 * The search index, one schema for both backends: a table per kind of value, keyed by the
 * resource's integer row id (`resources.rid`), the resource type and the search parameter's name.
 * Rows describe the current version of a resource only; they are written (and removed) in the
 * same database transaction as the version they describe.
 *
 * `grp` ties the components of one composite value together (the n-th element the composite
 * parameter's expression selected); it is 0 for every other row.
 */

export type ColumnKind = 'text' | 'int' | 'real';

export interface IndexTable<K extends string = string> {
  /** The table's name: `search_<kind>`. */
  name: string;
  /** The value columns, in insert order (type, param, rid and grp come first). */
  columns: { name: K; kind: ColumnKind }[];
  /** Lookup indexes over the value columns (each preceded by type, param). */
  lookups: K[][];
}

export interface StringRow {
  param: string;
  grp: number;
  norm: string;
  exact: string;
}
export interface TokenRow {
  param: string;
  grp: number;
  system: string | null;
  code: string | null;
  text: string | null;
}
export interface DateRow {
  param: string;
  grp: number;
  low: number;
  high: number;
}
export interface NumberRow {
  param: string;
  grp: number;
  low: number;
  high: number;
}
export interface QuantityRow {
  param: string;
  grp: number;
  system: string | null;
  code: string | null;
  unit: string | null;
  low: number;
  high: number;
  canon_code: string | null;
  canon_low: number | null;
  canon_high: number | null;
}
export interface ReferenceRow {
  param: string;
  grp: number;
  target_type: string | null;
  target_id: string | null;
  url: string | null;
  version: string | null;
}
export interface UriRow {
  param: string;
  grp: number;
  value: string;
}

/** Every index row of one resource, by table. */
export interface IndexRows {
  string: StringRow[];
  token: TokenRow[];
  date: DateRow[];
  number: NumberRow[];
  quantity: QuantityRow[];
  reference: ReferenceRow[];
  uri: UriRow[];
}

export type IndexKind = keyof IndexRows;

export function emptyIndexRows(): IndexRows {
  return { string: [], token: [], date: [], number: [], quantity: [], reference: [], uri: [] };
}

/**
 * The index tables as migration 2 made them (`lookups` as migration 4 rebuilt them; migration 9 dropped
 * some): migrations/002-search-index.ts and 004-projects.ts read these, so they never change.
 */
export const INDEX_TABLES: {
  [K in IndexKind]: IndexTable<Exclude<keyof IndexRows[K][number], 'param' | 'grp'> & string>;
} = {
  string: {
    name: 'search_string',
    columns: [
      { name: 'norm', kind: 'text' },
      { name: 'exact', kind: 'text' },
    ],
    lookups: [['norm'], ['exact']],
  },
  token: {
    name: 'search_token',
    columns: [
      { name: 'system', kind: 'text' },
      { name: 'code', kind: 'text' },
      { name: 'text', kind: 'text' },
    ],
    lookups: [['code', 'system'], ['system']],
  },
  date: {
    name: 'search_date',
    columns: [
      { name: 'low', kind: 'int' },
      { name: 'high', kind: 'int' },
    ],
    lookups: [['low', 'high'], ['high']],
  },
  number: {
    name: 'search_number',
    columns: [
      { name: 'low', kind: 'real' },
      { name: 'high', kind: 'real' },
    ],
    lookups: [['low', 'high']],
  },
  quantity: {
    name: 'search_quantity',
    columns: [
      { name: 'system', kind: 'text' },
      { name: 'code', kind: 'text' },
      { name: 'unit', kind: 'text' },
      { name: 'low', kind: 'real' },
      { name: 'high', kind: 'real' },
      { name: 'canon_code', kind: 'text' },
      { name: 'canon_low', kind: 'real' },
      { name: 'canon_high', kind: 'real' },
    ],
    lookups: [['low'], ['canon_code', 'canon_low']],
  },
  reference: {
    name: 'search_reference',
    columns: [
      { name: 'target_type', kind: 'text' },
      { name: 'target_id', kind: 'text' },
      { name: 'url', kind: 'text' },
      { name: 'version', kind: 'text' },
    ],
    lookups: [['target_id', 'target_type'], ['url']],
  },
  uri: { name: 'search_uri', columns: [{ name: 'value', kind: 'text' }], lookups: [['value']] },
};

export const INDEX_KINDS = Object.keys(INDEX_TABLES) as IndexKind[];

/** The INSERT of one row into a table, with `?` placeholders: project, type, param, rid, grp, then the values. */
export function indexInsertSql(kind: IndexKind): string {
  const table = INDEX_TABLES[kind] as IndexTable;
  const names = ['project', 'type', 'param', 'rid', 'grp', ...table.columns.map((c) => c.name)];
  return `INSERT INTO ${table.name} (${names.join(', ')}) VALUES (${names.map(() => '?').join(', ')})`;
}
