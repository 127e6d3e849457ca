import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { changeFromRow, optionalVersion, versionFromRow, type CanonicalQuery, type Change, type NewVersion, type Page, type ResourceStore, type StoredVersion, type VersionRow } from '../store';

/**
 * The embedded default: one SQLite file under DATA_DIR, in WAL mode with synchronous=FULL so a
 * write is on disk before its 2xx leaves. All of this backend's SQL is in this file.
 */

const MIGRATIONS: string[] = [
  `CREATE TABLE resource_versions (
     type TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL,
     last_updated TEXT NOT NULL, content TEXT,
     PRIMARY KEY (type, id, version)
   ) WITHOUT ROWID;
   CREATE TABLE resources (
     type TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL, deleted INTEGER NOT NULL,
     url TEXT, canonical_version TEXT, seq INTEGER NOT NULL,
     PRIMARY KEY (type, id)
   ) WITHOUT ROWID;
   CREATE INDEX resources_by_url ON resources (type, url) WHERE url IS NOT NULL;
   CREATE INDEX resources_by_seq ON resources (type, seq);
   CREATE TABLE change_marks (type TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID;`,
];


export class SqliteStore implements ResourceStore {
  readonly kind = 'sqlite' as const;
  private readonly db: Database.Database;
  private statements?: ReturnType<SqliteStore['prepare']>;

  constructor(dataDir: string) {
    const file = dataDir === ':memory:' ? ':memory:' : join(mkdirp(dataDir), 'fhir.sqlite');
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.pragma('busy_timeout = 5000');
    this.db.pragma('foreign_keys = ON');
  }

  async migrate(): Promise<void> {
    this.db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)');
    const apply = this.db.transaction(() => {
      const row = this.db.prepare('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations').get() as { v: number };
      MIGRATIONS.forEach((sql, index) => {
        const version = index + 1;
        if (version <= row.v) return;
        this.db.exec(sql);
        this.db.prepare('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)').run(version, new Date().toISOString());
      });
    });
    apply.immediate();
    this.statements = this.prepare();
  }

  private prepare() {
    const current = `SELECT v.type, v.id, v.version, v.last_updated, v.content
       FROM resources r JOIN resource_versions v ON v.type = r.type AND v.id = r.id AND v.version = r.version`;
    return {
      read: this.db.prepare(`${current} WHERE r.type = ? AND r.id = ?`),
      readVersion: this.db.prepare('SELECT * FROM resource_versions WHERE type = ? AND id = ? AND version = ?'),
      history: this.db.prepare('SELECT * FROM resource_versions WHERE type = ? AND id = ? ORDER BY version DESC'),
      insertVersion: this.db.prepare(
        `INSERT INTO resource_versions (type, id, version, last_updated, content) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT DO NOTHING`,
      ),
      bumpMark: this.db.prepare(
        `INSERT INTO change_marks (type, seq) VALUES (?, 1)
         ON CONFLICT (type) DO UPDATE SET seq = seq + 1 RETURNING seq`,
      ),
      upsertCurrent: this.db.prepare(
        `INSERT INTO resources (type, id, version, deleted, url, canonical_version, seq) VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (type, id) DO UPDATE SET version = excluded.version, deleted = excluded.deleted,
           url = excluded.url, canonical_version = excluded.canonical_version, seq = excluded.seq
         WHERE excluded.version > resources.version`,
      ),
      marks: this.db.prepare('SELECT type, seq FROM change_marks'),
      changes: this.db.prepare(
        `SELECT v.type, v.id, v.version, v.last_updated, v.content, r.seq
           FROM resources r JOIN resource_versions v ON v.type = r.type AND v.id = r.id AND v.version = r.version
          WHERE r.type = ? AND r.seq > ? ORDER BY r.seq`,
      ),
      current,
    };
  }

  private get sql() {
    if (!this.statements) throw new Error('SqliteStore used before migrate()');
    return this.statements;
  }

  async read(type: string, id: string): Promise<StoredVersion | undefined> {
    return optionalVersion(this.sql.read.get(type, id) as VersionRow | undefined);
  }

  async readVersion(type: string, id: string, versionId: number): Promise<StoredVersion | undefined> {
    return optionalVersion(this.sql.readVersion.get(type, id, versionId) as VersionRow | undefined);
  }

  async history(type: string, id: string): Promise<StoredVersion[]> {
    return (this.sql.history.all(type, id) as VersionRow[]).map((row) => versionFromRow(row));
  }

  async append(entry: NewVersion): Promise<'ok' | 'conflict'> {
    const write = this.db.transaction((): 'ok' | 'conflict' => {
      const content = entry.resource === null ? null : JSON.stringify(entry.resource);
      const inserted = this.sql.insertVersion.run(entry.type, entry.id, entry.versionId, entry.lastUpdated, content);
      if (inserted.changes === 0) return 'conflict';
      const { seq } = this.sql.bumpMark.get(entry.type) as { seq: number };
      this.sql.upsertCurrent.run(
        entry.type, entry.id, entry.versionId, entry.resource === null ? 1 : 0,
        entry.url ?? null, entry.version ?? null, seq,
      );
      return 'ok';
    });
    return write.immediate();
  }

  async search(type: string, query: CanonicalQuery, page: Page): Promise<{ total: number; resources: StoredVersion[] }> {
    const where = ['r.type = ?', 'r.deleted = 0'];
    const args: unknown[] = [type];
    if (query.url !== undefined) (where.push('r.url = ?'), args.push(query.url));
    if (query.version !== undefined) (where.push('r.canonical_version = ?'), args.push(query.version));
    if (query.id !== undefined) (where.push('r.id = ?'), args.push(query.id));
    const filter = where.join(' AND ');
    const { n } = this.db.prepare(`SELECT COUNT(*) AS n FROM resources r WHERE ${filter}`).get(...args) as { n: number };
    const rows = this.db
      .prepare(`${this.sql.current} WHERE ${filter} ORDER BY r.id LIMIT ? OFFSET ?`)
      .all(...args, page.count, page.offset) as VersionRow[];
    return { total: n, resources: rows.map((row) => versionFromRow(row)) };
  }

  async changeMarks(types: string[]): Promise<Map<string, number>> {
    const marks = new Map<string, number>(types.map((t) => [t, 0]));
    for (const row of this.sql.marks.all() as { type: string; seq: number }[]) {
      if (marks.has(row.type)) marks.set(row.type, row.seq);
    }
    return marks;
  }

  async changesSince(type: string, since: number): Promise<Change[]> {
    return (this.sql.changes.all(type, since) as (VersionRow & { seq: number })[]).map((row) => changeFromRow(row, row.seq));
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}


function mkdirp(dir: string): string {
  mkdirSync(dir, { recursive: true });
  return dir;
}
