/**
 * A locked database, a full disk and a WAL grown behind a long reader, against a real server over
 * a real SQLite file:
 * - another connection holding the write lock: steps and creates answer 503 `database-busy` with
 *   Retry-After once the short busy timeout has passed, /healthz is answered meanwhile, nothing is half-recorded, and
 *   the same step sent again after the lock is released is recorded exactly once;
 * - no room for a write (`PRAGMA max_page_count` at the current size: SQLite raises SQLITE_FULL
 *   exactly as on a full disk): 503 `storage-full` with Retry-After, /readyz not ready until a
 *   write succeeds again (a step, or readyz's own probe once space is back);
 * - a reader pinning a snapshot while steps are written grows the WAL; once the reader is gone
 *   the WAL is brought back under LAMER_SQLITE_WAL_LIMIT_BYTES by the checkpoint timer.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConfigError, loadConfig, type DatabaseConfig } from '../../src/config.js';
import { countRows, dumpDb, startTestServer, type TestServer } from '../helpers/index.js';

const TYPE = 'https://lamer-server.dev/problems/';

let s: TestServer | null = null;
const open: Database.Database[] = [];

afterEach(async () => {
  for (const c of open.splice(0)) if (c.open) c.close();
  if (s) await s.close();
  s = null;
});

function database(over: Partial<DatabaseConfig>): DatabaseConfig {
  return { ...loadConfig({}).database, ...over };
}

/** A second connection to the server's database file (another process would behave the same). */
function connect(dataDir: string): Database.Database {
  const c = new Database(path.join(dataDir, 'lamer.db'));
  open.push(c);
  return c;
}

async function newSession(srv: TestServer, extra: Record<string, unknown> = {}): Promise<string> {
  const r = await srv.call('POST', '/v1/sessions', { taskId: 't', instructions: 'Play.', ...extra });
  expect(r.status).toBe(201);
  return r.body.id as string;
}

describe('another connection holds the write lock', () => {
  it('answers 503 database-busy, keeps answering /healthz while steps wait, and records the retried step once', async () => {
    s = await startTestServer({ database: database({ busyTimeoutMs: 1000, busyRetryAfterSeconds: 2 }) });
    const srv = s;
    const ids = [await newSession(srv), await newSession(srv), await newSession(srv)];
    const body = { attempt: 0, step: 0, observation: 'Three doors.', availableActions: ['door 1', 'door 2'] };
    const before = dumpDb(srv.dataDir);

    const holder = connect(srv.dataDir);
    holder.exec('BEGIN IMMEDIATE');
    const steps = ids.map((id) => srv.call('POST', `/v1/sessions/${id}/steps`, body));
    // While the steps wait for the lock (on timers, up to the 1 s busy timeout), the event loop
    // stays free: health checks are answered before any step is. (Order, not
    // milliseconds: bench/db-busy.ts measures the latencies.)
    let pending = steps.length;
    for (const p of steps) void p.finally(() => pending--);
    const all = Promise.all(steps);
    let healthWhileWaiting = 0;
    while (pending === steps.length && healthWhileWaiting < 3) {
      const h = await srv.call('GET', '/healthz');
      expect(h.status).toBe(200);
      if (pending === steps.length) healthWhileWaiting++;
    }
    expect(healthWhileWaiting).toBeGreaterThanOrEqual(1);
    const done = await all;
    const create = srv.call('POST', '/v1/sessions', { taskId: 't', instructions: 'Play.' });
    const batch = srv.call('POST', '/v1/steps:batch', { items: [{ sessionId: ids[0], ...body }] });
    for (const r of done) {
      expect(r.status).toBe(503);
      expect(r.type).toContain('application/problem+json');
      expect(r.body.type).toBe(TYPE + 'database-busy');
      expect(r.headers.get('retry-after')).toBe('2');
    }
    const c = await create;
    expect(c.status).toBe(503);
    expect(c.body.type).toBe(TYPE + 'database-busy');
    const b = await batch;
    expect(b.status).toBe(200);
    expect(b.body.results[0].ok).toBe(false);
    expect(b.body.results[0].error.type).toBe(TYPE + 'database-busy');
    expect(b.headers.get('retry-after')).toBe('2');
    // Ready: contention is not a storage fault.
    expect((await srv.call('GET', '/readyz')).status).toBe(200);
    holder.exec('ROLLBACK');
    // Nothing was written while the lock was held.
    expect(dumpDb(srv.dataDir)).toBe(before);

    const retried = await srv.call('POST', `/v1/sessions/${ids[0]}/steps`, body);
    expect(retried.status).toBe(200);
    const again = await srv.call('POST', `/v1/sessions/${ids[0]}/steps`, body);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(retried.body);
    expect(countRows(srv.dataDir, 'SELECT count(*) AS n FROM steps WHERE session_id = ?', ids[0])).toBe(1);
    const metrics = (await srv.call('GET', '/metrics')).body as string;
    // Three steps and the batch item.
    expect(metrics).toMatch(/lamer_step_requests_total\{outcome="database_error"\} 4\b/);
  });
});

describe('no room to write (SQLITE_FULL)', () => {
  it('answers 503 storage-full, is not ready until a write succeeds, then records the retried step once', async () => {
    s = await startTestServer({ database: database({ storageRetryAfterSeconds: 7 }) });
    const srv = s;
    const id = await newSession(srv, { maxSteps: 50 });
    const sqlite = srv.app.store.sqlite!.sqlite;
    const body = (step: number) => ({ attempt: 0, step, observation: `cell ${step} `.repeat(4000) });
    expect((await srv.call('POST', `/v1/sessions/${id}/steps`, body(0))).status).toBe(200);
    expect((await srv.call('GET', '/readyz')).status).toBe(200);
    const pages = sqlite.pragma('page_count', { simple: true }) as number;
    sqlite.pragma(`max_page_count = ${pages}`);
    const before = dumpDb(srv.dataDir);

    const full = await srv.call('POST', `/v1/sessions/${id}/steps`, body(1));
    expect(full.status).toBe(503);
    expect(full.body.type).toBe(TYPE + 'storage-full');
    expect(full.headers.get('retry-after')).toBe('7');
    const notReady = await srv.call('GET', '/readyz');
    expect(notReady.status).toBe(503);
    expect(notReady.body).toMatchObject({ status: 'not-ready', database: true, storage: 'full' });
    // Sessions cannot be created either; the session did not move on.
    expect((await srv.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x'.repeat(20000) })).body.type).toBe(TYPE + 'storage-full');
    expect(dumpDb(srv.dataDir)).toBe(before);
    expect((await srv.call('GET', `/v1/sessions/${id}`)).body.next).toEqual({ attempt: 0, step: 1 });
    // Still full: readyz's probe write fails too.
    await new Promise((r) => setTimeout(r, 1100));
    expect((await srv.call('GET', '/readyz')).body.storage).toBe('full');

    sqlite.pragma('max_page_count = 1073741823');
    const ok = await srv.call('POST', `/v1/sessions/${id}/steps`, body(1));
    expect(ok.status).toBe(200);
    expect((await srv.call('GET', '/readyz')).body).toMatchObject({ status: 'ready', storage: 'ok' });
    expect((await srv.call('POST', `/v1/sessions/${id}/steps`, body(1))).body).toEqual(ok.body);
    expect(countRows(srv.dataDir, 'SELECT count(*) AS n FROM steps WHERE session_id = ? AND step = 1', id)).toBe(1);
  });

  it('readiness comes back by itself once space is freed (readyz probe write), with no traffic', async () => {
    s = await startTestServer();
    const srv = s;
    const id = await newSession(srv, { maxSteps: 50 });
    const sqlite = srv.app.store.sqlite!.sqlite;
    sqlite.pragma(`max_page_count = ${sqlite.pragma('page_count', { simple: true }) as number}`);
    const r = await srv.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'x'.repeat(30000) });
    expect(r.body.type).toBe(TYPE + 'storage-full');
    expect((await srv.call('GET', '/readyz')).status).toBe(503);
    sqlite.pragma('max_page_count = 1073741823');
    await new Promise((res) => setTimeout(res, 1100));
    const ready = await srv.call('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body.storage).toBe('ok');
    // The probe left nothing behind.
    expect(sqlite.prepare("SELECT count(*) AS n FROM sqlite_master WHERE name = 'lamer_storage_probe'").get()).toEqual({ n: 0 });
  });
});

describe('WAL size', () => {
  it('shrinks below LAMER_SQLITE_WAL_LIMIT_BYTES once a reader that pinned it is gone', async () => {
    const limit = 256 * 1024;
    s = await startTestServer({ database: database({ walLimitBytes: limit, checkpointIntervalMs: 100 }) });
    const srv = s;
    const reader = connect(srv.dataDir);
    reader.exec('BEGIN');
    reader.prepare('SELECT count(*) AS n FROM steps').get(); // the read snapshot is now pinned
    const wal = `${path.join(srv.dataDir, 'lamer.db')}-wal`;
    // Many sessions, one large step each (a long attempt would repeat its observations in every prompt).
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) {
      const id = await newSession(srv);
      ids.push(id);
      const r = await srv.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: `row ${i} `.repeat(1500) });
      expect(r.status).toBe(200);
    }
    const grown = fs.statSync(wal).size;
    expect(grown).toBeGreaterThan(4 * limit);
    await new Promise((r) => setTimeout(r, 300));
    // Pinned: the checkpoint cannot restart the log while the reader may need it. Meanwhile the
    // backlog is left to the checkpoint worker: commits no longer checkpoint on this thread.
    expect(fs.statSync(wal).size).toBeGreaterThan(limit);
    expect(srv.app.store.sqlite!.sqlite.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    reader.exec('COMMIT');
    // Polls the checkpoint timer's work (every 100 ms); the deadlines only bound how long the test waits.
    await vi.waitFor(() => expect(fs.statSync(wal).size, 'WAL bytes once the reader is gone').toBeLessThanOrEqual(limit), { timeout: 20_000, interval: 50 });
    await vi.waitFor(() => expect(srv.app.store.sqlite!.sqlite.pragma('wal_autocheckpoint', { simple: true }), 'commit checkpoints switched back on').toBe(1000), { timeout: 20_000, interval: 50 });
    // Nothing lost.
    expect(countRows(srv.dataDir, 'SELECT count(*) AS n FROM steps')).toBe(60);
  });
});

describe('configuration', () => {
  it('reads the LAMER_SQLITE_* / retry variables, names a bad one, and applies them to the connection', async () => {
    expect(loadConfig({}).database).toEqual({
      busyTimeoutMs: 100,
      walLimitBytes: 64 * 1024 * 1024,
      checkpointIntervalMs: 1000,
      busyRetryAfterSeconds: 1,
      storageRetryAfterSeconds: 30,
    });
    expect(
      loadConfig({
        LAMER_SQLITE_BUSY_TIMEOUT_MS: '250',
        LAMER_SQLITE_WAL_LIMIT_BYTES: '1048576',
        LAMER_SQLITE_CHECKPOINT_INTERVAL_MS: '0',
        LAMER_DB_BUSY_RETRY_AFTER_SECONDS: '3',
        LAMER_STORAGE_RETRY_AFTER_SECONDS: '60',
      }).database,
    ).toEqual({ busyTimeoutMs: 250, walLimitBytes: 1048576, checkpointIntervalMs: 0, busyRetryAfterSeconds: 3, storageRetryAfterSeconds: 60 });
    expect(() => loadConfig({ LAMER_SQLITE_BUSY_TIMEOUT_MS: '-1' })).toThrow(ConfigError);
    expect(() => loadConfig({ LAMER_SQLITE_BUSY_TIMEOUT_MS: '5s' })).toThrow(/LAMER_SQLITE_BUSY_TIMEOUT_MS/);
    expect(() => loadConfig({ LAMER_DB_BUSY_RETRY_AFTER_SECONDS: '0' })).toThrow(/LAMER_DB_BUSY_RETRY_AFTER_SECONDS/);
    s = await startTestServer({ database: database({ busyTimeoutMs: 250, walLimitBytes: 123456 }) });
    expect(s.app.store.sqlite!.sqlite.pragma('busy_timeout', { simple: true })).toBe(250);
    expect(s.app.store.sqlite!.sqlite.pragma('journal_size_limit', { simple: true })).toBe(123456);
  });
});
