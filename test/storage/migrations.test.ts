import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { describe, expect, test } from 'vitest';
import { LATEST_VERSION, MIGRATIONS, runMigrations } from '../../src/storage/migrations';
import type { Migration } from '../../src/storage/migrations/dialect';
import { PostgresStore } from '../../src/storage/postgres/postgres-store';
import { migrationTarget } from '../../src/storage/sqlite/connection';
import { freshSchema, hasPostgres, POSTGRES_SKIP_REASON } from '../helpers/postgres';

const FOLDER = fileURLToPath(new URL('../../src/storage/migrations/', import.meta.url));

describe('migrations', () => {
  test('are the numbered files of src/storage/migrations, 1 to the latest, each listed once in order', () => {
    const numbers = readdirSync(FOLDER)
      .map((file) => /^(\d{3})-[a-z0-9-]+\.ts$/.exec(file)?.[1])
      .filter((n): n is string => n !== undefined)
      .map(Number);
    expect(numbers).toEqual(MIGRATIONS.map((_, i) => i + 1));
    expect(MIGRATIONS.map((m) => m.version)).toEqual(numbers);
    expect(LATEST_VERSION).toBe(numbers.length);
  });

  test('each runs in a transaction of its own: one that fails leaves those before it recorded, and runs once fixed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fhir-migrations-'));
    const db = new Database(join(dir, 'fhir.sqlite'));
    try {
      const steps = (third: string): Migration[] => [
        { version: 1, up: () => 'CREATE TABLE a (x INTEGER)' },
        { version: 2, up: () => 'CREATE TABLE b (x INTEGER)' },
        { version: 3, up: () => third },
      ];
      await expect(
        runMigrations(migrationTarget(db), steps('CREATE TABLE c (x INTEGER); INSERT INTO nowhere VALUES (1)')),
      ).rejects.toThrow(/nowhere/);
      const recorded = () =>
        (db.prepare('SELECT version FROM schema_migrations ORDER BY version').all() as { version: number }[]).map(
          (r) => r.version,
        );
      expect(recorded()).toEqual([1, 2]);
      expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'c'").get()).toBeUndefined();
      await runMigrations(migrationTarget(db), steps('CREATE TABLE c (x INTEGER)'));
      expect(recorded()).toEqual([1, 2, 3]);
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  if (!hasPostgres) {
    test.skip(POSTGRES_SKIP_REASON, () => undefined);
    return;
  }
  test('PostgreSQL: processes starting at once over one database migrate it once between them', async () => {
    const schema = await freshSchema();
    const stores = [new PostgresStore(schema.url), new PostgresStore(schema.url), new PostgresStore(schema.url)];
    try {
      await Promise.all(stores.map((store) => store.migrate()));
      const rows = await stores[0].query<{ version: number }>(
        'SELECT version FROM schema_migrations ORDER BY version',
        [],
      );
      expect(rows.map((r) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));
    } finally {
      await Promise.all(stores.map((store) => store.close()));
      await schema.drop();
    }
  });
});
