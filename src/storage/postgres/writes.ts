import type pg from 'pg';
import {
  ifMatchHolds,
  methodOf,
  stampVersion,
  writtenVersion,
  type CurrentState,
  type WriteOp,
  type WriteResult,
} from '../store';
import { writeIndex } from './index-writes';

/** A resource's current row, locked for the transaction. */
interface CurrentRow {
  rid: string;
  version: number;
  deleted: boolean;
}

/** A write that makes a version, with what the batch statements need of it. */
interface PlannedWrite {
  op: WriteOp;
  versionId: number;
  content: string | null;
  row?: CurrentRow;
}

const keyOf = (project: string, type: string, id: string) => `${project}\u0000${type}\u0000${id}`;
const markKey = (project: string, type: string) => `${project}\u0000${type}`;

export async function writeIn(client: pg.PoolClient, op: WriteOp): Promise<WriteResult> {
  const found = await client.query<CurrentRow>(
    'SELECT rid, version, deleted FROM resources WHERE project = $1 AND type = $2 AND id = $3 FOR UPDATE',
    [op.project, op.type, op.id],
  );
  const row = found.rows[0];
  const current: CurrentState | undefined = row ? { versionId: row.version, deleted: row.deleted } : undefined;
  if (op.ifMatch !== undefined && !ifMatchHolds(op.ifMatch, current)) return { status: 'conflict', current };
  if (op.resource === null && (!current || current.deleted)) return { status: 'unchanged', current };
  const versionId = (current?.versionId ?? 0) + 1;
  const content = op.resource === null ? null : stampVersion(op.resource, versionId);
  // Two creates of one new id: the second blocks here until the first commits, then fails on the
  // primary key and its transaction is retried (and then sees the first one's row).
  await client.query(
    'INSERT INTO resource_versions (project, type, id, version, last_updated, content, method) VALUES ($1, $2, $3, $4, $5, $6, $7)',
    [op.project, op.type, op.id, versionId, op.lastUpdated, content, methodOf(op)],
  );
  // The row lock on the type's mark orders commits, so a reader never sees mark n+1 before n.
  const mark = await client.query<{ seq: string }>(
    `INSERT INTO change_marks (project, type, seq) VALUES ($1, $2, 1)
     ON CONFLICT (project, type) DO UPDATE SET seq = change_marks.seq + 1 RETURNING seq`,
    [op.project, op.type],
  );
  const upserted = await client.query<{ rid: string }>(
    `INSERT INTO resources (project, type, id, version, deleted, url, canonical_version, seq, rid)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, COALESCE($9, nextval('resource_rid_seq')))
     ON CONFLICT (project, type, id) DO UPDATE SET version = excluded.version, deleted = excluded.deleted,
       url = excluded.url, canonical_version = excluded.canonical_version, seq = excluded.seq
     RETURNING rid`,
    [
      op.project,
      op.type,
      op.id,
      versionId,
      op.resource === null,
      op.url ?? null,
      op.version ?? null,
      mark.rows[0].seq,
      row?.rid ?? null,
    ],
  );
  const rid = Number(upserted.rows[0].rid);
  await writeIndex(client, {
    replace: row ? [rid] : [],
    rows: [{ project: op.project, type: op.type, rid, rows: op.index }],
  });
  return { status: 'ok', version: writtenVersion(op, versionId), previous: current };
}

/**
 * Many writes in a few statements, each set-based (locks, versions, marks, current rows, index
 * rows): what loading a transaction Bundle or a package costs in round trips no longer grows
 * with its size. The same resource twice in one batch goes through the one-by-one path.
 */
export async function writeManyIn(client: pg.PoolClient, ops: WriteOp[]): Promise<WriteResult[]> {
  const keys = ops.map((op) => keyOf(op.project, op.type, op.id));
  if (new Set(keys).size !== keys.length || ops.length < 2) {
    const results: WriteResult[] = [];
    for (const op of ops) results.push(await writeIn(client, op));
    return results;
  }
  const existing = await lockCurrent(client, ops);
  const { results, writes } = plan(ops, (i) => existing.get(keys[i]));
  if (writes.length === 0) return results;
  await insertVersions(client, writes);
  const seqs = await moveMarks(client, writes);
  const rids = await upsertCurrent(client, writes, seqs);
  await writeIndex(client, {
    replace: writes.filter((w) => w.row).map((w) => Number(w.row?.rid)),
    rows: writes.map((w) => ({
      project: w.op.project,
      type: w.op.type,
      rid: rids.get(keyOf(w.op.project, w.op.type, w.op.id)) as number,
      rows: w.op.index,
    })),
  });
  return results;
}

/** The current rows of the resources written, locked (in key order, so two batches never deadlock on them). */
async function lockCurrent(client: pg.PoolClient, ops: WriteOp[]): Promise<Map<string, CurrentRow>> {
  const found = await client.query<CurrentRow & { project: string; type: string; id: string }>(
    `SELECT project, type, id, rid, version, deleted FROM resources WHERE (project, type, id) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))
     ORDER BY project, type, id FOR UPDATE`,
    [ops.map((o) => o.project), ops.map((o) => o.type), ops.map((o) => o.id)],
  );
  return new Map(found.rows.map((r) => [keyOf(r.project, r.type, r.id), r]));
}

/** Each write's answer (a conflict, nothing to delete, or its new version) and the versions to make. */
function plan(
  ops: WriteOp[],
  rowOf: (index: number) => CurrentRow | undefined,
): { results: WriteResult[]; writes: PlannedWrite[] } {
  const results: WriteResult[] = [];
  const writes: PlannedWrite[] = [];
  ops.forEach((op, i) => {
    const row = rowOf(i);
    const current: CurrentState | undefined = row ? { versionId: row.version, deleted: row.deleted } : undefined;
    if (op.ifMatch !== undefined && !ifMatchHolds(op.ifMatch, current))
      return results.push({ status: 'conflict', current });
    if (op.resource === null && (!current || current.deleted)) return results.push({ status: 'unchanged', current });
    const versionId = (current?.versionId ?? 0) + 1;
    writes.push({ op, versionId, content: op.resource === null ? null : stampVersion(op.resource, versionId), row });
    results.push({ status: 'ok', version: writtenVersion(op, versionId), previous: current });
  });
  return { results, writes };
}

async function insertVersions(client: pg.PoolClient, writes: PlannedWrite[]): Promise<void> {
  await client.query(
    `INSERT INTO resource_versions (project, type, id, version, last_updated, content, method)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::timestamptz[], $6::text[], $7::text[])`,
    [
      writes.map((w) => w.op.project),
      writes.map((w) => w.op.type),
      writes.map((w) => w.op.id),
      writes.map((w) => w.versionId),
      writes.map((w) => w.op.lastUpdated),
      writes.map((w) => w.content),
      writes.map((w) => methodOf(w.op)),
    ],
  );
}

/** One mark per project and type, moved on by the number of its writes; each write gets its own number (in order). */
async function moveMarks(client: pg.PoolClient, writes: PlannedWrite[]): Promise<number[]> {
  const perType = new Map<string, number>();
  for (const w of writes)
    perType.set(markKey(w.op.project, w.op.type), (perType.get(markKey(w.op.project, w.op.type)) ?? 0) + 1);
  const markKeys = [...perType.keys()].sort();
  const marks = await client.query<{ project: string; type: string; seq: string }>(
    `INSERT INTO change_marks (project, type, seq) SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])
     ON CONFLICT (project, type) DO UPDATE SET seq = change_marks.seq + excluded.seq RETURNING project, type, seq`,
    [
      markKeys.map((k) => k.split('\u0000')[0]),
      markKeys.map((k) => k.split('\u0000')[1]),
      markKeys.map((k) => perType.get(k)),
    ],
  );
  const next = new Map(
    marks.rows.map((m) => [
      markKey(m.project, m.type),
      Number(m.seq) - (perType.get(markKey(m.project, m.type)) as number),
    ]),
  );
  return writes.map((w) => {
    const key = markKey(w.op.project, w.op.type);
    const seq = (next.get(key) as number) + 1;
    next.set(key, seq);
    return seq;
  });
}

/** The current rows, new ones numbered from the sequence; every written resource's row id. */
async function upsertCurrent(
  client: pg.PoolClient,
  writes: PlannedWrite[],
  seqs: number[],
): Promise<Map<string, number>> {
  const upserted = await client.query<{ project: string; type: string; id: string; rid: string }>(
    `INSERT INTO resources (project, type, id, version, deleted, url, canonical_version, seq, rid)
     SELECT j, t, i, v, d, u, cv, s, COALESCE(r, nextval('resource_rid_seq'))
       FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::boolean[], $6::text[], $7::text[], $8::bigint[], $9::bigint[]) AS x(j, t, i, v, d, u, cv, s, r)
     ON CONFLICT (project, type, id) DO UPDATE SET version = excluded.version, deleted = excluded.deleted,
       url = excluded.url, canonical_version = excluded.canonical_version, seq = excluded.seq
     RETURNING project, type, id, rid`,
    [
      writes.map((w) => w.op.project),
      writes.map((w) => w.op.type),
      writes.map((w) => w.op.id),
      writes.map((w) => w.versionId),
      writes.map((w) => w.op.resource === null),
      writes.map((w) => w.op.url ?? null),
      writes.map((w) => w.op.version ?? null),
      seqs,
      writes.map((w) => w.row?.rid ?? null),
    ],
  );
  return new Map(upserted.rows.map((r) => [keyOf(r.project, r.type, r.id), Number(r.rid)]));
}
