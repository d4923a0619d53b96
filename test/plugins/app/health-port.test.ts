/**
 * src/plugins/app/health-port.ts over real sockets: with LAMER_HEALTH_PORT the server answers
 * `/healthz` and `/readyz` on a second port from a worker thread, the same bodies as the API's
 * routes; `/readyz` there is 503 while the active model is not loaded, until the API listens and
 * once the shutdown has begun; both are 503 while the server's thread is blocked past the stall
 * threshold; other paths are 404, other methods 405; a taken port stops the start naming the
 * variable; and the thread is gone after close (a process that closes its server exits by itself).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { buildApp } from '../../../src/app.js';
import { loadConfig } from '../../../src/config.js';
import { openDatabase } from '../../../src/db/index.js';
import { sqliteStore } from '../../../src/db/store.js';
import { HealthListenError } from '../../../src/plugins/app/health-port.js';
import { TestEngine } from '../../../src/policy/test-engine.js';
import { call, startTestServer, tmpDir } from '../../helpers/index.js';
import { track } from '../../helpers/children.js';
import { occupiedPort } from '../../helpers/cli.js';

const root = path.resolve(import.meta.dirname, '..', '..', '..');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A raw request on a fresh connection: status, headers and body, or the connection error's code. */
function raw(port: number, method: string, p: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string } | { error: string }> {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: p, agent: false }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
    req.end();
  });
}

/** Polls `GET base + p` until its status is `status` (the snapshot is refreshed every second); the last answer. */
async function until(base: string, p: string, status: number, ms = 10_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const r = await call(base, 'GET', p);
    if (r.status === status || Date.now() > deadline) return r;
    await sleep(100);
  }
}

/**
 * Blocks this thread (a busy loop, as a long synchronous section would) for `blockMs`, then, still
 * blocked, has a helper thread request `/healthz` and `/readyz` on `port` (fresh connections, one
 * after the other). This thread cannot make requests while it is blocked: the helper writes the
 * statuses into shared memory ([go/done, /healthz, /readyz]). @returns the two statuses (-1: no answer).
 */
async function probeWhileBlocked(port: number, blockMs: number): Promise<[number, number]> {
  const shared = new Int32Array(new SharedArrayBuffer(12));
  const prober = new Worker(
    `const { workerData } = require('node:worker_threads');
    const http = require('node:http');
    const s = new Int32Array(workerData.buffer);
    const get = (p) => new Promise((resolve) => {
      http.get({ host: '127.0.0.1', port: workerData.port, path: p, agent: false }, (r) => { r.resume(); r.on('end', () => resolve(r.statusCode)); })
        .on('error', () => resolve(-1));
    });
    Atomics.wait(s, 0, 0);
    (async () => { Atomics.store(s, 1, await get('/healthz')); Atomics.store(s, 2, await get('/readyz')); Atomics.store(s, 0, 2); })();`,
    { eval: true, workerData: { buffer: shared.buffer, port } },
  );
  try {
    await sleep(100); // the helper is up
    const t0 = Date.now();
    while (Date.now() - t0 < blockMs); // the event loop blocked: no heartbeat, no accept, no timer
    Atomics.store(shared, 0, 1);
    Atomics.notify(shared, 0);
    while (Atomics.load(shared, 0) !== 2 && Date.now() - t0 < 30_000); // still blocked while the probes run
    return [Atomics.load(shared, 1), Atomics.load(shared, 2)];
  } finally {
    await prober.terminate();
  }
}

class UnloadableEngine extends TestEngine {
  unloaded = false;
  override isLoaded(version: string): boolean {
    return !this.unloaded && super.isLoaded(version);
  }
}

describe('the health listener (LAMER_HEALTH_PORT)', () => {
  it('answers /healthz 200 and /readyz 200 with the API\'s bodies; HEAD too; other paths 404, other methods 405; none without the setting', async () => {
    const plain = await startTestServer();
    expect(plain.healthUrl).toBeUndefined();
    expect(plain.app.healthPort).toBeNull();
    await plain.close();

    const s = await startTestServer({ health: { port: 0, stallSeconds: 30 } });
    try {
      expect(s.healthUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(s.healthUrl).not.toBe(s.url);
      const h = s.healthUrl!;
      const healthz = await call(h, 'GET', '/healthz');
      expect(healthz.status).toBe(200);
      expect(healthz.body).toEqual({ status: 'ok' });
      expect(healthz.type).toBe('application/json; charset=utf-8');
      const ready = await until(h, '/readyz', 200);
      expect(ready.status).toBe(200);
      expect(ready.body).toEqual((await s.call('GET', '/readyz')).body);
      expect(ready.body).toMatchObject({ status: 'ready', database: true, storage: 'ok', model: { version: 'test', loaded: true }, engine: 'test' });
      expect((await call(h, 'GET', '/readyz?verbose=1')).status).toBe(200);
      // answered while the server's thread is blocked (0.5 s, under the 30 s threshold)
      expect(await probeWhileBlocked(Number(new URL(h).port), 500)).toEqual([200, 200]);

      const port = Number(new URL(h).port);
      const head = await raw(port, 'HEAD', '/healthz');
      expect(head).toMatchObject({ status: 200, body: '' });
      const missing = await call(h, 'GET', '/v1/sessions');
      expect(missing.status).toBe(404);
      expect(missing.type).toMatch(/^application\/problem\+json/);
      expect(missing.body).toMatchObject({ type: 'https://lamer-server.dev/problems/not-found', status: 404, instance: '/v1/sessions' });
      const post = await call(h, 'POST', '/healthz', { x: 1 });
      expect(post.status).toBe(405);
      expect(post.headers.get('allow')).toBe('GET, HEAD');
      expect(post.body.type).toBe('https://lamer-server.dev/problems/method-not-allowed');
    } finally {
      await s.close();
    }
  });

  it('/readyz is 503 until the API listens and while the active model is not loaded; 200 again once it is', async () => {
    const dir = tmpDir();
    const engine = new UnloadableEngine();
    const config = { ...loadConfig({}), engine: 'test' as const, logLevel: 'silent' as const, dataDir: dir, apiKeys: [], health: { port: 0, stallSeconds: 30 } };
    const app = await buildApp({ ...config, host: '127.0.0.1' }, { store: sqliteStore(openDatabase(dir)), engine });
    try {
      const h = `http://127.0.0.1:${app.healthPort}`;
      // the thread listens before the API does: ready by the snapshot, not ready until the API takes requests
      const early = await call(h, 'GET', '/readyz');
      expect(early.status).toBe(503);
      expect(early.body).toMatchObject({ status: 'not-ready', database: true, model: { version: 'test', loaded: true } });
      expect((await call(h, 'GET', '/healthz')).status).toBe(200);
      await app.listen({ host: '127.0.0.1', port: 0 });
      expect((await until(h, '/readyz', 200)).status).toBe(200);

      engine.unloaded = true;
      const unloaded = await until(h, '/readyz', 503);
      expect(unloaded.status).toBe(503);
      expect(unloaded.body).toMatchObject({ status: 'not-ready', database: true, model: { version: 'test', loaded: false } });
      expect((await call(h, 'GET', '/healthz')).status).toBe(200);
      engine.unloaded = false;
      expect((await until(h, '/readyz', 200)).status).toBe(200);
    } finally {
      await app.close();
    }
  });

  it('once the shutdown begins both answer 503 shutting-down at once; after close the port refuses connections', async () => {
    const s = await startTestServer({ health: { port: 0, stallSeconds: 30 } });
    const h = s.healthUrl!;
    expect((await until(h, '/readyz', 200)).status).toBe(200);
    s.app.beginShutdown();
    for (const p of ['/readyz', '/healthz']) {
      const r = await call(h, 'GET', p);
      expect(r.status, p).toBe(503);
      expect(r.type, p).toMatch(/^application\/problem\+json/);
      expect(r.body.type, p).toBe('https://lamer-server.dev/problems/shutting-down');
      expect(r.headers.get('retry-after'), p).toBe('1');
    }
    await s.close();
    expect(await raw(Number(new URL(h).port), 'GET', '/healthz')).toEqual({ error: 'ECONNREFUSED' });
  });

  it('while the server\'s thread is blocked past LAMER_HEALTH_STALL_SECONDS both answer 503, and 200 again once it runs', async () => {
    const s = await startTestServer({ health: { port: 0, stallSeconds: 1 } });
    try {
      const port = Number(new URL(s.healthUrl!).port);
      expect((await until(s.healthUrl!, '/readyz', 200)).status).toBe(200);
      expect(await probeWhileBlocked(port, 1500)).toEqual([503, 503]);
      expect((await until(s.healthUrl!, '/healthz', 200)).body).toEqual({ status: 'ok' });
      expect((await until(s.healthUrl!, '/readyz', 200)).status).toBe(200);
    } finally {
      await s.close();
    }
  });

  it('a taken health port, or the API\'s own, stops the start with a StartupError naming LAMER_HEALTH_PORT', async () => {
    const { server: blocker, port: taken } = await occupiedPort();
    try {
      const err = await startTestServer({ health: { port: taken, stallSeconds: 30 } }).then(
        () => null,
        (e: Error) => e,
      );
      expect(err?.name).toBe('StartupError');
      expect(err?.message).toBe(`port ${taken} on 127.0.0.1 is already in use (LAMER_HEALTH_PORT, LAMER_HOST)`);
      // the API's own port (an override such as --port the configuration did not see)
      const same = await startTestServer({ port: taken, health: { port: taken, stallSeconds: 30 } }).then(() => null, (e: Error) => e);
      expect([same?.name, same?.message]).toEqual(['ConfigError', `the health listener's port ${taken} is the API's port: set LAMER_HEALTH_PORT to another port`]);
    } finally {
      blocker.close();
    }
  });

  it('a health port taken between the check and the listen fails buildApp with HealthListenError', async () => {
    const { server: blocker, port: taken } = await occupiedPort();
    const dir = tmpDir();
    const config = { ...loadConfig({}), engine: 'test' as const, logLevel: 'silent' as const, dataDir: dir, apiKeys: [], health: { port: taken, stallSeconds: 30 } };
    try {
      const err = await buildApp({ ...config, host: '127.0.0.1' }, { store: sqliteStore(openDatabase(dir)), engine: new TestEngine() }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(HealthListenError);
      expect(err).toMatchObject({ code: 'EADDRINUSE', port: taken });
    } finally {
      blocker.close();
    }
  });

  it('a process that starts and closes a server with the health listener exits by itself (the thread is stopped)', async () => {
    const dir = tmpDir();
    const script = path.join(dir, 'start-close.mts');
    fs.writeFileSync(
      script,
      `const { startServer } = await import(${JSON.stringify(pathToFileURL(path.join(root, 'src', 'server.ts')).href)});
      const s = await startServer({ host: '127.0.0.1', port: 0, engine: 'test', logLevel: 'silent', apiKeys: [], dataDir: ${JSON.stringify(dir)}, health: { port: 0, stallSeconds: 30 } });
      const r = await fetch(s.healthUrl + '/healthz');
      console.log('healthz ' + r.status);
      await s.close();
      console.log('closed');\n`,
    );
    const child = track(spawn(process.execPath, ['--import', 'tsx', script], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] }));
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d));
    child.stderr!.on('data', (d: Buffer) => (out += d));
    // a thread or timer left running would keep it alive: killed after 90 s, its code is then null
    const killer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    clearTimeout(killer);
    expect(out).toContain('healthz 200');
    expect(out).toContain('closed');
    expect(code).toBe(0);
  }, 120_000);
});
