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

export interface BulkFilePart {
  part: number;
  count: number;
  content: string;
}

export interface BulkStore {
  /** The resource types a project has (or had) resources of. */
  types(project: string): Promise<string[]>;
  /**
   * Resources of a type as of `asOf` (ISO instant), in id order after `afterId`, at most `limit`:
   * each one's newest version at or before `asOf`, only when that version is after `since`.
   */
  snapshot(options: { project: string; type: string; asOf: string; since?: string; afterId: string; limit: number }): Promise<SnapshotRow[]>;
  putPart(job: string, file: string, part: BulkFilePart): Promise<void>;
  /** The parts of a file after `afterPart`, at most `limit`, in order. */
  parts(job: string, file: string, afterPart: number, limit: number): Promise<BulkFilePart[]>;
  removeFiles(job: string): Promise<void>;
}

export function bulkDdl(dialect: 'sqlite' | 'postgres'): string {
  const text = dialect === 'postgres' ? 'TEXT COLLATE "C"' : 'TEXT';
  return `CREATE TABLE bulk_files (
     job_id ${text} NOT NULL, file ${text} NOT NULL, part INTEGER NOT NULL, count INTEGER NOT NULL, content TEXT NOT NULL,
     PRIMARY KEY (job_id, file, part)
   );`;
}

export class SqlBulkStore implements BulkStore {
  constructor(
    private readonly write: Run,
    private readonly read: Run = write,
    private readonly instant: (param: string) => string = (p) => p,
  ) {}

  async types(project: string): Promise<string[]> {
    const rows = await this.read('SELECT DISTINCT type FROM resources WHERE project = ? ORDER BY type', [project]);
    return rows.map((row) => String(row.type));
  }

  async snapshot(options: { project: string; type: string; asOf: string; since?: string; afterId: string; limit: number }): Promise<SnapshotRow[]> {
    const at = this.instant('?');
    const since = options.since === undefined ? '' : ` AND v.last_updated > ${this.instant('?')}`;
    const rows = await this.read(
      `SELECT v.id, v.version, v.last_updated, v.content FROM resource_versions v
       WHERE v.project = ? AND v.type = ? AND v.id > ? AND v.last_updated <= ${at}${since}
         AND v.version = (SELECT MAX(w.version) FROM resource_versions w
           WHERE w.project = v.project AND w.type = v.type AND w.id = v.id AND w.last_updated <= ${at})
       ORDER BY v.id LIMIT ?`,
      [options.project, options.type, options.afterId, options.asOf, ...(options.since === undefined ? [] : [options.since]), options.asOf, options.limit],
    );
    return rows.map((row) => ({
      id: String(row.id),
      version: Number(row.version),
      lastUpdated: row.last_updated instanceof Date ? row.last_updated.toISOString() : String(row.last_updated),
      content: row.content === null ? null : String(row.content),
    }));
  }

  async putPart(job: string, file: string, part: BulkFilePart): Promise<void> {
    await this.write('INSERT INTO bulk_files (job_id, file, part, count, content) VALUES (?, ?, ?, ?, ?)', [job, file, part.part, part.count, part.content]);
  }

  async parts(job: string, file: string, afterPart: number, limit: number): Promise<BulkFilePart[]> {
    const rows = await this.read('SELECT part, count, content FROM bulk_files WHERE job_id = ? AND file = ? AND part > ? ORDER BY part LIMIT ?', [job, file, afterPart, limit]);
    return rows.map((row) => ({ part: Number(row.part), count: Number(row.count), content: String(row.content) }));
  }

  async removeFiles(job: string): Promise<void> {
    await this.write('DELETE FROM bulk_files WHERE job_id = ?', [job]);
  }
}
