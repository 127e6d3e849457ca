import type pg from 'pg';
import {
  optionalVersion,
  StorageFullError,
  StorageTimeoutError,
  StorageUnavailableError,
  versionFromRow,
  type StoreReader,
  type VersionRow,
} from '../store';

/** How much longer than the database's own timeout the client waits for any answer. */
export const CLIENT_GRACE_MS = 2000;
/** A client-side wait for statements that may run long (pg takes 0 as "the client's default"). */
const UNBOUNDED_MS = 24 * 3_600_000;

/** A query the client waits for as long as it takes (pg reads `query_timeout` per query; its types omit it). */
export function longQuery(text: string, values: unknown[] = []): pg.QueryConfig {
  const config: pg.QueryConfig & { query_timeout: number } = { text, values, query_timeout: UNBOUNDED_MS };
  return config;
}

/** The current version of each resource, with its content. */
export const CURRENT = `SELECT v.project, v.type, v.id, v.version, v.last_updated, v.content
  FROM resources r JOIN resource_versions v ON v.project = r.project AND v.type = r.type AND v.id = r.id AND v.version = r.version`;

type Run = <R extends object>(sql: string, params: readonly unknown[]) => Promise<R[]>;

export function readerOf(run: Run): StoreReader {
  return {
    read: async (project, type, id) =>
      optionalVersion(
        (await run<VersionRow>(`${CURRENT} WHERE r.project = ? AND r.type = ? AND r.id = ?`, [project, type, id]))[0],
      ),
    readVersion: async (project, type, id, versionId) =>
      optionalVersion(
        (
          await run<VersionRow>(
            'SELECT * FROM resource_versions WHERE project = ? AND type = ? AND id = ? AND version = ?',
            [project, type, id, versionId],
          )
        )[0],
      ),
    history: async (project, type, id) =>
      (
        await run<VersionRow>(
          'SELECT * FROM resource_versions WHERE project = ? AND type = ? AND id = ? ORDER BY version DESC',
          [project, type, id],
        )
      ).map((row) => versionFromRow(row)),
    query: run,
  };
}

/** `?` placeholders (what the search layer writes for both backends) as PostgreSQL's `$1, $2, ...`. */
export function numbered(sql: string): string {
  let n = 0;
  let out = '';
  let quoted = false;
  for (const ch of sql) {
    if (ch === "'") quoted = !quoted;
    out += ch === '?' && !quoted ? `$${++n}` : ch;
  }
  return out;
}

/** A transaction that lost a race with another: a deadlock, a serialisation failure, a duplicate new key. */
export function isRaceLost(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === '40P01' || code === '40001' || code === '23505';
}

/** The database cancelled the statement (statement_timeout; an operator's pg_cancel_backend). */
export function isCancelled(err: unknown): boolean {
  return (err as { code?: string }).code === '57014';
}

/**
 * Connection-level failures become StorageUnavailableError (503), timeouts StorageTimeoutError
 * (503 naming the time); anything else stays as it is.
 */
export function translate(err: unknown, statementTimeoutMs: number): unknown {
  if (err instanceof StorageUnavailableError) return err;
  const code = (err as { code?: string }).code ?? '';
  const message = (err as Error).message ?? '';
  if (isCancelled(err)) return new StorageTimeoutError(message, statementTimeoutMs);
  if (code === '53100') return new StorageFullError(message);
  if (message === 'Query read timeout') return new StorageTimeoutError(message, statementTimeoutMs + CLIENT_GRACE_MS);
  const connectionLost =
    [
      'ECONNREFUSED',
      'ECONNRESET',
      'ETIMEDOUT',
      'EPIPE',
      'ENOTFOUND',
      '57P01',
      '57P02',
      '57P03',
      '08000',
      '08003',
      '08006',
    ].includes(code) ||
    /terminat|Connection terminated|timeout exceeded when trying to connect|not queryable/i.test(message);
  return connectionLost ? new StorageUnavailableError(message) : err;
}
