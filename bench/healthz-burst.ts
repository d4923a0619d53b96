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
 * Prints, per window of probe start times (before the burst, its first second, the rest), port and
 * path, the probes, the median and max time to first byte, and how many took over 100 ms; then the steps
 * the clients made. Writes bench/results/healthz-burst.json (BENCH_OUT: another path; each probe
 * as a row of `probeFields`: start ms from the burst, port (`api`/`health`), path, connect ms, first
 * byte ms, status).
 * BENCH_HEALTH_PORT=1: the server (this tree's; not a baseline's) also runs the health listener
 * (LAMER_HEALTH_PORT on a free port, src/plugins/app/health-port.ts), and every probe of the API's
 * port has a twin on the health port, started at the same moment; the table and the JSON then hold
 * both, told apart by `target` (`api`, `health`).
 * BENCH_NODE_ARGS passes node flags to the server (e.g. --cpu-prof).
 * LOOP_TRACE_DIR: each probe's start (monotonic clock) and client port are written there as
 * probes-<server pid>.json, to match against the server's loop trace (bench/loop-trace.ts, loaded
 * with BENCH_NODE_ARGS="--import tsx --import <abs path>/bench/loop-trace.ts").
 *
 * Before/after in one run: BENCH_BASELINE_ROOT names another checkout of the server (e.g. the
 * previous commit, `git archive <commit> | tar -x -C DIR` with node_modules linked in); the burst
 * then runs BENCH_ROUNDS (2) times against each, alternating baseline and this tree, and the
 * report ends with both side by side (medians of the rounds), the ratio of the steps posted, and
 * the ratio of steps per second of the server process's CPU time (/proc; the throughput figure to
 * read on a machine that other processes share, where the steps posted follow the load).
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureDirSync } from '../src/ensure-dir.js';
import { cpuMs, forwardCounters, freePort, startServe } from './bench-http-client.js';
import { MINESWEEPER_ENV, playMineSweeper } from './minesweeper-client.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 64);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const PROBE_MS = Number(process.env.BENCH_PROBE_MS ?? 25);
/** BENCH_HEALTH_PORT=1: probe the health listener's port too (this tree only). */
const HEALTH_PORT = process.env.BENCH_HEALTH_PORT === '1';
const BEFORE_MS = 1000;
const ENV = MINESWEEPER_ENV;
/** Set: each probe's start (monotonic clock, ms) and client port go to LOOP_TRACE_DIR/probes-<server pid>.json (bench/loop-trace.ts). */
const TRACE_DIR = process.env.LOOP_TRACE_DIR;
let traced: object[] = [];


/**
 * One probe on a fresh connection: ms from the start to the connection and to the status line.
 * `traced`: recorded for LOOP_TRACE_DIR (the API's port only: the loop trace sees only its connections).
 */
function probe(port: number, p: string, trace = true): Promise<{ connectMs: number; firstByteMs: number; status: number }> {
  const t0 = performance.now();
  const startNs = process.hrtime.bigint();
  let connectMs = NaN;
  let localPort = 0;
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'GET', path: p, agent: false }, (res) => {
      const firstByteMs = performance.now() - t0;
      if (TRACE_DIR && trace) traced.push({ t: Number(startNs) / 1e6, port: localPort, path: p, connectMs, firstByteMs });
      res.resume();
      res.on('end', () => resolve({ connectMs, firstByteMs, status: res.statusCode ?? 0 }));
    });
    req.on('socket', (s) => s.once('connect', () => ((connectMs = performance.now() - t0), (localPort = s.localPort ?? 0))));
    req.on('error', () => resolve({ connectMs, firstByteMs: performance.now() - t0, status: 0 }));
    req.end();
  });
}

/** One client: MineSweeper sessions (3 attempts of up to 36 turns) until `stop()`; returns the steps it posted. */
function client(port: number, c: number, stop: () => boolean): Promise<{ steps: number; errors: number }> {
  let n = 0;
  return playMineSweeper({ port, nextSeed: () => c * 1000 + n++, stop, maxSteps: 36 });
}

function pct(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(q * s.length))]! : NaN;
}

/** Which port a probe went to: the API's, or the health listener's (BENCH_HEALTH_PORT). */
type Target = 'api' | 'health';
type Probe = { atMs: number; target: Target; path: string; connectMs: number; firstByteMs: number; status: number };
type WindowRow = {
  window: string; target: Target; path: string; probes: number; connectMsMax: number; firstByteMsP50: number; firstByteMsMax: number; over100Ms: number; failed: number;
};
/** One burst against one server: the windows' figures, the steps the clients posted, the probes. */
interface BurstResult {
  label: string;
  root: string;
  steps: number;
  errors: number;
  stepsPerSec: number;
  /** CPU time of the server process from the burst's start until its clients stopped, ms (null off Linux). */
  serverCpuMs: number | null;
  /** Forward passes during the burst, their mean rows, and the seconds spent in them (/metrics). */
  engine: { forwards: number; rowsPerForward: number; forwardSeconds: number };
  windows: WindowRow[];
  probes: Probe[];
}

const round = (x: number) => Math.round(x * 10) / 10;

/**
 * Starts `src/cli/serve.ts` of the tree at `serverRoot` (builtin engine, fresh data directory), waits until
 * ready, runs one burst, stops it. @throws ServerNotReady when it exits first or is not ready in 180 s.
 */
async function burstAgainst(label: string, serverRoot: string): Promise<BurstResult> {
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  // the health listener only on this tree: a baseline checkout may not have it
  const healthPort = HEALTH_PORT && label === 'this tree' ? await freePort() : null;
  const env: Record<string, string> = healthPort === null ? {} : { LAMER_HEALTH_PORT: String(healthPort) };
  const options = { root: serverRoot, engine: 'builtin', tmpPrefix: 'lamer-bench-healthz-', nodeArgs, readyTimeoutS: 180, env } as const;
  const server = await startServe(`server of ${serverRoot}`, options);
  const { port } = server;
  try {
    const probes: Probe[] = [];
    const t0 = performance.now() + BEFORE_MS;
    const running: Promise<void>[] = [];
    let k = 0;
    const timer = setInterval(() => {
      const at = performance.now() - t0;
      const p = k++ % 2 === 0 ? '/healthz' : '/readyz';
      running.push(probe(port, p).then((r) => void probes.push({ atMs: at, target: 'api', path: p, ...r })));
      if (healthPort !== null) running.push(probe(healthPort, p, false).then((r) => void probes.push({ atMs: at, target: 'health', path: p, ...r })));
    }, PROBE_MS);
    await new Promise((r) => setTimeout(r, BEFORE_MS));
    let stop = false;
    const cpu0 = cpuMs(server.pid);
    const fw0 = await forwardCounters(port);
    const burstT = Number(process.hrtime.bigint()) / 1e6;
    const clients = Array.from({ length: CLIENTS }, (_, c) => client(port, c, () => stop));
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    clearInterval(timer);
    stop = true;
    const done = await Promise.all(clients);
    const cpu1 = cpuMs(server.pid);
    const fw1 = await forwardCounters(port);
    const forwards = fw1.forwards - fw0.forwards;
    const engine = { forwards, rowsPerForward: round(((fw1.rows - fw0.rows) / forwards) * 10) / 10, forwardSeconds: round(fw1.forwardSeconds - fw0.forwardSeconds) };
    await Promise.all(running);
    if (TRACE_DIR) {
      fs.mkdirSync(TRACE_DIR, { recursive: true });
      fs.writeFileSync(path.join(TRACE_DIR, `probes-${server.pid}.json`), JSON.stringify({ label, burstT, probes: traced }));
      traced = [];
    }

    const windows = [
      { name: 'before the burst', from: -Infinity, to: 0 },
      { name: 'burst 0-1 s', from: 0, to: 1000 },
      { name: `burst 1-${SECONDS} s`, from: 1000, to: Infinity },
    ];
    const targets: Target[] = healthPort === null ? ['api'] : ['api', 'health'];
    const rows = windows.flatMap((w) =>
      targets.flatMap((target) => ['/healthz', '/readyz'].map((p) => {
        const ps = probes.filter((x) => x.target === target && x.path === p && x.atMs >= w.from && x.atMs < w.to);
        const fb = ps.map((x) => x.firstByteMs);
        return {
          window: w.name, target, path: p, probes: ps.length, connectMsMax: round(Math.max(...ps.map((x) => x.connectMs))),
          firstByteMsP50: round(pct(fb, 0.5)), firstByteMsMax: round(Math.max(...fb)), over100Ms: fb.filter((x) => x > 100).length,
          failed: ps.filter((x) => x.status !== 200).length,
        };
      })),
    );
    const steps = done.reduce((n, d) => n + d.steps, 0);
    const errors = done.reduce((n, d) => n + d.errors, 0);
    const serverCpuMs = cpu0 === null || cpu1 === null ? null : cpu1 - cpu0;
    return { label, root: serverRoot, steps, errors, stepsPerSec: round(steps / SECONDS), serverCpuMs, engine, windows: rows, probes };
  } finally {
    await server.stop();
  }
}

function printBurst(r: BurstResult): void {
  console.log(`\n${r.label} (${r.root}): time to first byte of probes on fresh connections, ${CLIENTS} MineSweeper clients starting at 0 (builtin engine)\n`);
  console.log('| window | port | path | probes | connect ms max | first byte ms p50 | max | over 100 ms | not 200 |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const w of r.windows) {
    console.log(`| ${w.window} | ${w.target} | ${w.path} | ${w.probes} | ${w.connectMsMax} | ${w.firstByteMsP50} | ${w.firstByteMsMax} | ${w.over100Ms} | ${w.failed} |`);
  }
  const perStep = r.serverCpuMs === null ? '' : `; server CPU ${r.serverCpuMs} ms, ${round(r.serverCpuMs / Math.max(1, r.steps))} ms per step`;
  console.log(`\nclients posted ${r.steps} steps in ${SECONDS} s (${Math.round(r.steps / SECONDS)} steps/s), ${r.errors} errors${perStep}`);
  console.log(`forward passes ${r.engine.forwards} (${r.engine.rowsPerForward} rows each), ${r.engine.forwardSeconds} s in them`);
}

/**
 * Ratios of this tree's figures to the baseline's, over the rounds (sums of steps; medians of the
 * rounds' window figures), per window and path.
 */
function compare(current: BurstResult[], baseline: BurstResult[]) {
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const sum = (rs: BurstResult[], f: (r: BurstResult) => number) => rs.reduce((n, r) => n + f(r), 0);
  const stepsRatio = Math.round((sum(current, (r) => r.steps) / Math.max(1, sum(baseline, (r) => r.steps))) * 100) / 100;
  // steps per second of server CPU: the throughput figure that other processes on the machine distort least
  const perCpu = (rs: BurstResult[]) => sum(rs, (r) => r.steps) / Math.max(1, sum(rs, (r) => r.serverCpuMs ?? NaN));
  const stepsPerCpuRatio = Math.round((perCpu(current) / perCpu(baseline)) * 100) / 100;
  // rows matched by window, port and path: the baseline has no health-port rows
  const same = (a: WindowRow) => (x: WindowRow) => x.window === a.window && x.target === a.target && x.path === a.path;
  const windows = current[0]!.windows.filter((w) => baseline[0]!.windows.some(same(w))).map((w) => {
    const c = current.map((r) => r.windows.find(same(w))!);
    const b = baseline.map((r) => r.windows.find(same(w))!);
    return {
      window: w.window, target: w.target, path: w.path,
      baselineP50: med(b.map((x) => x.firstByteMsP50)), p50: med(c.map((x) => x.firstByteMsP50)),
      baselineMax: med(b.map((x) => x.firstByteMsMax)), max: med(c.map((x) => x.firstByteMsMax)),
      baselineOver100: b.reduce((n, x) => n + x.over100Ms, 0), over100: c.reduce((n, x) => n + x.over100Ms, 0),
      probes: c.reduce((n, x) => n + x.probes, 0), baselineProbes: b.reduce((n, x) => n + x.probes, 0),
    };
  });
  return { stepsRatio, stepsPerCpuRatio, windows };
}

async function main(): Promise<void> {
  const baselineRoot = process.env.BENCH_BASELINE_ROOT ? path.resolve(process.env.BENCH_BASELINE_ROOT) : null;
  const rounds = Number(process.env.BENCH_ROUNDS ?? (baselineRoot ? 2 : 1));
  const results: BurstResult[] = [];
  for (let i = 0; i < rounds; i++) {
    // baseline and this tree alternate, so that a change of machine load hits both alike
    if (baselineRoot) results.push(await burstAgainst('baseline', baselineRoot));
    results.push(await burstAgainst('this tree', root));
    if (baselineRoot) printBurst(results.at(-2)!);
    printBurst(results.at(-1)!);
  }
  const current = results.filter((r) => r.label === 'this tree');
  const baseline = results.filter((r) => r.label === 'baseline');
  const comparison = baseline.length > 0 ? compare(current, baseline) : null;
  if (comparison) {
    console.log(`\nthis tree against the baseline over ${rounds} rounds each (medians of the rounds)\n`);
    console.log('| window | path | first byte ms p50, baseline -> this | max, baseline -> this | over 100 ms, baseline -> this (of probes) |');
    console.log('|---|---|---|---|---|');
    for (const w of comparison.windows) {
      const over = `${w.baselineOver100}/${w.baselineProbes} -> ${w.over100}/${w.probes}`;
      console.log(`| ${w.window} | ${w.path} | ${w.baselineP50} -> ${w.p50} | ${w.baselineMax} -> ${w.max} | ${over} |`);
    }
    const b = baseline.reduce((n, r) => n + r.steps, 0);
    const c = current.reduce((n, r) => n + r.steps, 0);
    const cb = baseline.reduce((n, r) => n + (r.serverCpuMs ?? NaN), 0);
    const cc = current.reduce((n, r) => n + (r.serverCpuMs ?? NaN), 0);
    console.log(`\nsteps posted: baseline ${b}, this tree ${c} (ratio ${comparison.stepsRatio})`);
    console.log(`server CPU: baseline ${cb} ms (${round(cb / b)} ms per step), this tree ${cc} ms (${round(cc / c)} ms per step); steps per CPU second, ratio ${comparison.stepsPerCpuRatio}`);
  }
  console.log(`load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} (${os.cpus().length} CPUs)`);
  const out = process.env.BENCH_OUT ?? path.join('bench', 'results', 'healthz-burst.json');
  ensureDirSync(path.dirname(path.resolve(root, out)));
  // each probe as one row [atMs, path, connectMs, firstByteMs, status] on one line
  const strip = (r: BurstResult) => ({
    ...r, probes: r.probes.map((p) => [round(p.atMs), p.target, p.path, round(p.connectMs), round(p.firstByteMs), p.status]),
  });
  const text = JSON.stringify({
    date: new Date().toISOString(), node: process.version, cpus: os.cpus().length, loadAverage: os.loadavg(), clients: CLIENTS, seconds: SECONDS, probeMs: PROBE_MS,
    env: ENV, forwardSectionTokens: process.env.LAMER_FORWARD_SECTION_TOKENS ?? 'default', healthPort: HEALTH_PORT, rounds, comparison,
    probeFields: ['atMs', 'target', 'path', 'connectMs', 'firstByteMs', 'status'], runs: results.map(strip),
  }, null, 2);
  fs.writeFileSync(path.resolve(root, out), text.replace(/\[\n\s+([^[\]{}]*?)\n\s+\]/g, (_m, inner: string) => `[${inner.replace(/\n\s+/g, ' ')}]`) + '\n');
  console.log(`wrote ${out}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
