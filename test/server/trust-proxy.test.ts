/**
 * LAMER_TRUST_PROXY (docs/deploy.md, "behind a gateway"): X-Forwarded-For is believed only from
 * the configured gateway addresses. Observed through the per-IP rate limit (no API keys): with the
 * gateway trusted, two end clients behind it get separate buckets; without it, the header is
 * ignored and every request counts against the gateway's own address.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, parseTrustProxy } from '../../src/config.js';
import { call, startTestServer, type TestServer } from '../helpers/index.js';

const protection = { rateLimitMax: 1, rateLimitWindowSeconds: 60, maxOpenSessionsPerTenant: 0, maxQueuedSteps: 0, overloadRetryAfterSeconds: 1 };
let server: TestServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const fromClient = (ip: string) => ({ 'x-forwarded-for': ip });

describe('LAMER_TRUST_PROXY', () => {
  it('parses addresses and CIDR ranges, and refuses anything else by name', () => {
    expect(parseTrustProxy(undefined)).toEqual([]);
    expect(parseTrustProxy(' ')).toEqual([]);
    expect(parseTrustProxy('10.0.0.2, 10.0.0.0/24,fd00::/8,::1')).toEqual(['10.0.0.2', '10.0.0.0/24', 'fd00::/8', '::1']);
    for (const bad of ['true', '*', '10.0.0.0/33', 'fd00::/129', '10.0.0.1/8/1', 'gateway.local', '10.0.0.0/']) {
      expect(() => parseTrustProxy(bad)).toThrow(ConfigError);
    }
    expect(() => parseTrustProxy('10.0.0.1,nope')).toThrow(/"nope"/);
  });

  it('from a trusted gateway, each forwarded client has its own rate-limit bucket', async () => {
    server = await startTestServer({ trustProxy: ['127.0.0.1'], protection });
    expect((await call(server.url, 'GET', '/v1/sessions', undefined, fromClient('203.0.113.5'))).status).toBe(200);
    expect((await call(server.url, 'GET', '/v1/sessions', undefined, fromClient('203.0.113.6'))).status).toBe(200);
    const again = await call(server.url, 'GET', '/v1/sessions', undefined, fromClient('203.0.113.5'));
    expect(again.status).toBe(429);
  });

  it('without it, X-Forwarded-For is ignored: the header cannot buy a fresh bucket', async () => {
    server = await startTestServer({ protection });
    expect((await call(server.url, 'GET', '/v1/sessions', undefined, fromClient('203.0.113.5'))).status).toBe(200);
    const spoofed = await call(server.url, 'GET', '/v1/sessions', undefined, fromClient('203.0.113.6'));
    expect(spoofed.status).toBe(429);
  });
});
