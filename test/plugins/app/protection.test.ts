/**
 * The per-key rate limit is decided on the route the router matched: every spelling of a path that
 * reaches a `/v1` route (percent-escapes) counts against the key's budget, and once it is spent
 * every spelling is 429; a spelling no route matches is 404 and reaches no handler.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawCall, startTestServer, type TestServer } from '../../helpers/index.js';

const RATE_MAX = 12;
const KEY = { authorization: 'Bearer key-rate-0123' };
const OTHER = { authorization: 'Bearer key-other-0123' };
let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({
    apiKeys: [
      { key: 'key-rate-0123', tenant: 'a', admin: false },
      { key: 'key-other-0123', tenant: 'b', admin: false },
    ],
    protection: { rateLimitMax: RATE_MAX, rateLimitWindowSeconds: 600, maxOpenSessionsPerTenant: 100, maxQueuedSteps: 100, overloadRetryAfterSeconds: 1 },
  });
});
afterAll(async () => {
  await t.close();
});

describe('rate limit by key, whatever the spelling', () => {
  it('routed spellings count against the key; over the limit every spelling is 429', async () => {
    const routed = ['/v1/sessions', '/%76%31/sessions', '/v%31/sessions', '/v1/%73essions', '/v1/stats', '/%76%31/stats'];
    const unrouted = ['/V1/sessions', '/%56%31/sessions', '//v1/sessions', '/v1/./sessions', '/v1/stats/', '/v1;x=1/sessions'];
    const statuses: number[] = [];
    for (let i = 0; i < RATE_MAX; i++) {
      const r = await rawCall(t.url, 'GET', routed[i % routed.length]!, undefined, KEY);
      statuses.push(r.status);
      expect(r.headers.get('x-ratelimit-remaining'), routed[i % routed.length]).toBe(String(RATE_MAX - 1 - i));
      // Unrouted spellings are 404 and neither count nor are limited.
      const u = await rawCall(t.url, 'GET', unrouted[i % unrouted.length]!, undefined, KEY);
      expect(u.status).toBe(404);
    }
    expect(statuses).toEqual(Array(RATE_MAX).fill(200));
    for (const p of routed) {
      const r = await rawCall(t.url, 'GET', p, undefined, KEY);
      expect(r.status, p).toBe(429);
      expect(r.body.type).toBe('https://lamer-server.dev/problems/rate-limited');
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
    // Another key has its own budget; requests without a key are 401 before any counting.
    expect((await rawCall(t.url, 'GET', '/%76%31/sessions', undefined, OTHER)).status).toBe(200);
    expect((await rawCall(t.url, 'GET', '/%76%31/sessions')).status).toBe(401);
    // Operations routes are never limited.
    expect((await rawCall(t.url, 'GET', '/healthz', undefined, KEY)).status).toBe(200);
  });

  it('body limits follow the matched route: an encoded spelling of /v1/sessions has the 2 MiB limit, of steps:batch the 16 MiB one', async () => {
    const pad = 'x'.repeat(2 * 1024 * 1024 + 10);
    const big = await rawCall(t.url, 'POST', '/%76%31/sessions', { taskId: 't', instructions: pad }, OTHER);
    expect(big.status).toBe(413);
    expect(big.body.type).toBe('https://lamer-server.dev/problems/payload-too-large');
    const batch = await rawCall(t.url, 'POST', '/%76%31/steps:batch', { items: [{ sessionId: 'ses_none', attempt: 0, step: 0, observation: pad.slice(0, 10), info: { pad } }] }, OTHER);
    // Past the body limit (parsed): the item itself is refused on its own (info too large).
    expect(batch.status).toBe(200);
    expect(batch.body.results[0].error.errors[0].field).toBe('body/items/0/info');
  });
});
