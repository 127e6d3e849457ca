import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { ConfigError, loadConfig, readEnv } from '../src/config';

describe('configuration', () => {
  test('defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 8080,
      host: '127.0.0.1',
      dataDir: './data',
      authTokens: [],
      logLevel: 'info',
      bodyLimit: 10 * 1024 * 1024,
    });
    expect(config.databaseUrl).toBeUndefined();
    expect(config).toMatchObject({
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 60_000,
      answerCacheBytes: 64 * 1024 * 1024,
    });
    expect(config.baseUrl).toBeUndefined();
  });

  test('timeouts, the answer cache bound and the public base URL', () => {
    const config = loadConfig({
      HEADERS_TIMEOUT_MS: '2000',
      REQUEST_TIMEOUT_MS: '5000',
      ANSWER_CACHE_BYTES: '16mb',
      BASE_URL: 'https://tx.example.org/fhir/R4/',
    });
    expect(config).toMatchObject({
      headersTimeoutMs: 2000,
      requestTimeoutMs: 5000,
      answerCacheBytes: 16 * 1024 * 1024,
      baseUrl: 'https://tx.example.org/fhir/R4',
    });
  });

  test('CORS origins: none by default, a comma-separated list, or any', () => {
    expect(loadConfig({}).corsOrigins).toEqual([]);
    expect(loadConfig({ CORS_ORIGINS: 'https://app.example.org, http://localhost:3000/' }).corsOrigins).toEqual([
      'https://app.example.org',
      'http://localhost:3000',
    ]);
    expect(loadConfig({ CORS_ORIGINS: '*' }).corsOrigins).toEqual(['*']);
  });

  test('values are read and typed', () => {
    const config = loadConfig({
      PORT: '9000',
      HOST: 'localhost',
      DATA_DIR: '/var/x',
      DATABASE_URL: 'postgres://u@h:5432/db',
      AUTH_TOKENS: 'aaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbb',
      LOG_LEVEL: 'warn',
      BODY_LIMIT: '2mb',
    });
    expect(config).toMatchObject({
      port: 9000,
      host: 'localhost',
      dataDir: '/var/x',
      databaseUrl: 'postgres://u@h:5432/db',
      logLevel: 'warn',
      bodyLimit: 2 * 1024 * 1024,
    });
    expect(config.authTokens).toEqual(['aaaaaaaaaaaaaaaa', 'bbbbbbbbbbbbbbbb']);
  });

  test('outbound exceptions and websocket limits', () => {
    expect(loadConfig({})).toMatchObject({
      outboundAllowTargets: [],
      wsBindTimeoutMs: 10_000,
      wsMaxPerAddress: 16,
      wsMaxConnections: 512,
    });
    const config = loadConfig({
      OUTBOUND_ALLOW_TARGETS: '10.0.0.5:8443, [FD00:0:0::5]:9000',
      WS_BIND_TIMEOUT_MS: '2000',
      WS_MAX_PER_ADDRESS: '4',
      WS_MAX_CONNECTIONS: '100',
    });
    // Written as the URL parser writes them: the outbound connector compares them as text.
    expect(config.outboundAllowTargets).toEqual(['10.0.0.5:8443', '[fd00::5]:9000']);
    expect(config).toMatchObject({ wsBindTimeoutMs: 2000, wsMaxPerAddress: 4, wsMaxConnections: 100 });
  });

  test.each([
    [{ OUTBOUND_ALLOW_TARGETS: 'internal.example:8443' }, /^OUTBOUND_ALLOW_TARGETS: /],
    [{ OUTBOUND_ALLOW_TARGETS: '10.0.0.5' }, /^OUTBOUND_ALLOW_TARGETS: /],
    [{ OUTBOUND_ALLOW_TARGETS: '10.0.0.5:70000' }, /^OUTBOUND_ALLOW_TARGETS: /],
    [{ WS_BIND_TIMEOUT_MS: 'never' }, /^WS_BIND_TIMEOUT_MS: /],
    [{ WS_MAX_PER_ADDRESS: '0' }, /^WS_MAX_PER_ADDRESS: /],
    [{ PORT: 'eighty' }, /^PORT: /],
    [{ PORT: '70000' }, /^PORT: /],
    [{ LOG_LEVEL: 'loud' }, /^LOG_LEVEL: /],
    [{ BODY_LIMIT: 'huge' }, /^BODY_LIMIT: /],
    [{ DATABASE_URL: 'mysql://x' }, /^DATABASE_URL: /],
    [{ AUTH_TOKENS: 'short' }, /^AUTH_TOKENS: /],
    [{ HOST: '0.0.0.0' }, /^AUTH_TOKENS: required when HOST/],
    [{ ALLOW_ANONYMOUS: 'maybe' }, /^ALLOW_ANONYMOUS: /],
    [{ REQUEST_TIMEOUT_MS: 'soon' }, /^REQUEST_TIMEOUT_MS: /],
    [{ HEADERS_TIMEOUT_MS: '20000', REQUEST_TIMEOUT_MS: '10000' }, /^HEADERS_TIMEOUT_MS: /],
    [{ ANSWER_CACHE_BYTES: 'lots' }, /^ANSWER_CACHE_BYTES: /],
    [{ BASE_URL: 'tx.example.org/fhir' }, /^BASE_URL: /],
    [{ BASE_URL: 'ftp://tx.example.org/fhir' }, /^BASE_URL: /],
    [{ BASE_URL: 'https://tx.example.org/fhir?x=1' }, /^BASE_URL: /],
    [{ CORS_ORIGINS: 'https://app.example.org/path' }, /^CORS_ORIGINS: /],
    [{ CORS_ORIGINS: 'app.example.org' }, /^CORS_ORIGINS: /],
    [{ BULK_EXPORTS_PER_PROJECT: '0' }, /^BULK_EXPORTS_PER_PROJECT: /],
    [{ BULK_EXPORT_EXPIRY_HOURS: 'a week' }, /^BULK_EXPORT_EXPIRY_HOURS: /],
  ])('a bad value stops start-up with one line naming the variable: %j', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  test('a non-loopback host is allowed with tokens or with ALLOW_ANONYMOUS=true', () => {
    expect(loadConfig({ HOST: '0.0.0.0', AUTH_TOKENS: 'cccccccccccccccc' }).host).toBe('0.0.0.0');
    expect(loadConfig({ HOST: '0.0.0.0', ALLOW_ANONYMOUS: 'true' }).allowAnonymous).toBe(true);
  });

  test('.env is read under the environment, which wins', () => {
    const dir = mkdtempSync(join(tmpdir(), 'env-'));
    const file = join(dir, '.env');
    writeFileSync(file, 'PORT=7000\nLOG_LEVEL=debug\n# comment\n');
    expect(readEnv(file, { LOG_LEVEL: 'warn' })).toMatchObject({ PORT: '7000', LOG_LEVEL: 'warn' });
    expect(readEnv(join(dir, 'missing.env'), { A: '1' })).toEqual({ A: '1' });
  });
});
