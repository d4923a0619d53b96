/**
 * The settings of a remote version (src/shared/remote-version.ts): the URL rule, the defaults, and
 * the server's configuration (LAMER_OPENAI_*) and the `POST /v1/models` schema reading the same
 * bounds and defaults.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { RegisterModel } from '../../src/agent/model-schemas.js';
import {
  REMOTE_DEFAULTS, REMOTE_INTEGER_SETTINGS, REMOTE_SETTINGS, remoteUrlFault, remoteVersionConfig,
} from '../../src/shared/remote-version.js';

const ENV = { LAMER_ENGINE: 'openai', LAMER_OPENAI_BASE_URL: 'http://gpu-host:8000/v1', LAMER_OPENAI_MODEL: 'm' };

describe('remoteUrlFault', () => {
  it('takes absolute http(s) URLs without credentials', () => {
    for (const u of ['http://gpu-host:8000/v1', 'https://api.example.com/v1', 'http://127.0.0.1:1/', 'http://[::1]:8000/v1']) {
      expect(remoteUrlFault(u), u).toBeNull();
    }
  });

  it('names the first fault: not a URL, then not http(s), then a user name or password', () => {
    for (const u of ['', 'nope', '/v1', 'http://[x']) expect(remoteUrlFault(u), u).toBe('not-url');
    for (const u of ['gpu-host:8000', 'ftp://gpu-host/v1', 'file:///etc/passwd', 'ws://gpu-host/v1', 'ftp://u:p@gpu-host/v1']) expect(remoteUrlFault(u), u).toBe('not-http');
    for (const u of ['http://u:p@gpu-host/v1', 'https://u@gpu-host/v1', 'http://:p@gpu-host/v1']) expect(remoteUrlFault(u), u).toBe('credentials');
  });
});

describe('remoteVersionConfig', () => {
  it('fills every setting left out with its default, in the stored order, and the key only when given', () => {
    const c = remoteVersionConfig({ baseUrl: 'http://h/v1', model: 'm' });
    expect(c).toEqual({
      baseUrl: 'http://h/v1', model: 'm', kind: 'plain', concurrency: 8, timeoutMs: 60_000, maxRetries: 3, maxActionTokens: 64,
      maxReflectionTokens: 512, maxResponseBytes: 4 * 1024 * 1024, callTimeoutMs: 100_000,
    });
    expect(Object.keys(c)).toEqual(['baseUrl', 'model', 'kind', ...REMOTE_INTEGER_SETTINGS]);
    expect(Object.keys(remoteVersionConfig({ baseUrl: 'http://h/v1', model: 'm', apiKey: 'k' }))).toEqual([
      'baseUrl', 'model', 'apiKey', 'kind', ...REMOTE_INTEGER_SETTINGS,
    ]);
  });

  it('keeps given settings, zero included, and treats undefined as left out', () => {
    const c = remoteVersionConfig({ baseUrl: 'http://h/v1', model: 'm', kind: 'vllm', maxRetries: 0, concurrency: undefined, apiKey: undefined });
    expect(c).toMatchObject({ kind: 'vllm', maxRetries: 0, concurrency: REMOTE_DEFAULTS.concurrency });
    expect('apiKey' in c).toBe(false);
  });
});

describe('the configuration and the registration schema read the same settings', () => {
  it('LAMER_ENGINE=openai with only a URL and a model is the defaults', () => {
    expect(loadConfig(ENV).openai).toEqual(remoteVersionConfig({ baseUrl: ENV.LAMER_OPENAI_BASE_URL, model: 'm' }));
  });

  it('each LAMER_OPENAI_* integer takes its bounds and refuses one past them, naming the variable', () => {
    for (const k of REMOTE_INTEGER_SETTINGS) {
      const s = REMOTE_SETTINGS[k];
      expect(loadConfig({ ...ENV, [s.env]: String(s.min) }).openai![k]).toBe(s.min);
      expect(loadConfig({ ...ENV, [s.env]: String(s.max) }).openai![k]).toBe(s.max);
      for (const bad of [s.min - 1, s.max + 1]) {
        const load = () => loadConfig({ ...ENV, [s.env]: String(bad) });
        expect(load).toThrow(ConfigError);
        expect(load).toThrow(`${s.env}=`);
        expect(load).toThrow(`: expected an integer in [${s.min}, ${s.max}]`);
      }
    }
  });

  it('refuses a base URL by the URL rule', () => {
    expect(() => loadConfig({ ...ENV, LAMER_OPENAI_BASE_URL: 'ftp://gpu-host/v1' })).toThrow(/expected an http\(s\) URL/);
    expect(() => loadConfig({ ...ENV, LAMER_OPENAI_BASE_URL: 'nope' })).toThrow(/expected an http\(s\) URL/);
    expect(() => loadConfig({ ...ENV, LAMER_OPENAI_BASE_URL: 'http://u:p@gpu-host/v1' })).toThrow(/must not contain a user name or password/);
  });

  it('POST /v1/models declares the same bounds and defaults', () => {
    const props = RegisterModel.properties as Record<string, { minimum?: number; maximum?: number; default?: unknown }>;
    for (const k of REMOTE_INTEGER_SETTINGS) {
      const s = REMOTE_SETTINGS[k];
      expect({ min: props[k]!.minimum, max: props[k]!.maximum, default: props[k]!.default }, k).toEqual({ min: s.min, max: s.max, default: s.default });
    }
    expect(props.kind!.default).toBe(REMOTE_DEFAULTS.kind);
  });
});
