/**
 * `npm run bench:db-busy`: latencies while another connection holds SQLite's write lock (the
 * timings that test/db/index.test.ts checks only as an order of events):
 * - `/healthz` round trips (ms: p50, max) while step requests wait for the lock; the event loop
 *   stays free, so these stay at the cost of an idle request;
 * - how long each step takes to be refused with 503 `database-busy` (ms), expected just above
 *   LAMER_SQLITE_BUSY_TIMEOUT_MS (here BENCH_BUSY_TIMEOUT_MS, default 600).
 *
 * In-process server (engine `test`, a fresh SQLite data directory, port 0). Options (env):
 * BENCH_BUSY_TIMEOUT_MS (600), BENCH_STEPS (3 concurrent steps). Prints one JSON object and writes
 * bench/results/db-busy.json.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { loadConfig } from '../src/config.js';
import { startServer } from '../src/server.js';
import { ensureDirSync } from '../src/ensure-dir.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const BUSY_MS = Number(process.env.BENCH_BUSY_TIMEOUT_MS ?? 600);
const STEPS = Number(process.env.BENCH_STEPS ?? 3);

async function call(url: string, method: string, body?: unknown): Promise<number> {
  const r = await fetch(url, { method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined });
  await r.arrayBuffer();
  return r.status;
}

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

async function main(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lamer-bench-dbbusy-'));
  const server = await startServer({
    host: '127.0.0.1', port: 0, engine: 'test', logLevel: 'silent', apiKeys: [], dataDir,
    database: { ...loadConfig({}).database, busyTimeoutMs: BUSY_MS },
  });
  try {
    const ids: string[] = [];
    for (let i = 0; i < STEPS; i++) {
      const r = await fetch(server.url + '/v1/sessions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ taskId: 't', instructions: 'Play.' }) });
      ids.push(((await r.json()) as { id: string }).id);
    }
    const holder = new Database(path.join(dataDir, 'lamer.db'));
    holder.exec('BEGIN IMMEDIATE');
    const body = { attempt: 0, step: 0, observation: 'Three doors.', availableActions: ['door 1', 'door 2'] };
    let pending = ids.length;
    const stepMs: number[] = [];
    const steps = ids.map(async (id) => {
      const t0 = performance.now();
      const status = await call(`${server.url}/v1/sessions/${id}/steps`, 'POST', body);
      stepMs.push(performance.now() - t0);
      pending--;
      return status;
    });
    const healthMs: number[] = [];
    while (pending > 0) {
      const t0 = performance.now();
      await call(server.url + '/healthz', 'GET');
      healthMs.push(performance.now() - t0);
    }
    const statuses = await Promise.all(steps);
    holder.exec('ROLLBACK');
    holder.close();
    const result = {
      date: new Date().toISOString(),
      busyTimeoutMs: BUSY_MS,
      stepStatuses: statuses,
      stepRefusedAfterMs: stepMs.map((x) => Math.round(x)),
      healthz: { count: healthMs.length, p50Ms: +pct(healthMs, 50).toFixed(2), maxMs: +Math.max(...healthMs).toFixed(2) },
      loadavg: os.loadavg().map((x) => +x.toFixed(2)),
    };
    console.log(JSON.stringify(result, null, 2));
    ensureDirSync(path.join(root, 'bench', 'results'));
    fs.writeFileSync(path.join(root, 'bench', 'results', 'db-busy.json'), JSON.stringify(result, null, 2) + '\n');
  } finally {
    await server.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
