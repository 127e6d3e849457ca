import Database from 'better-sqlite3';
import { SQLITE, type MigrationSession, type MigrationTarget } from '../migrations';
import { StorageFullError, StorageUnavailableError } from '../store';

/** WAL pages (4 KiB) between two automatic checkpoints. */
const WAL_CHECKPOINT_PAGES = 20_000;

/** How long a write waits for another process's write lock before it fails (503). */
const WRITE_LOCK_WAIT_MS = 30_000;

export function open(file: string, durable: boolean): Database.Database {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  // A temporary test database needs no durability; a real one is on disk before a 2xx leaves.
  db.pragma(`synchronous = ${durable ? 'FULL' : 'OFF'}`);
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  // Checkpoint (copy the WAL into the database) every ~80 MB of WAL instead of SQLite's 4 MB: a
  // Bundle of a few hundred resources writes more than 4 MB, so each commit paid a checkpoint of its
  // own, and pages that consecutive commits both touch are now copied once. Loading the Synthea set
  // went from ~2,600 to ~3,900 resources/s (with a bigger WAL, not none: without checkpoints reads
  // through an ever longer WAL slowed it to ~3,200). The file is cut back to 128 MB after a checkpoint.
  db.pragma(`wal_autocheckpoint = ${WAL_CHECKPOINT_PAGES}`);
  db.pragma('journal_size_limit = 134217728');
  return db;
}

/**
 * BEGIN IMMEDIATE (the database's write lock), waiting for another process that holds it (WORKERS,
 * or a tool over the same file) without holding up this process: the connection's busy timeout
 * is 0 once migrated, so SQLite answers SQLITE_BUSY at once and the wait is a timer here, while
 * this process goes on answering reads. SQLite's own wait would block the event loop for as long.
 * Past WRITE_LOCK_WAIT_MS the write fails as storage unavailable (503, Retry-After).
 */
export async function beginImmediate(db: Database.Database): Promise<void> {
  const deadline = Date.now() + WRITE_LOCK_WAIT_MS;
  for (let pause = 1; ; pause = Math.min(pause * 2, 20)) {
    try {
      db.exec('BEGIN IMMEDIATE');
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== 'SQLITE_BUSY') throw err;
      if (Date.now() >= deadline)
        throw new StorageUnavailableError(
          `another process held the database's write lock for ${WRITE_LOCK_WAIT_MS / 1000} s`,
        );
    }
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

/**
 * What a failed write is reported as: a full disk (SQLITE_FULL) as StorageFullError, an I/O error
 * (SQLITE_IOERR_*: the disk failing, or out of space where SQLite cannot tell) as storage
 * unavailable; anything else as it is.
 */
export function writeFailure(err: unknown): unknown {
  const code = (err as { code?: unknown }).code;
  if (code === 'SQLITE_FULL') return new StorageFullError((err as Error).message);
  if (typeof code === 'string' && code.startsWith('SQLITE_IOERR'))
    return new StorageUnavailableError((err as Error).message);
  return err;
}

/**
 * The migration runner's way into the file: each migration in a BEGIN IMMEDIATE transaction, so a
 * second process opening the file waits (busy_timeout, still SQLite's own during migration) and
 * then finds the migrations done.
 */
export function migrationTarget(db: Database.Database): MigrationTarget {
  const session: MigrationSession = {
    exec: async (sql) => {
      db.exec(sql);
    },
    query: async <R extends object>(sql: string, params: unknown[]) => {
      const statement = db.prepare(sql);
      return (statement.reader ? statement.all(...params) : (statement.run(...params), [])) as R[];
    },
  };
  return {
    dialect: SQLITE,
    transaction: async (work) => {
      db.exec('BEGIN IMMEDIATE');
      try {
        const result = await work(session);
        db.exec('COMMIT');
        return result;
      } catch (err) {
        if (db.inTransaction) db.exec('ROLLBACK');
        throw err;
      }
    },
  };
}
