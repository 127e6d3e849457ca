import { afterAll, describe, expect, test } from 'vitest';
import { SigningKeys } from '../../src/auth/signing-keys';
import type { EphemeralStore } from '../../src/storage/ephemeral';
import { PostgresStore } from '../../src/storage/postgres/postgres-store';
import { SqliteStore } from '../../src/storage/sqlite/sqlite-store';
import { freshSchema, hasPostgres, POSTGRES_SKIP_REASON } from '../helpers/postgres';
import { onBothBackends } from '../helpers/server-app';

/**
 * The first signing key exists from start-up: resource servers fetch /.well-known/jwks.json when
 * they start and cache it for five minutes, so an empty set there would refuse every token signed
 * meanwhile. Processes over one database make that key once, not once each.
 */

onBothBackends((name, open) => {
  describe(`the published keys of a fresh server (${name})`, () => {
    let cleanup: (() => Promise<void>) | undefined;
    afterAll(async () => cleanup?.());

    test('/.well-known/jwks.json lists one public key before anyone has signed in', async () => {
      const opened = await open();
      cleanup = opened.cleanup;
      const res = await opened.server.app.inject({ method: 'GET', url: '/.well-known/jwks.json' });
      expect(res.statusCode).toBe(200);
      const { keys } = res.json() as { keys: Record<string, unknown>[] };
      expect(keys).toHaveLength(1);
      expect(keys[0]).toMatchObject({ kty: 'EC', alg: 'ES256', use: 'sig', kid: expect.any(String) });
      expect(keys[0]).not.toHaveProperty('d');
    });
  });
});

/** Two processes' key sets over one store, their clocks either side of a minute's turn. */
async function startTogether(stores: [EphemeralStore, EphemeralStore]): Promise<string[][]> {
  const turn = Math.ceil(Date.now() / 60_000) * 60_000;
  const keys = stores.map((store, i) => new SigningKeys(store, 3600_000, () => turn - 1 + 2 * i));
  await Promise.all(keys.map((k) => k.current()));
  return Promise.all(keys.map(async (k) => (await k.jwks()).keys.map((key) => key.kid as string)));
}

describe('processes starting together over one database', () => {
  test('embedded storage: they make one key between them and publish the same one', async () => {
    const store = new SqliteStore(':memory:');
    await store.migrate();
    try {
      const [a, b] = await startTogether([store.ephemeral, store.ephemeral]);
      expect(a).toHaveLength(1);
      expect(b).toEqual(a);
    } finally {
      store.close();
    }
  });

  test.skipIf(!hasPostgres)(
    hasPostgres ? 'PostgreSQL: they make one key between them and publish the same one' : POSTGRES_SKIP_REASON,
    async () => {
      const schema = await freshSchema();
      const stores = [new PostgresStore(schema.url), new PostgresStore(schema.url)];
      try {
        await stores[0].migrate();
        const [a, b] = await startTogether([stores[0].ephemeral, stores[1].ephemeral]);
        expect(a).toHaveLength(1);
        expect(b).toEqual(a);
      } finally {
        for (const s of stores) await s.close();
        await schema.drop();
      }
    },
  );
});
