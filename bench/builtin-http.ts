/**
 * `npm run bench:builtin-http`: steps/s of MineSweeper sessions played through HTTP on the builtin
 * model (the shipped base unless LAMER_BASE_MODEL_DIR says otherwise) at concurrency 1, 8 and 32,
 * and how much batching gains: steps/s at c over steps/s at c=1 measured in the same round.
 *
 * The server runs as a separate process (`tsx src/cli/serve.ts`, builtin engine, its defaults:
 * batching window 2 ms, 32 rows, forward sections of 512 tokens; a fresh data directory). Each
 * client plays MineSweeper 6x6 with 3 mines (bench/minesweeper-client.ts: sessions of 3 attempts
 * of at most 7 turns, `availableActions` on every step, a reflection after a failed attempt), one
 * request at a time over a keep-alive connection, taking the next task seed from a counter shared
 * by all levels (every level plays new tasks). A level runs BENCH_WARMUP_SECONDS (3) untimed, then
 * BENCH_SECONDS (15) timed: steps answered in the window / its length. The levels run in
 * BENCH_ROUNDS (2) rounds, their order reversed every other round, so that a drift of the
 * machine's load hits every level alike.
 *
 * Per level (medians over the rounds): steps/s, its ratio to c=1 of the same round, CPU time of the
 * server process per step (/proc) and of the clients (this process, `process.cpuUsage`), forward
 * passes and the rows and milliseconds of each (from the server's /metrics:
 * `lamer_engine_batch_rows`, `lamer_engine_forward_seconds`), forward ms per step, step latency p50.
 * On a machine other processes share, the CPU per step is the figure that their load distorts
 * least, and the table ends with what it implies for an idle machine of 2 or more cores (an
 * estimate, not a measurement): at c=1 a step costs the server's CPU plus the client's, one after
 * the other; at higher c the server (one thread) and the clients run side by side, so a step costs
 * the larger of the two; `cpu-bound over c=1` is the ratio of those estimates.
 *
 * Before/after in one run: BENCH_BASELINE_ROOT names another checkout of the server (e.g.
 * `git worktree add /tmp/base <commit>` with node_modules linked in); every round then measures
 * the baseline's server and this tree's, alternating, and the report ends with both side by side.
 *
 * Options (env): BENCH_CONCURRENCY (comma list, default 1,8,32), BENCH_SECONDS, BENCH_WARMUP_SECONDS,
 * BENCH_ROUNDS, BENCH_NODE_ARGS (node flags for the server, e.g. --cpu-prof), BENCH_OUT (default
 * bench/results/builtin-http.json).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureDirSync } from '../src/ensure-dir.js';
import { cpuMs, forwardCounters, metricsText, readMetric, type Started, startServe } from './bench-http-client.js';
import { MINESWEEPER_ENV, playMineSweeper } from './minesweeper-client.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const LEVELS = (process.env.BENCH_CONCURRENCY ?? '1,8,32').split(',').map(Number);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 15);
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);

interface LevelRun {
  tree: string;
  round: number;
  concurrency: number;
  seconds: number;
  steps: number;
  stepsPerSecond: number;
  errors: number;
  /** CPU time of the server process per timed step, ms (null off Linux). */
  serverCpuMsPerStep: number | null;
  /** CPU time of the clients (this process) per timed step, ms. */
  clientCpuMsPerStep: number;
  forwards: number;
  rowsPerForward: number;
  msPerForward: number;
  /** Seconds inside forward passes per timed step, ms. */
  forwardMsPerStep: number;
  p50Ms: number;
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/**
 * Starts `src/cli/serve.ts` of the tree at `serverRoot` (builtin engine, fresh data directory, removed at
 * its stop) and waits until /readyz answers 200. @throws ServerNotReady when it exits first or is not ready in 180 s.
 */
function startServer(serverRoot: string): Promise<Started> {
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const options = { root: serverRoot, engine: 'builtin', tmpPrefix: 'lamer-bench-builtin-', nodeArgs, readyTimeoutS: 180 } as const;
  return startServe(`server of ${serverRoot}`, options);
}

let nextSeed = 0;

/** One level: `c` clients for WARMUP s untimed, then SECONDS s timed; stops them and waits. */
async function runLevel(s: Started, tree: string, roundNo: number, c: number): Promise<LevelRun> {
  let stop = false;
  let measuring = false;
  const latencies: number[] = [];
  const clients = Array.from({ length: c }, () =>
    playMineSweeper({ port: s.port, nextSeed: () => (stop ? null : nextSeed++), stop: () => stop, onStep: (ms) => measuring && latencies.push(ms) }),
  );
  await new Promise((r) => setTimeout(r, WARMUP * 1000));
  const cpu0 = cpuMs(s.pid);
  const fw0 = await forwardCounters(s.port);
  measuring = true;
  const t0 = performance.now();
  const own0 = process.cpuUsage();
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  measuring = false;
  const own = process.cpuUsage(own0);
  const elapsed = (performance.now() - t0) / 1000;
  const cpu1 = cpuMs(s.pid);
  const fw1 = await forwardCounters(s.port);
  stop = true;
  const done = await Promise.all(clients);
  const steps = latencies.length;
  latencies.sort((a, b) => a - b);
  const forwards = fw1.forwards - fw0.forwards;
  return {
    tree, round: roundNo, concurrency: c, seconds: round2(elapsed), steps, stepsPerSecond: round2(steps / elapsed),
    errors: done.reduce((n, d) => n + d.errors, 0),
    serverCpuMsPerStep: cpu0 === null || cpu1 === null ? null : round2((cpu1 - cpu0) / Math.max(1, steps)),
    clientCpuMsPerStep: round2((own.user + own.system) / 1000 / Math.max(1, steps)),
    forwards, rowsPerForward: round2((fw1.rows - fw0.rows) / Math.max(1, forwards)),
    msPerForward: round2(((fw1.forwardSeconds - fw0.forwardSeconds) * 1000) / Math.max(1, forwards)),
    forwardMsPerStep: round2(((fw1.forwardSeconds - fw0.forwardSeconds) * 1000) / Math.max(1, steps)),
    p50Ms: round2(latencies[Math.floor(latencies.length / 2)] ?? NaN),
  };
}

/** Median (the mean of the middle two for an even count) of the finite values; NaN when none. */
const median = (xs: number[]) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** Per level of one tree: medians over the rounds, and the ratio to c=1 of the same round. */
function summarise(runs: LevelRun[], tree: string) {
  const mine = runs.filter((r) => r.tree === tree);
  return LEVELS.map((c) => {
    const at = mine.filter((r) => r.concurrency === c);
    const ratios = at.map((r) => r.stepsPerSecond / (mine.find((x) => x.round === r.round && x.concurrency === LEVELS[0])?.stepsPerSecond ?? NaN));
    const m = (f: (r: LevelRun) => number | null) => round2(median(at.map((r) => f(r) ?? NaN)));
    // ms per step on an idle machine if CPU were all that counted (see the module comment)
    const cpuBound = (r: LevelRun) => {
      const server = r.serverCpuMsPerStep ?? NaN;
      return r.concurrency === 1 ? server + r.clientCpuMsPerStep : Math.max(server, r.clientCpuMsPerStep);
    };
    const firstBound = median(mine.filter((x) => x.concurrency === LEVELS[0]).map(cpuBound));
    return {
      concurrency: c, stepsPerSecond: m((r) => r.stepsPerSecond), overFirstLevel: round2(median(ratios)), ratios: ratios.map(round2),
      serverCpuMsPerStep: m((r) => r.serverCpuMsPerStep), clientCpuMsPerStep: m((r) => r.clientCpuMsPerStep),
      cpuBoundOverFirstLevel: round2(firstBound / median(at.map(cpuBound))),
      rowsPerForward: m((r) => r.rowsPerForward), msPerForward: m((r) => r.msPerForward),
      forwardMsPerStep: m((r) => r.forwardMsPerStep), p50Ms: m((r) => r.p50Ms), errors: at.reduce((n, r) => n + r.errors, 0),
    };
  });
}

function printSummary(tree: string, rows: ReturnType<typeof summarise>): void {
  console.log(`\n${tree}: MineSweeper through HTTP, builtin engine, ${ROUNDS} rounds of ${SECONDS} s per level (medians)\n`);
  const first = LEVELS[0];
  console.log(
    `| c | steps/s | over c=${first} (per round) | server CPU ms/step | client CPU ms/step | cpu-bound over c=${first} | rows/forward | ms/forward |` +
      ' forward ms/step | p50 ms | errors |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(
      `| ${r.concurrency} | ${r.stepsPerSecond} | ${r.overFirstLevel} (${r.ratios.join(', ')}) | ${r.serverCpuMsPerStep} | ${r.clientCpuMsPerStep} |` +
        ` ${r.cpuBoundOverFirstLevel} | ${r.rowsPerForward} | ${r.msPerForward} | ${r.forwardMsPerStep} | ${r.p50Ms} | ${r.errors} |`,
    );
  }
}

async function main(): Promise<void> {
  const baselineRoot = process.env.BENCH_BASELINE_ROOT ? path.resolve(process.env.BENCH_BASELINE_ROOT) : null;
  const trees: Array<[string, string]> = baselineRoot ? [['baseline', baselineRoot], ['this tree', root]] : [['this tree', root]];
  const servers = new Map<string, Started>();
  const runs: LevelRun[] = [];
  const rssMb: Record<string, number> = {};
  try {
    for (const [name, dir] of trees) servers.set(name, await startServer(dir));
    for (let r = 0; r < ROUNDS; r++) {
      const levels = r % 2 === 0 ? LEVELS : [...LEVELS].reverse();
      for (const c of levels) {
        // trees alternate within a level, their order flipped each round
        for (const [name] of r % 2 === 0 ? trees : [...trees].reverse()) {
          const run = await runLevel(servers.get(name)!, name, r, c);
          runs.push(run);
          console.log(`round ${r} ${name} c=${c}: ${run.steps} steps, ${run.stepsPerSecond} steps/s, server CPU ${run.serverCpuMsPerStep} ms/step`);
        }
      }
    }
    // resident memory keeps its high-water mark (the wasm heap never shrinks)
    for (const [name, s] of servers) rssMb[name] = Math.round(readMetric(await metricsText(s.port), 'process_resident_memory_bytes') / 2 ** 20);
  } finally {
    for (const s of servers.values()) await s.stop();
  }
  const summaries = Object.fromEntries(trees.map(([name]) => [name, summarise(runs, name)]));
  for (const [name, rows] of Object.entries(summaries)) printSummary(name, rows);
  console.log(`\nserver resident memory at the end, MB: ${Object.entries(rssMb).map(([n, mb]) => `${n} ${mb}`).join(', ')}`);
  console.log(`\nload average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} (${os.cpus().length} CPUs)`);
  const out = process.env.BENCH_OUT ?? path.join('bench', 'results', 'builtin-http.json');
  ensureDirSync(path.dirname(path.resolve(root, out)));
  fs.writeFileSync(path.resolve(root, out), JSON.stringify({
    date: new Date().toISOString(), node: process.version, cpus: os.cpus().length, loadAverage: os.loadavg(), env: MINESWEEPER_ENV,
    levels: LEVELS, seconds: SECONDS, warmupSeconds: WARMUP, rounds: ROUNDS, baselineRoot, summaries, rssMb, runs,
  }, null, 2) + '\n');
  console.log(`wrote ${out}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
