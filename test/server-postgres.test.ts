/**
 * The server on PostgreSQL (LAMER_DATABASE_URL, src/server.ts openStore): real servers on ephemeral
 * ports over a real PostgreSQL on loopback (test/helpers/postgres.ts; skipped, saying why, where
 * none can start). No owner lock: servers on one data directory and one database start side by
 * side and serve the same sessions; `/readyz` follows the database.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import type { PostgresConfig } from '../src/config.js';
import { startTestServer, tmpDir, type TestServer } from './helpers/index.js';
import { postgresForTests, startPostgres } from './helpers/postgres.js';

const pg = await postgresForTests();

/** The store settings of a server on `url`: a small pool, a short poll. */
export function pgSettings(url: string, over: Partial<PostgresConfig> = {}): PostgresConfig {
  return { url, maxConnections: 4, connectTimeoutMs: 5_000, statementTimeoutMs: 30_000, idleTimeoutMs: 30_000, migrationLockTimeoutMs: 60_000, pollMs: 200, ...over };
}

const open: TestServer[] = [];
afterAll(async () => {
  for (const s of open.splice(0)) await s.close();
});

async function server(url: string, dataDir: string, over: Partial<Parameters<typeof startTestServer>[0]> = {}): Promise<TestServer> {
  const s = await startTestServer({ dataDir, postgres: pgSettings(url), ...over });
  open.push(s);
  return s;
}

describe.skipIf(!pg)('one server on PostgreSQL', () => {
  it('keeps sessions in the database: a second server on the same data directory starts beside it and goes on with them', async () => {
    const url = await pg!.freshDatabase();
    const dir = tmpDir('lamer-pg-server-');
    const a = await server(url, dir);
    const id = (await a.call('POST', '/v1/sessions', { taskId: 't', instructions: 'Reach the goal.', maxAttempts: 2, maxSteps: 5 })).body.id as string;
    expect((await a.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'start' })).status).toBe(200);
    // no owner lock on PostgreSQL, and no SQLite file in the data directory
    const b = await server(url, dir);
    expect(fs.existsSync(path.join(dir, 'lamer.db'))).toBe(false);
    expect(fs.existsSync(path.join(dir, 'lamer.lock'))).toBe(false);
    expect((await b.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 1, observation: 'next', reward: 1 })).status).toBe(200);
    await a.close();
    const c = await server(url, dir);
    const got = await c.call('GET', `/v1/sessions/${id}`);
    expect(got.body).toMatchObject({ id, status: 'active' });
    const traj = await c.call('GET', `/v1/sessions/${id}/trajectory`);
    expect(traj.body.steps.map((s: { step: number }) => s.step)).toEqual([0, 1]);
    expect((await c.call('GET', '/readyz')).body).toMatchObject({ status: 'ready', database: true, storage: 'ok' });
  }, 120_000);

  it('/readyz is 503 while the database refuses connections, and ready again once it takes them', async () => {
    const url = await pg!.freshDatabase();
    const name = new URL(url).pathname.slice(1);
    const s = await server(url, tmpDir('lamer-pg-ready-'));
    expect((await s.call('GET', '/readyz')).status).toBe(200);
    await pg!.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
    await pg!.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
    try {
      await vi.waitFor(async () => expect((await s.call('GET', '/readyz')).status).toBe(503), { timeout: 20_000, interval: 100 });
      expect((await s.call('GET', '/readyz')).body).toMatchObject({ status: 'not-ready', database: false });
    } finally {
      await pg!.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
    }
    await vi.waitFor(async () => expect((await s.call('GET', '/readyz')).status).toBe(200), { timeout: 20_000, interval: 100 });
  }, 120_000);

  it('a database that went away: steps are 503 storage-unavailable (nothing recorded), /readyz 503', async () => {
    const own = await startPostgres();
    if ('skip' in own) return;
    try {
      const s = await server(await own.freshDatabase(), tmpDir('lamer-pg-gone-'));
      const id = (await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' })).body.id as string;
      await own.stop();
      const r = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o' });
      expect(r.status).toBe(503);
      expect(r.body).toMatchObject({ type: expect.stringContaining('storage-unavailable') });
      expect(r.headers.get('retry-after')).not.toBeNull();
      expect((await s.call('GET', '/readyz')).body).toMatchObject({ status: 'not-ready', database: false });
    } finally {
      await own.stop();
    }
  }, 120_000);
});
