import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { contextsAllowing, parseScopes, ScopeError } from '../../src/auth/scopes';
import { KEY_SIGNS_FOR, SigningKeys } from '../../src/auth/signing-keys';
import { TokenService } from '../../src/auth/tokens';
import { SqliteStore } from '../../src/storage/sqlite/sqlite-store';

describe('SMART scopes', () => {
  test('v1 and v2 permissions, contexts, and the scopes that are not about resources', () => {
    const set = parseScopes(
      'openid offline_access system/Patient.rs user/*.read patient/Observation.cruds launch/patient',
    );
    expect(set.other).toEqual(['openid', 'offline_access', 'launch/patient']);
    expect([...contextsAllowing(set, 'Patient', 'r')].sort()).toEqual(['system', 'user']);
    expect([...contextsAllowing(set, 'Patient', 'c')]).toEqual([]);
    expect([...contextsAllowing(set, 'Observation', 'd')]).toEqual(['patient']);
    expect([...contextsAllowing(set, 'Encounter', 's')]).toEqual(['user']);
    expect([...contextsAllowing(parseScopes('user/*.write'), 'Patient', 'u')]).toEqual(['user']);
    expect([...contextsAllowing(parseScopes('user/*.write'), 'Patient', 'r')]).toEqual([]);
  });

  test.each([
    ['system/Observation.rs?category=laboratory', /query/],
    ['system/Patient.sr', /order/],
    ['system/patient.read', /resource type/],
  ])('%s is refused', (text, reason) => {
    expect(() => parseScopes(text)).toThrow(ScopeError);
    expect(() => parseScopes(text)).toThrow(reason);
  });
});

describe('signing keys and access tokens', () => {
  let store: SqliteStore;
  beforeAll(async () => {
    store = new SqliteStore(':memory:');
    await store.migrate();
  });
  afterAll(() => store.close());

  test('a rotated key signs new tokens; tokens of the old one stay valid, in every process over the store', async () => {
    let now = Date.now();
    const keys = new SigningKeys(store.ephemeral, 3600_000, () => now);
    const tokens = new TokenService(keys, store.ephemeral, 'urn:test');
    const before = await tokens.accessToken({ project: 'p1', admin: false, scope: 'system/Patient.rs', client: 'c1' });
    const [first] = (await keys.jwks()).keys;
    expect(first).not.toHaveProperty('d');

    now += KEY_SIGNS_FOR + 60_000;
    const after = await tokens.accessToken({ project: 'p1', admin: true, membership: 'm1' });
    const published = (await keys.jwks()).keys.map((k) => k.kid);
    expect(published).toHaveLength(2);
    expect(published).toContain(first.kid);

    // Another process: its own keys and token service over the same store.
    const other = new TokenService(new SigningKeys(store.ephemeral, 3600_000, () => now), store.ephemeral, 'urn:test');
    const a = await other.verify(before);
    expect(a).toMatchObject({ operator: false, project: 'p1', client: 'c1', admin: false });
    expect(a?.scopes?.resources[0].text).toBe('system/Patient.rs');
    expect(await other.verify(after)).toMatchObject({ project: 'p1', admin: true, membership: 'm1' });
    // Another issuer, a changed payload, garbage: not ours.
    const foreign = new TokenService(keys, store.ephemeral, 'urn:elsewhere');
    expect(await foreign.verify(before)).toBeUndefined();
    const [h, p, s] = before.split('.');
    const forged = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(p, 'base64url').toString()), admin: true }),
    ).toString('base64url');
    expect(await other.verify(`${h}.${forged}.${s}`)).toBeUndefined();
    expect(await other.verify('a.b.c')).toBeUndefined();
  });

  test('a refresh token is good once', async () => {
    const tokens = new TokenService(new SigningKeys(store.ephemeral, 3600_000), store.ephemeral, 'urn:test');
    const refresh = await tokens.refreshToken({ project: 'p1', admin: false, membership: 'm1' });
    expect(await tokens.useRefreshToken(refresh)).toMatchObject({ membership: 'm1' });
    expect(await tokens.useRefreshToken(refresh)).toBeUndefined();
  });
});
