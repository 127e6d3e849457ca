import type Database from 'better-sqlite3';
import { yieldIfHeld } from '../../context/budget';
import type { IndexRows } from '../index-schema';
import { insertJob } from '../jobs';
import {
  ifMatchHolds,
  methodOf,
  stampVersion,
  writtenVersion,
  type CurrentState,
  type StoreTx,
  type WriteOp,
  type WriteResult,
} from '../store';
import { readerOf, runOn, type ReadStatements, type WriteStatements } from './statements';

/** A transaction in progress: whether it still takes writes, and how many resources it wrote. */
export interface TxState {
  active: boolean;
  writes: number;
}

/** The StoreTx of a transaction begun on the writer connection `db`; the caller commits or rolls back. */
export function transactionOn(
  db: Database.Database,
  statements: { writes: WriteStatements; reads: ReadStatements },
  state: TxState,
): StoreTx {
  const { writes } = statements;
  const open = () => {
    if (!state.active) throw new Error('transaction already ended');
  };
  return {
    ...readerOf(statements.reads, db),
    write: async (op) => {
      open();
      state.writes++;
      await yieldIfHeld();
      return writeVersion(writes, op);
    },
    writeMany: async (ops) => {
      open();
      state.writes += ops.length;
      const results: WriteResult[] = [];
      for (const op of ops) {
        await yieldIfHeld();
        results.push(writeVersion(writes, op));
      }
      return results;
    },
    replaceIndex: async (entries) => {
      open();
      state.writes += entries.length;
      for (const { project, type, rid, rows } of entries) {
        await yieldIfHeld();
        writeIndex(writes, { project, type, rid, rows, replace: true });
      }
    },
    lock: async () => undefined,
    enqueue: async (job) => {
      open();
      return insertJob(async (sql, params) => runOn(db, sql, params), job);
    },
  };
}

/** The index rows of one resource, to write in place of its old ones (`replace`) or as its first. */
interface IndexEntry {
  project: string;
  type: string;
  rid: number;
  rows: IndexRows | null;
  replace: boolean;
}

/** The body of a write; runs inside an immediate transaction on the writer connection. */
export function writeVersion(writes: WriteStatements, op: WriteOp): WriteResult {
  const row = writes.current.get(op.project, op.type, op.id) as
    { rid: number; version: number; deleted: number } | undefined;
  const current: CurrentState | undefined = row ? { versionId: row.version, deleted: row.deleted === 1 } : undefined;
  if (op.ifMatch !== undefined && !ifMatchHolds(op.ifMatch, current)) return { status: 'conflict', current };
  if (op.resource === null && (!current || current.deleted)) return { status: 'unchanged', current };
  const versionId = (current?.versionId ?? 0) + 1;
  const content = op.resource === null ? null : stampVersion(op.resource, versionId);
  writes.insertVersion.run(op.project, op.type, op.id, versionId, op.lastUpdated, content, methodOf(op));
  const { seq } = writes.bumpMark.get(op.project, op.type) as { seq: number };
  const rid = row?.rid ?? (writes.nextRid.get() as { rid: number }).rid;
  writes.upsertCurrent.run(
    op.project,
    op.type,
    op.id,
    versionId,
    op.resource === null ? 1 : 0,
    op.url ?? null,
    op.version ?? null,
    seq,
    rid,
  );
  writeIndex(writes, { project: op.project, type: op.type, rid, rows: op.index, replace: row !== undefined });
  return { status: 'ok', version: writtenVersion(op, versionId), previous: current };
}

export function writeIndex(writes: WriteStatements, entry: IndexEntry): void {
  const { project, type, rid, rows } = entry;
  if (entry.replace) for (const statement of writes.deleteIndex) statement.run(rid);
  if (!rows) return;
  // Values bound in each table's column order (indexInsertSql): no array per row, ~600,000 rows for Synthea.
  const insert = writes.insertIndex;
  for (const r of rows.string) insert.string.run(project, type, r.param, rid, r.grp, r.norm, r.exact);
  for (const r of rows.token)
    insert.token.run(project, type, r.param, rid, r.grp, r.system ?? null, r.code ?? null, r.text ?? null);
  for (const r of rows.date) insert.date.run(project, type, r.param, rid, r.grp, r.low, r.high);
  for (const r of rows.number) insert.number.run(project, type, r.param, rid, r.grp, r.low, r.high);
  for (const r of rows.quantity) {
    insert.quantity.run(
      project,
      type,
      r.param,
      rid,
      r.grp,
      r.system ?? null,
      r.code ?? null,
      r.unit ?? null,
      r.low,
      r.high,
      r.canon_code ?? null,
      r.canon_low ?? null,
      r.canon_high ?? null,
    );
  }
  for (const r of rows.reference)
    insert.reference.run(
      project,
      type,
      r.param,
      rid,
      r.grp,
      r.target_type ?? null,
      r.target_id ?? null,
      r.url ?? null,
      r.version ?? null,
    );
  for (const r of rows.uri) insert.uri.run(project, type, r.param, rid, r.grp, r.value);
}
