import type { Run } from './jobs';

/**
 * What bulk export reads and writes: a snapshot of a project's resources as they were at an
 * instant (from the versions table: the newest version of each resource at or before it), and
 * the NDJSON files an export makes, kept in the database as numbered parts so every process can
 * serve them and none holds a whole type in memory. The SQL is the same on both backends.
 */

export interface SnapshotRow {
  id: string;
  version: number;
  lastUpdated: string;
  /** The JSON of the version, or null when the resource was deleted by then. */
  content: string | null;
}

/** A page of a type's snapshot as of an instant: after an id, at most `limit`, changed after `since` when given. */
export interface SnapshotQuery {
  project: string;
  type: string;
  asOf: string;
  since?: string;
  afterId: string;
  limit: number;
}

export interface SnapshotPage {
  rows: SnapshotRow[];
  /** Where the next page starts (afterId), when there may be one. */
  next?: string;
}

export interface BulkFilePart {
  part: number;
  count: number;
  content: string;
}

export interface BulkStore {
  /** The resource types a project has (or had) resources of. */
  types(project: string): Promise<string[]>;
  /**
   * Resources of a type as of `asOf` (ISO instant), in id order, from the next `limit` ids after
   * `afterId`: each one's newest version at or before `asOf` (none when it did not exist yet),
   * only when that version is after `since`.
   */
  snapshot(options: SnapshotQuery): Promise<SnapshotPage>;
  /**
   * Stores a part, only while the job exists (one statement): an export cancelled by DELETE in
   * another process, still running there until its next heartbeat, leaves no part behind. False
   * when the job is gone.
   */
  putPart(job: string, file: string, part: BulkFilePart): Promise<boolean>;
  /** The parts of a file after `afterPart`, at most `limit`, in order. */
  parts(job: string, file: string, afterPart: number, limit: number): Promise<BulkFilePart[]>;
  removeFiles(job: string): Promise<void>;
}

export class SqlBulkStore implements BulkStore {
  constructor(
    private readonly write: Run,
    private readonly read: Run = write,
  ) {}

  async types(project: string): Promise<string[]> {
    const rows = await this.read('SELECT DISTINCT type FROM resources WHERE project = ? ORDER BY type', [project]);
    return rows.map((row) => String(row.type));
  }

  async snapshot(options: SnapshotQuery): Promise<SnapshotPage> {
    // Key lookups only: a page of ids by the resources table's key, their versions' numbers and
    // times by the versions' key (an IN list: no planner then prefers the time index and reads a
    // whole type per row), the version as of `asOf` chosen here, and only those versions' content.
    const { project, type } = options;
    const ids = (
      await this.read('SELECT id FROM resources WHERE project = ? AND type = ? AND id > ? ORDER BY id LIMIT ?', [
        project,
        type,
        options.afterId,
        options.limit,
      ])
    ).map((row) => String(row.id));
    if (ids.length === 0) return { rows: [] };
    const marks = ids.map(() => '?').join(', ');
    const versions = await this.read(
      `SELECT id, version, last_updated FROM resource_versions WHERE project = ? AND type = ? AND id IN (${marks})`,
      [project, type, ...ids],
    );
    const asOf = Date.parse(options.asOf);
    const since = options.since === undefined ? undefined : Date.parse(options.since);
    const chosen = new Map<string, { version: number; at: number; lastUpdated: string }>();
    for (const row of versions) {
      const at = instantOf(row.last_updated);
      const id = String(row.id);
      const version = Number(row.version);
      if (at > asOf || (chosen.get(id)?.version ?? 0) > version) continue;
      chosen.set(id, {
        version,
        at,
        lastUpdated: row.last_updated instanceof Date ? row.last_updated.toISOString() : String(row.last_updated),
      });
    }
    const wanted = ids.filter(
      (id) => chosen.has(id) && (since === undefined || (chosen.get(id)?.at as number) > since),
    );
    const contents = new Map<string, string | null>();
    if (wanted.length > 0) {
      const pairs = wanted.map(() => '(?, CAST(? AS INTEGER))').join(', ');
      const rows = await this.read(
        `SELECT id, content FROM resource_versions WHERE project = ? AND type = ? AND (id, version) IN (VALUES ${pairs})`,
        [project, type, ...wanted.flatMap((id) => [id, chosen.get(id)?.version])],
      );
      for (const row of rows) contents.set(String(row.id), row.content === null ? null : String(row.content));
    }
    return {
      rows: wanted.map((id) => {
        const version = chosen.get(id) as { version: number; lastUpdated: string };
        return { id, version: version.version, lastUpdated: version.lastUpdated, content: contents.get(id) ?? null };
      }),
      next: ids.length === options.limit ? ids[ids.length - 1] : undefined,
    };
  }

  async putPart(job: string, file: string, part: BulkFilePart): Promise<boolean> {
    const rows = await this.write(
      `INSERT INTO bulk_files (job_id, file, part, count, content)
       SELECT ?, ?, CAST(? AS INTEGER), CAST(? AS INTEGER), ? WHERE EXISTS (SELECT 1 FROM jobs WHERE id = ?) RETURNING part`,
      [job, file, part.part, part.count, part.content, job],
    );
    return rows.length === 1;
  }

  async parts(job: string, file: string, afterPart: number, limit: number): Promise<BulkFilePart[]> {
    const rows = await this.read(
      'SELECT part, count, content FROM bulk_files WHERE job_id = ? AND file = ? AND part > ? ORDER BY part LIMIT ?',
      [job, file, afterPart, limit],
    );
    return rows.map((row) => ({ part: Number(row.part), count: Number(row.count), content: String(row.content) }));
  }

  async removeFiles(job: string): Promise<void> {
    await this.write('DELETE FROM bulk_files WHERE job_id = ?', [job]);
  }
}

function instantOf(value: unknown): number {
  return value instanceof Date ? value.getTime() : Date.parse(String(value));
}
