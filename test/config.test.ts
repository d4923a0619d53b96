/** Configuration from the environment (src/config.ts): defaults, API keys, errors naming the variable. */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { parseAllowedHosts, parseApiKeys } from '../src/config/access.js';
import { DEFAULT_FORWARD_SECTION_TOKENS } from '../src/model/batcher.js';

describe('config', () => {
  it('defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({ host: '127.0.0.1', port: 8080, engine: 'builtin', tfjsBackend: 'auto', apiKeys: [], logLevel: 'info' });
    expect(c.limits.observationChars).toBe(65536);
    expect(c.limits.availableActions).toBe(512);
    expect(c.limits.actionChars).toBe(1024);
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
  it('parses API keys', () => {
    expect(parseApiKeys('key1abcd:tenantA, key2abcd:tenantB:admin')).toEqual([
      { key: 'key1abcd', tenant: 'tenantA', admin: false },
      { key: 'key2abcd', tenant: 'tenantB', admin: true },
    ]);
  });
  it('LAMER_ALLOWED_HOSTS: none unless set; names and addresses, lower-cased, IPv6 without brackets', () => {
    expect(loadConfig({}).allowedHosts).toEqual([]);
    expect(parseAllowedHosts(' Lamer.Internal ,10.0.0.7,[FD00::1], fd00::2, gpu-1.example.com., ')).toEqual([
      'lamer.internal', '10.0.0.7', 'fd00::1', 'fd00::2', 'gpu-1.example.com',
    ]);
  });
  it.each([
    ['*', /LAMER_ALLOWED_HOSTS: "\*" is not a host name/],
    ['lamer.internal:8080', /without a port/],
    ['http://lamer.internal', /LAMER_ALLOWED_HOSTS: "http:\/\/lamer.internal"/],
    ['bad host', /LAMER_ALLOWED_HOSTS: "bad host"/],
    ['-x.example', /LAMER_ALLOWED_HOSTS/],
    ['[fd00::1', /LAMER_ALLOWED_HOSTS/],
  ])('LAMER_ALLOWED_HOSTS=%j is rejected', (raw, msg) => {
    expect(() => loadConfig({ LAMER_ALLOWED_HOSTS: raw })).toThrow(ConfigError);
    expect(() => loadConfig({ LAMER_ALLOWED_HOSTS: raw })).toThrow(msg);
  });
  it.each([
    [{ LAMER_PORT: 'abc' }, /LAMER_PORT="abc": expected an integer in \[0, 65535\]/],
    [{ LAMER_PORT: '70000' }, /LAMER_PORT=70000/],
    [{ LAMER_ENGINE: 'gpt' }, /LAMER_ENGINE="gpt": expected one of builtin, test/],
    [{ LAMER_TFJS_BACKEND: 'cuda' }, /LAMER_TFJS_BACKEND/],
    [{ LAMER_LOG_LEVEL: 'loud' }, /LAMER_LOG_LEVEL/],
    [{ LAMER_API_KEYS: 'onlykey' }, /LAMER_API_KEYS: bad entry/],
    [{ LAMER_API_KEYS: 'short:t' }, /at least 8 characters/],
    [{ LAMER_API_KEYS: 'key1abcd:a,key1abcd:b' }, /duplicate key/],
    [{ LAMER_MAX_OBSERVATION_CHARS: '-5' }, /LAMER_MAX_OBSERVATION_CHARS/],
    [{ LAMER_DEFAULT_MAX_STEPS: '500', LAMER_MAX_STEPS_CAP: '100' }, /exceeds LAMER_MAX_STEPS_CAP/],
  ])('%j is rejected', (env, msg) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(msg);
  });
});
