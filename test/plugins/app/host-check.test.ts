/**
 * The `Host` check against DNS rebinding (src/plugins/app/host-check.ts): with no API keys a page
 * in the operator's browser could reach the loopback server under a name it controls, so only
 * loopback names and addresses (and LAMER_ALLOWED_HOSTS) are accepted; any other Host is 403
 * `host-not-allowed` problem+json, before any route runs, and nothing is read or written. With
 * API keys the Host is not checked unless LAMER_ALLOWED_HOSTS is set.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dumpDb, rawCall, startTestServer, type TestServer } from '../../helpers/index.js';

/** One GET on a raw socket, sent exactly as `head` says (request line version and headers); resolves with the status code. */
async function rawStatus(base: string, head: string): Promise<number> {
  const { connect } = await import('node:net');
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const sock = connect(Number(u.port), u.hostname);
    const chunks: Buffer[] = [];
    sock.once('error', reject);
    sock.on('data', (c: Buffer) => chunks.push(c));
    sock.once('end', () => resolve(Number(/^HTTP\/1\.[01] (\d{3})/.exec(Buffer.concat(chunks).toString('utf8'))?.[1] ?? 0)));
    sock.write(head);
  });
}

describe('with no API keys', () => {
  let s: TestServer;
  let port: string;
  beforeAll(async () => {
    s = await startTestServer();
    port = new URL(s.url).port;
    await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' });
  });
  afterAll(async () => {
    await s.close();
  });

  it('loopback names and addresses, with or without a port, any case, are accepted', async () => {
    for (const host of ['localhost', `localhost:${port}`, 'LocalHost', 'localhost.', '127.0.0.1', `127.0.0.1:${port}`, '127.8.9.10:1', '[::1]', `[::1]:${port}`, '[0:0:0:0:0:0:0:1]']) {
      const r = await rawCall(s.url, 'GET', '/v1/sessions', undefined, { host });
      expect(r.status, host).toBe(200);
    }
    // HTTP/1.0 without a Host header (no browser sends that)
    expect(await rawStatus(s.url, 'GET /healthz HTTP/1.0\r\n\r\n')).toBe(200);
  });

  it('any other Host is 403 host-not-allowed problem+json, on every route, and nothing changes', async () => {
    const before = dumpDb(s.dataDir);
    const hosts = [
      'evil.example', `evil.example:${port}`, '127.0.0.1.evil.example', 'localhost.evil.example', 'evil-localhost',
      '128.0.0.1', '10.0.0.1', '0.0.0.0', '[::2]', '[::ffff:127.0.0.1]', '127.0.0.1:80@evil.example', 'local host',
    ];
    for (const host of hosts) {
      const r = await rawCall(s.url, 'GET', '/v1/sessions', undefined, { host });
      expect(r.status, JSON.stringify(host)).toBe(403);
      expect(r.type).toMatch(/^application\/problem\+json/);
      expect(r.body).toMatchObject({ type: 'https://lamer-server.dev/problems/host-not-allowed', status: 403, title: 'Forbidden' });
      expect(r.body.detail).toContain('LAMER_ALLOWED_HOSTS');
    }
    // an empty Host header is no loopback name either
    expect(await rawStatus(s.url, 'GET /v1/sessions HTTP/1.1\r\nHost: \r\nConnection: close\r\n\r\n')).toBe(403);
    const remote = await rawCall(s.url, 'POST', '/v1/models', { version: 'meta', engine: 'openai', baseUrl: 'http://169.254.169.254/v1', model: 'm' }, { host: 'evil.example' });
    expect(remote.status).toBe(403);
    const session = await rawCall(s.url, 'POST', '/v1/sessions', { taskId: 't', instructions: 'x' }, { host: 'evil.example' });
    expect(session.status).toBe(403);
    for (const path of ['/', '/ui/', '/docs', '/healthz', '/openai/v1/models', '/no-such-route']) {
      expect((await rawCall(s.url, 'GET', path, undefined, { host: 'evil.example' })).status, path).toBe(403);
    }
    expect(dumpDb(s.dataDir)).toBe(before);
  });
});

describe('with LAMER_ALLOWED_HOSTS', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ allowedHosts: ['lamer.internal', '10.0.0.7', 'fd00::1'] });
  });
  afterAll(async () => {
    await s.close();
  });

  it('the listed names are accepted besides loopback; others are still refused', async () => {
    for (const host of ['lamer.internal', 'LAMER.internal:8080', '10.0.0.7', '[fd00::1]:80', '127.0.0.1', 'localhost']) {
      expect((await rawCall(s.url, 'GET', '/v1/sessions', undefined, { host })).status, host).toBe(200);
    }
    for (const host of ['evil.example', 'sub.lamer.internal', '10.0.0.8', 'lamer.internal.evil.example']) {
      expect((await rawCall(s.url, 'GET', '/v1/sessions', undefined, { host })).status, host).toBe(403);
    }
  });
});

describe('with API keys', () => {
  const A = { authorization: 'Bearer key-tenant-a' };
  it('the Host is not checked (a key is needed anyway) unless LAMER_ALLOWED_HOSTS is set', async () => {
    const keyed = await startTestServer({ apiKeys: [{ key: 'key-tenant-a', tenant: 'a', admin: false }] });
    try {
      expect((await rawCall(keyed.url, 'GET', '/v1/sessions', undefined, { ...A, host: 'api.example.com' })).status).toBe(200);
    } finally {
      await keyed.close();
    }
    const listed = await startTestServer({ apiKeys: [{ key: 'key-tenant-a', tenant: 'a', admin: false }], allowedHosts: ['api.example.com'] });
    try {
      expect((await rawCall(listed.url, 'GET', '/v1/sessions', undefined, { ...A, host: 'api.example.com' })).status).toBe(200);
      expect((await rawCall(listed.url, 'GET', '/v1/sessions', undefined, { ...A, host: 'other.example.com' })).status).toBe(403);
    } finally {
      await listed.close();
    }
  });
});
