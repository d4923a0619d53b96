/**
 * API keys: 401 without/with a bad key, 403 for admin routes, tenant isolation (404); and the
 * same decisions for every spelling of a path the router may send to a route (percent-escapes,
 * case, repeated slashes, dot segments, trailing slash, `;` parameters): each is 404 or 401
 * without a key (403 with a non-admin key on admin routes), and nothing is read or written.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countRows, dumpDb, rawCall, startTestServer, type TestServer } from '../../helpers/index.js';

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

/** Other spellings of a canonical `/v1/...` path, as a client could send them on the wire. */
function spellings(p: string): string[] {
  const rest = p.slice('/v1'.length); // '/sessions/...'
  const enc = (c: string) => '%' + c.charCodeAt(0).toString(16).padStart(2, '0');
  const out = [
    p,
    // percent-encoded letters and digits (upper and lower case hex)
    `/%76%31${rest}`,
    `/v%31${rest}`,
    `/%56%31${rest}`,
    `/v1/${enc(rest[1]!)}${rest.slice(2)}`,
    `/v1/${enc(rest[1]!).toUpperCase()}${rest.slice(2)}`,
    `/%2fv1${rest}`,
    `/v1%2f${rest.slice(1)}`,
    p.replace(':', '%3A'),
    p.replace(':', '%3a'),
    // case
    `/V1${rest}`,
    p.toUpperCase(),
    // repeated slashes
    `//v1${rest}`,
    p.replace(/\//g, '//'),
    `/v1/${rest}`,
    // dot segments, plain and encoded
    `/x/../v1${rest}`,
    `/v1/.${rest}`,
    `/v1/x/..${rest}`,
    `/x/%2e%2e/v1${rest}`,
    `/%2e/v1${rest}`,
    // trailing slash, `;` parameters, a fragment-like suffix
    `${p}/`,
    `/v1;x=1${rest}`,
    `${p};x=1`,
    `/v1${rest.replace(/\/([^/]+)$/, '/$1;a=b')}`,
    `${p}%00`,
    `${p}%20`,
    `/v1\\${rest.slice(1)}`,
  ];
  return [...new Set(out)];
}

describe('authentication is decided on the matched route, whatever the URL spelling', () => {
  let t: TestServer;
  let id: string;
  const KEY_A = { authorization: 'Bearer key-tenant-a' };
  const ADMIN_KEY = { authorization: 'Bearer key-admin-1' };
  beforeAll(async () => {
    t = await startTestServer({
      apiKeys: [
        { key: 'key-tenant-a', tenant: 'a', admin: false },
        { key: 'key-admin-1', tenant: 'ops', admin: true },
      ],
    });
    const c = await t.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' }, KEY_A);
    expect(c.status).toBe(201);
    id = c.body.id;
    expect((await t.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o' }, KEY_A)).status).toBe(200);
  });
  afterAll(async () => {
    await t.close();
  });

  /** [method, canonical path, body, admin route] for every route group. */
  const groups = (): Array<[string, string, unknown, boolean]> => [
    ['GET', '/v1/sessions', undefined, false],
    ['POST', '/v1/sessions', { taskId: 'evil', instructions: 'x' }, false],
    ['GET', `/v1/sessions/${id}`, undefined, false],
    ['DELETE', `/v1/sessions/${id}`, undefined, false],
    ['POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 1, observation: 'o' }, false],
    ['POST', '/v1/steps:batch', { items: [{ sessionId: id, attempt: 0, step: 1, observation: 'o' }] }, false],
    ['GET', `/v1/sessions/${id}/trajectory`, undefined, false],
    ['GET', `/v1/sessions/${id}/memory`, undefined, false],
    ['PUT', `/v1/sessions/${id}/memory/0`, { text: 'edited' }, false],
    ['GET', '/v1/stats', undefined, false],
    ['GET', '/v1/models', undefined, true],
    ['GET', '/v1/models/test', undefined, true],
    ['POST', '/v1/models/test/activate', undefined, true],
    ['GET', '/v1/training/jobs', undefined, true],
    ['POST', '/v1/training/jobs', { algorithm: 'lamer' }, true],
    ['GET', '/v1/training/jobs/job_x', undefined, true],
    ['POST', '/v1/training/jobs/job_x/cancel', undefined, true],
  ];

  it('every spelling of every /v1 route is 404 or 401 without a key (or with a bad one), and changes nothing', async () => {
    const before = dumpDb(t.dataDir);
    let routed = 0;
    for (const [method, p, body] of groups()) {
      for (const sp of spellings(p)) {
        for (const headers of [{}, { authorization: 'Bearer not-a-key-123' }] as Array<Record<string, string>>) {
          const r = await rawCall(t.url, method, sp, body, headers);
          expect([401, 404], `${method} ${sp} -> ${r.status} ${JSON.stringify(r.body)}`).toContain(r.status);
          if (r.status === 401) {
            routed++;
            expect(r.body.type).toBe('https://lamer-server.dev/problems/unauthorized');
            expect(r.headers.get('www-authenticate')).toBe('Bearer');
          } else {
            expect(r.body.type, `${method} ${sp}`).not.toBe('https://lamer-server.dev/problems/forbidden');
          }
        }
      }
    }
    // The router does send some spellings to the routes (percent-escapes); they were all refused.
    expect(routed).toBeGreaterThan(2 * groups().length);
    expect(dumpDb(t.dataDir)).toBe(before);
    expect(countRows(t.dataDir, "SELECT count(*) AS n FROM sessions WHERE task_id = 'evil'")).toBe(0);
  });

  it('admin routes: every spelling is 404 or 403 with a non-admin key', async () => {
    for (const [method, p, body, admin] of groups()) {
      if (!admin) continue;
      for (const sp of spellings(p)) {
        const r = await rawCall(t.url, method, sp, body, KEY_A);
        expect([400, 403, 404], `${method} ${sp} -> ${r.status}`).toContain(r.status);
        if (r.status === 403) expect(r.body.type).toBe('https://lamer-server.dev/problems/forbidden');
      }
    }
    // And the admin key reaches them (the canonical spelling and an encoded one).
    expect((await rawCall(t.url, 'GET', '/v1/models', undefined, ADMIN_KEY)).status).toBe(200);
    expect((await rawCall(t.url, 'GET', '/%76%31/models', undefined, ADMIN_KEY)).status).toBe(200);
  });

  it('an encoded spelling with a key acts for that key\'s tenant, like the canonical one', async () => {
    const r = await rawCall(t.url, 'GET', '/%76%31/sessions', undefined, KEY_A);
    expect(r.status).toBe(200);
    expect(r.body.items.map((x: { id: string }) => x.id)).toEqual([id]);
    const admin = await rawCall(t.url, 'GET', '/%76%31/sessions', undefined, ADMIN_KEY);
    expect(admin.body.items).toEqual([]);
  });

  it('the OpenAI-compatible routes: every spelling is 404 or 401 without a key', async () => {
    for (const sp of ['/openai/v1/models', '/openai/%76%31/models', '/%6fpenai/v1/models', '/openai/v1/%6dodels', '/OPENAI/v1/models', '/openai//v1/models', '/openai/v1/models/', '/openai/./v1/models', '/openai;a=1/v1/models']) {
      const r = await rawCall(t.url, 'GET', sp);
      expect([401, 404], `${sp} -> ${r.status}`).toContain(r.status);
    }
    for (const sp of ['/openai/v1/chat/completions', '/openai/v1/chat/%63ompletions']) {
      const r = await rawCall(t.url, 'POST', sp, { model: 'test', messages: [{ role: 'user', content: 'hi' }] });
      expect(r.status, sp).toBe(401);
    }
  });

  it('operations routes stay open', async () => {
    expect((await rawCall(t.url, 'GET', '/healthz')).status).toBe(200);
    expect((await rawCall(t.url, 'GET', '/%68ealthz')).status).toBe(200);
  });
});

describe('no default tenant while keys are configured', () => {
  it('a handler reading request.tenant on a request that was not authenticated answers 401', async () => {
    const { buildApp } = await import('../../../src/app.js');
    const { loadConfig } = await import('../../../src/config.js');
    const { openDatabase } = await import('../../../src/db/index.js');
    const { sqliteStore } = await import('../../../src/db/store.js');
    const { TestEngine } = await import('../../../src/policy/test-engine.js');
    const { tmpDir, call } = await import('../../helpers/index.js');
    const dir = tmpDir();
    const config = { ...loadConfig({}), engine: 'test' as const, logLevel: 'silent' as const, dataDir: dir, apiKeys: [{ key: 'key-tenant-a', tenant: 'a', admin: false }] };
    const app = await buildApp(config, { store: sqliteStore(openDatabase(dir)), engine: new TestEngine() });
    // A route outside /v1 (no key needed) that reads the tenant anyway.
    app.get('/internal/tenant', async (req) => ({ tenant: req.tenant }));
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const r = await call(url, 'GET', '/internal/tenant');
      expect(r.status).toBe(401);
      expect(r.body.type).toBe('https://lamer-server.dev/problems/unauthorized');
      const withKey = await call(url, 'GET', '/internal/tenant', undefined, { authorization: 'Bearer key-tenant-a' });
      expect(withKey.status).toBe(401);
    } finally {
      await app.close();
    }
  });
});
