/**
 * `npm run bench:healthz-burst`: how long `/healthz` and `/readyz` take to answer (time to the
 * first byte of the answer, ms) when a burst of clients starts on the builtin model, as a gateway's
 * health check sees it: each probe opens a fresh TCP connection (its connect time is reported
 * apart), sends one GET and waits for the status line.
 *
 * The server runs as a separate process (`tsx src/cli/serve.ts`, builtin engine, the shipped base
 * model unless LAMER_BASE_MODEL_DIR says otherwise, a fresh data directory). Probes start every
 * BENCH_PROBE_MS (25) ms from 1 s before the burst to BENCH_SECONDS (6) s after its start, each
 * on its own connection, alternating /healthz and /readyz, none waiting for another. At time 0,
 * BENCH_CLIENTS (64) clients start at once, each playing MineSweeper 6x6 with 3 mines through
 * HTTP (sessions of 3 attempts, availableActions on every step), one request at a time over a
 * keep-alive connection.
 *
 * Prints, per window of probe start times (before the burst, its first second, the rest), the
 * probes, the median and max time to first byte, and how many took over 100 ms; then the steps
 * the clients made. Writes bench/results/healthz-burst.json. BENCH_NODE_ARGS passes node flags to
 * the server (e.g. --cpu-prof).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureDirSync } from '../src/ensure-dir.js';
import { freePort, request } from './bench-http-client.js';
import { makeEnv } from '../src/envs/index.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 64);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const PROBE_MS = Number(process.env.BENCH_PROBE_MS ?? 25);
const BEFORE_MS = 1000;
const ENV = 'minesweeper-6x6-3';


/** One probe on a fresh connection: ms from the start to the connection and to the status line. */
function probe(port: number, p: string): Promise<{ connectMs: number; firstByteMs: number; status: number }> {
  const t0 = performance.now();
  let connectMs = NaN;
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'GET', path: p, agent: false }, (res) => {
      const firstByteMs = performance.now() - t0;
      res.resume();
      res.on('end', () => resolve({ connectMs, firstByteMs, status: res.statusCode ?? 0 }));
    });
    req.on('socket', (s) => s.once('connect', () => (connectMs = performance.now() - t0)));
    req.on('error', () => resolve({ connectMs, firstByteMs: performance.now() - t0, status: 0 }));
    req.end();
  });
}

/** One client: MineSweeper sessions (3 attempts each) until `stop()`; returns the steps it posted. */
async function client(port: number, c: number, stop: () => boolean): Promise<{ steps: number; errors: number }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const env = makeEnv(ENV);
  let steps = 0;
  let errors = 0;
  for (let n = 0; !stop(); n++) {
    const seed = c * 1000 + n;
    const created = await request(agent, port, 'POST', '/v1/sessions', { taskId: `${ENV}:seed=${seed}`, instructions: env.instructions, env: 'minesweeper', maxAttempts: 3, maxSteps: 36, mode: 'eval' });
    if (created.status !== 201) {
      errors++;
      continue;
    }
    const id = created.json.id as string;
    let status = 'active';
    for (let a = 0; a < 3 && status === 'active' && !stop(); a++) {
      let { observation, availableActions } = env.reset(seed);
      let reward = 0;
      let done = false;
      let success = false;
      for (let t = 0; !stop(); t++) {
        const r = await request(agent, port, 'POST', `/v1/sessions/${id}/steps`, { attempt: a, step: t, observation, reward, done, success, ...(done ? {} : { availableActions }) });
        if (r.status !== 200) {
          errors++;
          status = 'error';
          break;
        }
        steps++;
        status = r.json.session.status;
        if (done || r.json.action === null) break;
        const s = env.step(r.json.action as string);
        observation = s.observation;
        reward = s.reward;
        done = s.done;
        success = s.success;
        availableActions = env.legalActions();
      }
    }
  }
  agent.destroy();
  return { steps, errors };
}

function pct(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(q * s.length))]! : NaN;
}

async function main(): Promise<void> {
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lamer-bench-healthz-'));
  const child = spawn(process.execPath, [...(process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean), '--import', 'tsx', 'src/cli/serve.ts'], {
    cwd: root,
    env: { ...process.env, LAMER_ENGINE: 'builtin', LAMER_PORT: String(port), LAMER_HOST: '127.0.0.1', LAMER_DATA_DIR: dataDir, LAMER_LOG_LEVEL: 'error', LAMER_API_KEYS: '' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  let exited = false;
  const exit = new Promise<void>((r) => child.once('exit', () => ((exited = true), r())));
  try {
    const agent = new http.Agent({ keepAlive: true });
    const deadline = Date.now() + 120_000;
    for (;;) {
      if (exited) throw new Error('the server exited before it was ready');
      try {
        if ((await request(agent, port, 'GET', '/readyz')).status === 200) break;
      } catch {
        /* not up yet */
      }
      if (Date.now() > deadline) throw new Error('the server was not ready within 120 s');
      await new Promise((r) => setTimeout(r, 200));
    }
    agent.destroy();

    const probes: Array<{ atMs: number; path: string; connectMs: number; firstByteMs: number; status: number }> = [];
    const t0 = performance.now() + BEFORE_MS;
    const running: Promise<void>[] = [];
    let k = 0;
    const timer = setInterval(() => {
      const at = performance.now() - t0;
      const p = k++ % 2 === 0 ? '/healthz' : '/readyz';
      running.push(probe(port, p).then((r) => void probes.push({ atMs: at, path: p, ...r })));
    }, PROBE_MS);
    await new Promise((r) => setTimeout(r, BEFORE_MS));
    let stop = false;
    const clients = Array.from({ length: CLIENTS }, (_, c) => client(port, c, () => stop));
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    clearInterval(timer);
    stop = true;
    const done = await Promise.all(clients);
    await Promise.all(running);

    const windows = [
      { name: 'before the burst', from: -Infinity, to: 0 },
      { name: 'burst 0-1 s', from: 0, to: 1000 },
      { name: `burst 1-${SECONDS} s`, from: 1000, to: Infinity },
    ];
    const round = (x: number) => Math.round(x * 10) / 10;
    const rows = windows.flatMap((w) =>
      ['/healthz', '/readyz'].map((p) => {
        const ps = probes.filter((x) => x.path === p && x.atMs >= w.from && x.atMs < w.to);
        const fb = ps.map((x) => x.firstByteMs);
        return {
          window: w.name, path: p, probes: ps.length, connectMsMax: round(Math.max(...ps.map((x) => x.connectMs))),
          firstByteMsP50: round(pct(fb, 0.5)), firstByteMsMax: round(Math.max(...fb)), over100Ms: fb.filter((x) => x > 100).length,
          failed: ps.filter((x) => x.status !== 200).length,
        };
      }),
    );
    console.log(`\ntime to first byte of probes on fresh connections, ${CLIENTS} MineSweeper clients starting at 0 (builtin engine)\n`);
    console.log('| window | path | probes | connect ms max | first byte ms p50 | max | over 100 ms | not 200 |');
    console.log('|---|---|---|---|---|---|---|---|');
    for (const r of rows) console.log(`| ${r.window} | ${r.path} | ${r.probes} | ${r.connectMsMax} | ${r.firstByteMsP50} | ${r.firstByteMsMax} | ${r.over100Ms} | ${r.failed} |`);
    const steps = done.reduce((n, d) => n + d.steps, 0);
    const errors = done.reduce((n, d) => n + d.errors, 0);
    console.log(`\nclients posted ${steps} steps in ${SECONDS} s (${Math.round(steps / SECONDS)} steps/s), ${errors} errors; load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} (${os.cpus().length} CPUs)`);
    ensureDirSync(path.join(root, 'bench', 'results'));
    fs.writeFileSync(
      path.join(root, 'bench', 'results', 'healthz-burst.json'),
      JSON.stringify({ date: new Date().toISOString(), node: process.version, cpus: os.cpus().length, loadAverage: os.loadavg(), clients: CLIENTS, seconds: SECONDS, probeMs: PROBE_MS, env: ENV, steps, errors, windows: rows, probes: probes.map((p) => ({ ...p, atMs: round(p.atMs), connectMs: round(p.connectMs), firstByteMs: round(p.firstByteMs) })) }, null, 2) + '\n',
    );
    console.log('wrote bench/results/healthz-burst.json');
  } finally {
    if (!exited) child.kill('SIGTERM');
    await exit;
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
