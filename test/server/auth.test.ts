/** API keys: 401 without/with a bad key, 403 for admin routes, tenant isolation (404). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './helpers.js';

let s: TestServer;
const A = { authorization: 'Bearer key-tenant-a' };
const B = { authorization: 'Bearer key-tenant-b' };
const ADMIN = { authorization: 'Bearer key-admin-1' };

beforeAll(async () => {
  s = await startTestServer({
    apiKeys: [
      { key: 'key-tenant-a', tenant: 'a', admin: false },
      { key: 'key-tenant-b', tenant: 'b', admin: false },
      { key: 'key-admin-1', tenant: 'ops', admin: true },
    ],
  });
});
afterAll(async () => {
  await s.close();
});

describe('authentication', () => {
  it('every /v1 route needs a key; operations routes do not', async () => {
    const none = await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' });
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer');
    expect(none.body.type).toBe('https://lamer-server.dev/problems/unauthorized');
    const bad = await s.call('GET', '/v1/sessions', undefined, { authorization: 'Bearer wrong-key-123' });
    expect(bad.status).toBe(401);
    expect(bad.body.detail).toBe('unknown API key');
    expect((await s.call('GET', '/v1/sessions', undefined, { authorization: 'Basic abc' })).status).toBe(401);
    expect((await s.call('GET', '/healthz')).status).toBe(200);
    expect((await s.call('GET', '/readyz')).status).toBe(200);
  });

  it("a tenant sees only its own sessions: another tenant's is 404", async () => {
    const c = await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' }, A);
    expect(c.status).toBe(201);
    const id = c.body.id;
    expect((await s.call('GET', `/v1/sessions/${id}`, undefined, A)).status).toBe(200);
    for (const [method, path, body] of [
      ['GET', `/v1/sessions/${id}`, undefined],
      ['GET', `/v1/sessions/${id}/trajectory`, undefined],
      ['GET', `/v1/sessions/${id}/memory`, undefined],
      ['POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o' }],
      ['DELETE', `/v1/sessions/${id}`, undefined],
    ] as const) {
      const r = await s.call(method, path, body, B);
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(r.body.type).toBe('https://lamer-server.dev/problems/not-found');
    }
    const batch = await s.call('POST', '/v1/steps:batch', { items: [{ sessionId: id, attempt: 0, step: 0, observation: 'o' }] }, B);
    expect(batch.body.results[0]).toMatchObject({ ok: false, error: { status: 404 } });
    expect((await s.call('GET', '/v1/sessions', undefined, B)).body.items).toEqual([]);
    expect((await s.call('GET', '/v1/sessions', undefined, A)).body.items.map((x: any) => x.id)).toEqual([id]);
    // Still untouched for its owner.
    const g = await s.call('GET', `/v1/sessions/${id}`, undefined, A);
    expect(g.body).toMatchObject({ status: 'active', next: { attempt: 0, step: 0 } });
  });

  it('model routes need an admin key', async () => {
    const r = await s.call('GET', '/v1/models', undefined, A);
    expect(r.status).toBe(403);
    expect(r.body.type).toBe('https://lamer-server.dev/problems/forbidden');
    expect((await s.call('POST', '/v1/models/test/activate', undefined, A)).status).toBe(403);
    expect((await s.call('GET', '/v1/models', undefined, ADMIN)).status).toBe(200);
    expect((await s.call('POST', '/v1/models/test/activate', undefined, ADMIN)).status).toBe(200);
  });
});
