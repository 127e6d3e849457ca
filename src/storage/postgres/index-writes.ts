import type pg from 'pg';
import { INDEX_KINDS, INDEX_TABLES, type IndexRows, type IndexTable } from '../index-schema';

const ARRAY_TYPE = { text: 'text[]', int: 'bigint[]', real: 'double precision[]' } as const;

/** Index rows of several resources, each row with the resource's type and row id. */
interface IndexBatch {
  /** Resources whose old rows are removed first. */
  replace: number[];
  rows: { project: string; type: string; rid: number; rows: IndexRows | null }[];
}

/**
 * One statement replaces the index rows of any number of resources in every table: the deletes
 * and the inserts are data-modifying CTEs (the inserts cannot see the rows the deletes remove:
 * one snapshot), and the rows travel as one array per column, so the statement's text never
 * changes. Parameters: $1 the row ids to clear, then per table project[], type[], rid[], param[], grp[],
 * then one array per value column.
 */
const INDEX_WRITE_SQL = (() => {
  let n = 1;
  const parts: string[] = [];
  for (const kind of INDEX_KINDS) {
    const table = INDEX_TABLES[kind] as IndexTable;
    parts.push(`d_${kind} AS (DELETE FROM ${table.name} WHERE rid = ANY($1::bigint[]))`);
    const arrays = [
      `$${++n}::text[]`,
      `$${++n}::text[]`,
      `$${++n}::bigint[]`,
      `$${++n}::text[]`,
      `$${++n}::int[]`,
      ...table.columns.map((c) => `$${++n}::${ARRAY_TYPE[c.kind]}`),
    ];
    const columns = table.columns.map((c) => c.name);
    const aliases = columns.map((_, i) => `c${i}`);
    parts.push(
      `i_${kind} AS (INSERT INTO ${table.name} (project, type, rid, param, grp, ${columns.join(', ')})
         SELECT j, t, r, p, g, ${aliases.join(', ')} FROM unnest(${arrays.join(', ')}) AS u(j, t, r, p, g, ${aliases.join(', ')}))`,
    );
  }
  return `WITH ${parts.join(',\n')} SELECT 1`;
})();

function indexWriteParams(batch: IndexBatch): unknown[] {
  const params: unknown[] = [batch.replace];
  for (const kind of INDEX_KINDS) {
    const table = INDEX_TABLES[kind] as IndexTable;
    const projects: string[] = [];
    const types: string[] = [];
    const rids: number[] = [];
    const list: Record<string, unknown>[] = [];
    for (const entry of batch.rows) {
      for (const row of (entry.rows?.[kind] ?? []) as unknown as Record<string, unknown>[]) {
        projects.push(entry.project);
        types.push(entry.type);
        rids.push(entry.rid);
        list.push(row);
      }
    }
    params.push(
      projects,
      types,
      rids,
      list.map((r) => r.param),
      list.map((r) => r.grp),
    );
    for (const column of table.columns) params.push(list.map((r) => r[column.name] ?? null));
  }
  return params;
}

export async function writeIndex(client: pg.PoolClient, batch: IndexBatch): Promise<void> {
  if (batch.replace.length === 0 && batch.rows.every((r) => !r.rows)) return;
  await client.query(INDEX_WRITE_SQL, indexWriteParams(batch));
}
