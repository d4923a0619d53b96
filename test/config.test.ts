/**
 * Configuration from the environment (src/config.ts `loadConfig`): each variable's default, its
 * wiring to its parser, and errors naming the variable. The parsers themselves are tested in
 * test/config/ (access, values, types).
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, defaultLimits, loadConfig } from '../src/config.js';
import { DEFAULT_FORWARD_SECTION_TOKENS } from '../src/model/batcher.js';

describe('config', () => {
  it('defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({ host: '127.0.0.1', port: 8080, engine: 'builtin', tfjsBackend: 'auto', apiKeys: [], logLevel: 'info' });
    expect(c.limits).toEqual(defaultLimits);
  });
  it('LAMER_SERVE_WORKERS: 1 (in-process engine) unless set, an integer in [1, 256]', () => {
    expect(loadConfig({}).serveWorkers).toBe(1);
    expect(loadConfig({ LAMER_SERVE_WORKERS: '2' }).serveWorkers).toBe(2);
    expect(() => loadConfig({ LAMER_SERVE_WORKERS: '0' })).toThrow('LAMER_SERVE_WORKERS=0: expected an integer in [1, 256]');
  });
  it('LAMER_FORWARD_SECTION_TOKENS: the batcher\'s default unless set, an integer in [1, 1048576]', () => {
    expect(loadConfig({}).forwardSectionTokens).toBe(DEFAULT_FORWARD_SECTION_TOKENS);
    expect(loadConfig({ LAMER_FORWARD_SECTION_TOKENS: '2048' }).forwardSectionTokens).toBe(2048);
    expect(() => loadConfig({ LAMER_FORWARD_SECTION_TOKENS: '0' })).toThrow('LAMER_FORWARD_SECTION_TOKENS=0: expected an integer in [1, 1048576]');
    expect(() => loadConfig({ LAMER_FORWARD_SECTION_TOKENS: '12.5' })).toThrow('LAMER_FORWARD_SECTION_TOKENS="12.5": expected an integer in [1, 1048576]');
  });
  it('LAMER_HEALTH_PORT: no health listener unless set; a port in [0, 65535] other than LAMER_PORT; LAMER_HEALTH_STALL_SECONDS 30 unless set, fractions allowed', () => {
    expect(loadConfig({}).health).toBeNull();
    expect(loadConfig({ LAMER_HEALTH_PORT: '' }).health).toBeNull();
    expect(loadConfig({ LAMER_HEALTH_PORT: '9091' }).health).toEqual({ port: 9091, stallSeconds: 30 });
    expect(loadConfig({ LAMER_HEALTH_PORT: '0', LAMER_PORT: '0' }).health).toEqual({ port: 0, stallSeconds: 30 });
    expect(loadConfig({ LAMER_HEALTH_PORT: '9091', LAMER_HEALTH_STALL_SECONDS: '1.5' }).health).toEqual({ port: 9091, stallSeconds: 1.5 });
    for (const bad of ['abc', '-1', '70000', '90.5']) {
      expect(() => loadConfig({ LAMER_HEALTH_PORT: bad })).toThrow(`LAMER_HEALTH_PORT=${/^\d+$/.test(bad) ? bad : JSON.stringify(bad)}: expected an integer in [0, 65535]`);
    }
    expect(() => loadConfig({ LAMER_HEALTH_PORT: '8080' })).toThrow("LAMER_HEALTH_PORT=8080 is the API's port (LAMER_PORT)");
    expect(() => loadConfig({ LAMER_HEALTH_PORT: '9000', LAMER_PORT: '9000' })).toThrow(ConfigError);
    for (const bad of ['0', '0.1', 'x', '3601', 'NaN']) {
      expect(() => loadConfig({ LAMER_HEALTH_PORT: '9091', LAMER_HEALTH_STALL_SECONDS: bad }))
        .toThrow(`LAMER_HEALTH_STALL_SECONDS=${JSON.stringify(bad)}: expected a number in [0.5, 3600]`);
    }
    expect(() => loadConfig({ LAMER_HEALTH_STALL_SECONDS: '5' })).toThrow('LAMER_HEALTH_STALL_SECONDS is set but LAMER_HEALTH_PORT is not');
  });

  it('LAMER_SQLITE_SYNC: normal unless set, normal or full', () => {
    expect(loadConfig({}).sqliteSync).toBe('normal');
    expect(loadConfig({ LAMER_SQLITE_SYNC: 'full' }).sqliteSync).toBe('full');
    expect(() => loadConfig({ LAMER_SQLITE_SYNC: 'FULL' })).toThrow(/LAMER_SQLITE_SYNC/);
  });
  it('LAMER_MATMUL: auto unless set, auto, blas or wasm; LAMER_BLAS_THREADS: 1 unless set, an integer in [1, 64]', () => {
    expect(loadConfig({})).toMatchObject({ matmul: 'auto', blasThreads: 1 });
    expect(loadConfig({ LAMER_MATMUL: 'wasm', LAMER_BLAS_THREADS: '2' })).toMatchObject({ matmul: 'wasm', blasThreads: 2 });
    expect(() => loadConfig({ LAMER_MATMUL: 'mkl' })).toThrow(/LAMER_MATMUL/);
    expect(() => loadConfig({ LAMER_BLAS_THREADS: '0' })).toThrow('LAMER_BLAS_THREADS=0: expected an integer in [1, 64]');
  });
  it('LAMER_DATABASE_URL: unset or empty is SQLite (null); a PostgreSQL URL with the pool settings and their defaults', () => {
    expect(loadConfig({}).postgres).toBeNull();
    expect(loadConfig({ LAMER_DATABASE_URL: ' ' }).postgres).toBeNull();
    expect(loadConfig({ LAMER_DATABASE_URL: 'postgres://u:p@db:5432/lamer' }).postgres).toEqual({
      url: 'postgres://u:p@db:5432/lamer', maxConnections: 10, connectTimeoutMs: 5000, statementTimeoutMs: 30000, idleTimeoutMs: 30000,
      migrationLockTimeoutMs: 60000, pollMs: 2000,
    });
    const env = {
      LAMER_DATABASE_URL: 'postgresql:///lamer?host=/run/postgresql', LAMER_DATABASE_POOL_MAX: '4', LAMER_DATABASE_CONNECT_TIMEOUT_MS: '1500',
      LAMER_DATABASE_STATEMENT_TIMEOUT_MS: '0', LAMER_DATABASE_IDLE_TIMEOUT_MS: '0', LAMER_DATABASE_MIGRATION_LOCK_TIMEOUT_MS: '1000', LAMER_DATABASE_POLL_MS: '250',
    };
    expect(loadConfig(env).postgres).toEqual({
      url: 'postgresql:///lamer?host=/run/postgresql', maxConnections: 4, connectTimeoutMs: 1500, statementTimeoutMs: 0, idleTimeoutMs: 0,
      migrationLockTimeoutMs: 1000, pollMs: 250,
    });
    // the URL may hold a password: an error never repeats it
    for (const url of ['secret@db/lamer', 'mysql://u:secret@db/lamer']) {
      expect(() => loadConfig({ LAMER_DATABASE_URL: url })).toThrow(ConfigError);
      try {
        loadConfig({ LAMER_DATABASE_URL: url });
      } catch (err) {
        expect((err as Error).message).not.toContain('secret');
      }
    }
    expect(() => loadConfig({ LAMER_DATABASE_URL: 'postgres://db/x', LAMER_DATABASE_POLL_MS: '10' })).toThrow('LAMER_DATABASE_POLL_MS=10: expected an integer in [50, 600000]');
  });
  it('LAMER_ROLE: both unless set; server, trainer or both', () => {
    expect(loadConfig({}).role).toBe('both');
    expect(loadConfig({ LAMER_ROLE: 'trainer' }).role).toBe('trainer');
    expect(() => loadConfig({ LAMER_ROLE: 'worker' })).toThrow('LAMER_ROLE="worker": expected one of server, trainer, both');
  });
  it('LAMER_API_KEYS: none unless set; parsed by parseApiKeys', () => {
    expect(loadConfig({}).apiKeys).toEqual([]);
    expect(loadConfig({ LAMER_API_KEYS: 'key1abcd:tenantA, key2abcd:tenantB:admin' }).apiKeys).toEqual([
      { key: 'key1abcd', tenant: 'tenantA', admin: false },
      { key: 'key2abcd', tenant: 'tenantB', admin: true },
    ]);
  });
  it('LAMER_ALLOWED_HOSTS: none unless set; parsed by parseAllowedHosts', () => {
    expect(loadConfig({}).allowedHosts).toEqual([]);
    expect(loadConfig({ LAMER_ALLOWED_HOSTS: ' Lamer.Internal ,[FD00::1]' }).allowedHosts).toEqual(['lamer.internal', 'fd00::1']);
  });
  it.each([
    [{ LAMER_PORT: 'abc' }, /LAMER_PORT="abc": expected an integer in \[0, 65535\]/],
    [{ LAMER_PORT: '70000' }, /LAMER_PORT=70000/],
    [{ LAMER_ENGINE: 'gpt' }, /LAMER_ENGINE="gpt": expected one of builtin, test/],
    [{ LAMER_TFJS_BACKEND: 'cuda' }, /LAMER_TFJS_BACKEND/],
    [{ LAMER_LOG_LEVEL: 'loud' }, /LAMER_LOG_LEVEL/],
    [{ LAMER_API_KEYS: 'onlykey' }, /LAMER_API_KEYS: bad entry/],
    [{ LAMER_ALLOWED_HOSTS: '*' }, /LAMER_ALLOWED_HOSTS: "\*" is not a host name/],
    [{ LAMER_TRUST_PROXY: 'true' }, /LAMER_TRUST_PROXY: "true"/],
    [{ LAMER_MAX_OBSERVATION_CHARS: '-5' }, /LAMER_MAX_OBSERVATION_CHARS/],
    [{ LAMER_DEFAULT_MAX_STEPS: '500', LAMER_MAX_STEPS_CAP: '100' }, /exceeds LAMER_MAX_STEPS_CAP/],
  ])('%j is rejected', (env, msg) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(msg);
  });
});
