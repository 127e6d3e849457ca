import type { Basic, Bundle, OperationOutcome } from 'fhir/r4';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { ServerApp } from '../../src/bootstrap';
import { SqliteStore } from '../../src/storage/sqlite/sqlite-store';
import { FHIR_JSON, serverApp } from '../helpers/server-app';

/**
 * A full disk on SQLite, made for real without filling the machine's: the database is capped at
 * its present size (`PRAGMA max_page_count`, which SQLite answers SQLITE_FULL beyond, as it does on
 * ENOSPC). Writes answer 507 with an OperationOutcome naming the cause, /readyz answers 503, reads
 * go on; once the cap is lifted readiness comes back by itself and nothing written before is lost.
 */

describe('SQLite with its disk full', () => {
  let server: ServerApp;
  let store: SqliteStore;
  const kept = new Map<string, string>();

  beforeAll(async () => {
    server = await serverApp();
    if (!(server.store instanceof SqliteStore)) throw new Error('this suite needs the embedded store');
    store = server.store;
  });

  afterAll(async () => {
    await server?.close();
  });

  const put = (id: string, text: string) =>
    server.app.inject({
      method: 'PUT',
      url: `/fhir/R4/Basic/${id}`,
      headers: FHIR_JSON,
      payload: { resourceType: 'Basic', id, code: { text } } satisfies Basic,
    });

  test('a write answers 507 naming the cause, /readyz 503, reads go on; lifting the cap brings both back with nothing lost', async () => {
    for (let i = 0; i < 20; i++) {
      const res = await put(`before-${i}`, `kept ${i}`);
      expect(res.statusCode).toBe(201);
      kept.set(`before-${i}`, `kept ${i}`);
    }
    expect((await server.app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);

    // No page beyond those the database has: writes fill its free pages, then fail.
    store.limitSize(1);
    let full: Awaited<ReturnType<typeof put>> | undefined;
    for (let i = 0; i < 5000 && !full; i++) {
      const text = `filler ${i} ${'x'.repeat(2000)}`;
      const res = await put(`fill-${i}`, text);
      if (res.statusCode === 201) kept.set(`fill-${i}`, text);
      else full = res;
    }
    expect(full, 'no write failed').toBeDefined();
    const refused = full as NonNullable<typeof full>;
    expect(refused.statusCode, refused.body).toBe(507);
    expect(refused.headers['retry-after']).toBeDefined();
    const outcome = refused.json() as OperationOutcome;
    expect(outcome.issue[0].code).toBe('no-store');
    expect(outcome.issue[0].details?.text).toMatch(/storage is full/);

    const notReady = await server.app.inject({ method: 'GET', url: '/readyz' });
    expect(notReady.statusCode).toBe(503);
    expect(notReady.body).toMatch(/disk is full/);
    // Still full on a second look (the probe's own write fails too).
    expect((await server.app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(503);
    const read = await server.app.inject({ method: 'GET', url: '/fhir/R4/Basic/before-0' });
    expect(read.statusCode).toBe(200);
    // A batch answers each write entry as the write alone would be answered.
    const batch = await server.app.inject({
      method: 'POST',
      url: '/fhir/R4',
      headers: FHIR_JSON,
      payload: {
        resourceType: 'Bundle',
        type: 'batch',
        entry: [
          {
            resource: { resourceType: 'Basic', id: 'in-batch', code: { text: 'x'.repeat(2000) } },
            request: { method: 'PUT', url: 'Basic/in-batch' },
          },
        ],
      },
    });
    expect(batch.statusCode).toBe(200);
    const entry = (batch.json() as Bundle).entry?.[0];
    expect(entry?.response?.status).toBe('507');
    expect((entry?.response?.outcome as OperationOutcome | undefined)?.issue[0].code).toBe('no-store');

    store.limitSize(undefined);
    // Space is back: readiness finds it by itself, before any client writes.
    expect((await server.app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    expect((await put('after', 'written after')).statusCode).toBe(201);
    kept.set('after', 'written after');
    for (const [id, text] of kept) {
      const res = await server.app.inject({ method: 'GET', url: `/fhir/R4/Basic/${id}` });
      expect(res.statusCode, id).toBe(200);
      expect((res.json() as Basic).code.text, id).toBe(text);
    }
  });
});
