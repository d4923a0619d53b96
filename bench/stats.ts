/**
 * `npm run bench:stats`: how long `GET /v1/stats` and `GET /v1/stats/diversity` take (ms per call,
 * over real HTTP on a keep-alive connection) as the completed sessions grow: BENCH_STATS_SIZES
 * (1000, 10000, 100000) sessions written straight into a fresh SQLite file, then the server
 * started on it.
 *
 * Data per size: completed sessions over 3 model versions, 2 envs and both modes, half of them
 * single-attempt (memory 'none', read as retry chains), half of 3 attempts (reflection_only or
 * history_only), over 200 tasks per env; success 40% per attempt; each attempt 2-6 action steps of
 * 4 actions (prompts of 200 characters), so trajectories repeat and diversity has something to
 * measure. Ids and times are time-ordered as the server makes them.
 *
 * All servers run at once, each on its own copy of the file, and are measured alike, round by
 * round, so that a change of the machine's load meets all of them: the time until /readyz answers
 * 200 (this tree rebuilds its aggregates from the sessions at that start, the file having been
 * written around it); the first call of each route; BENCH_STATS_WARMUP (10) rounds of every route
 * not measured and a pause of 3 s (then the CPU each server uses in 2 s idle, printed: it should
 * be about 0); then, route by route, BENCH_STATS_ROUNDS (60) rounds of one call on each server, in a new random order each round (median, p90, min, and the server
 * process's CPU time per call from /proc, which other processes on a shared machine distort
 * least: what a polling dashboard meets); then BENCH_STATS_AFTER (30) rounds of one new session
 * completed over HTTP on each server followed by one call of each route (median ms, and CPU ms per
 * call: what a dashboard meets while sessions complete, as during an eval).
 *
 * Before/after in one run: BENCH_BASELINE_ROOT names another checkout of the server (e.g. the
 * branch's base, `git archive <commit> | tar -x -C DIR` with node_modules linked in); it runs on a
 * copy of each size's file (written before any server starts, with this tree's schema, which holds
 * the baseline's). Servers run as child processes (`tsx src/cli/serve.ts`, engine test, no API
 * keys: tenant `default`).
 *
 * Prints a table; writes bench/results/stats.json (BENCH_OUT: another path) with the host's load
 * average. Run it under `nice -n 19` on a shared machine: the ratios are what to read.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { ensureDirSync } from '../src/ensure-dir.js';
import { openDatabase } from '../src/db/index.js';
import { newSessionId } from '../src/agent/step-hash.js';
import { mulberry32 } from '../src/shared/rng.js';
import { cpuMs, request, startServe } from './bench-http-client.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SIZES = (process.env.BENCH_STATS_SIZES ?? '1000,10000,100000').split(',').map(Number);
const REPS = Number(process.env.BENCH_STATS_ROUNDS ?? 60);
const AFTER = Number(process.env.BENCH_STATS_AFTER ?? 30);
const WARMUP = Number(process.env.BENCH_STATS_WARMUP ?? 10);
/** CPU ms each server used in 2 s without calls, after the warm-up (a check that the CPU per call is the calls'). */
const idleCpuMs: number[] = [];
const ROUTES = ['/v1/stats', '/v1/stats/diversity'] as const;
const VERSIONS = ['test', 'lamer-1', 'gigpo-1'];
const ENVS = ['minesweeper', 'sokoban'];
const ACTIONS = ['up', 'down', 'left', 'right'];

/**
 * Writes `n` completed sessions and their action steps into the database of `dataDir` (created
 * with this tree's schema, which the baseline's reads are a part of).
 */
function fill(dataDir: string, n: number): void {
  openDatabase(dataDir).close();
  const db = new Database(path.join(dataDir, 'lamer.db'));
  const rand = mulberry32(n); // seeded: every size gets the same kind of data on every run
  const insSession = db.prepare(
    `INSERT INTO sessions (id, tenant, task_id, env, mode, status, instructions, max_attempts, max_steps, memory, sampling,
      model_version, metadata, next_attempt, next_step, attempts, created_at, updated_at)
     VALUES (?, 'default', ?, ?, ?, 'completed', 'Solve the puzzle.', ?, 20, ?, '{}', ?, '{}', ?, 0, ?, ?, ?)`,
  );
  const insStep = db.prepare(
    `INSERT INTO steps (session_id, attempt, step, kind, observation, reward, done, success, invalid_action, prompt, output, action,
      model_version, request_hash, created_at)
     VALUES (?, ?, ?, 'action', ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)`,
  );
  const start = Date.now() - n * 1000;
  db.transaction(() => {
    for (let i = 0; i < n; i++) {
      const at = start + i * 1000;
      const id = newSessionId(at);
      const env = ENVS[i % 2]!;
      const version = VERSIONS[Math.floor(i / 7) % 3]!;
      const single = rand() < 0.5;
      const maxAttempts = single ? 1 : 3;
      const attempts = [];
      const steps: unknown[][] = [];
      for (let a = 0; a < maxAttempts; a++) {
        const success = rand() < 0.4;
        const n = 2 + Math.floor(rand() * 5);
        for (let s = 0; s <= n; s++) {
          const done = s === n;
          const action = done ? null : ACTIONS[Math.floor(rand() * ACTIONS.length)]!;
          const reward = s === 0 ? 0 : done && success ? 1 : -0.1;
          steps.push([id, a, s, `board ${a}.${s}`, reward, done ? 1 : 0, done && success ? 1 : 0, done ? null : 'p'.repeat(200), action, action, version, `h${i}.${a}.${s}`, at]);
        }
        attempts.push({ attempt: a, status: success ? 'succeeded' : 'failed', steps: n + 1, return: success ? 1 - 0.1 * (n - 1) : -0.1 * n, success, endReason: 'done' });
        if (success) break;
      }
      const memory = single || rand() < 0.5 ? 'reflection_only' : 'history_only';
      insSession.run(id, `${env}-task-${Math.floor(rand() * 200)}`, env, rand() < 0.25 ? 'train' : 'eval', maxAttempts, memory, version, attempts.length, JSON.stringify(attempts), at, at + 500);
      for (const row of steps) insStep.run(...row);
    }
  })();
  db.close();
}

const pct = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};
const r2 = (x: number) => Math.round(x * 100) / 100;

/** Plays one single-attempt session to completion over HTTP. */
async function completeOne(agent: http.Agent, port: number, k: number): Promise<void> {
  const c = await request(agent, port, 'POST', '/v1/sessions', { taskId: `minesweeper-task-${k % 200}`, env: 'minesweeper', instructions: 'x', maxAttempts: 1, maxSteps: 5, mode: 'eval' });
  if (c.status !== 201) throw new Error(`create: ${c.status}`);
  const id = c.json.id as string;
  const a = await request(agent, port, 'POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o', availableActions: ['up', 'down'] });
  const b = await request(agent, port, 'POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 1, observation: 'e', reward: 1, done: true, success: k % 2 === 0 });
  if (a.status !== 200 || b.status !== 200 || b.json.session.status !== 'completed') throw new Error('the session did not complete');
}

interface RouteFigures {
  firstMs: number;
  medianMs: number;
  p90Ms: number;
  minMs: number;
  /** The server process's CPU time per call over the polling rounds, ms (null off Linux). */
  cpuMsPerCall: number | null;
  afterCompletionMs: number;
  /** The server's CPU time per call over the calls after a completion (the completions not counted), ms. */
  afterCompletionCpuMs: number | null;
  sessions: number;
}
interface ServerRun {
  label: string;
  root: string;
  size: number;
  readyMs: number;
  /** CPU ms used in 2 s without calls after the warm-up. */
  idleCpuMs: number | null;
  routes: Record<string, RouteFigures>;
}

async function timed(agent: http.Agent, port: number, p: string): Promise<{ ms: number; json: any }> {
  const t0 = performance.now();
  const r = await request(agent, port, 'GET', p);
  const ms = performance.now() - t0;
  if (r.status !== 200) throw new Error(`${p}: ${r.status}`);
  return { ms, json: r.json };
}

/** One server process under measurement. */
interface Running {
  label: string;
  root: string;
  size: number;
  port: number;
  agent: http.Agent;
  readyMs: number;
  cpu(): number | null;
  stop(): Promise<void>;
}

/**
 * Starts `src/cli/serve.ts` of `serverRoot` on `dataDir` (engine test, no keys) and waits until /readyz
 * answers 200, polled every 50 ms for `readyMs`; no deadline: this tree's start rebuilds the aggregates of
 * the file's sessions, however long that takes on a shared machine. @throws ServerNotReady when it exits first.
 */
async function start(label: string, serverRoot: string, dataDir: string, size: number): Promise<Running> {
  const t0 = performance.now();
  const options = { root: serverRoot, engine: 'test', dataDir, readyTimeoutS: Infinity, pollMs: 50 } as const;
  const s = await startServe(`server of ${label} (${size} sessions)`, options);
  const readyMs = Math.round(performance.now() - t0);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const stop = async () => {
    agent.destroy();
    await s.stop();
  };
  return { label, root: serverRoot, size, port: s.port, agent, readyMs, cpu: () => cpuMs(s.pid), stop };
}

/**
 * Measures every server alike: the first call of each route, then ROUNDS rounds in which each
 * server (in a new random order each round) answers one call of each route, then AFTER rounds in
 * which each server completes one session and answers one call of each route. A change of the
 * machine's load meets every server within the same round.
 */
async function measureAll(servers: Running[]): Promise<ServerRun[]> {
  const figures = servers.map(() => Object.fromEntries(ROUTES.map((p) => [p, { first: 0, sessions: 0, ms: [] as number[], after: [] as number[], cpu: 0, afterCpu: 0 }])));
  for (const [i, s] of servers.entries()) {
    for (const p of ROUTES) {
      const first = await timed(s.agent, s.port, p);
      Object.assign(figures[i]![p]!, { first: first.ms, sessions: p === '/v1/stats' ? first.json.sessions : first.json.scanned });
    }
  }
  const order = servers.map((_, i) => i);
  const shuffle = () => order.sort(() => Math.random() - 0.5);
  // warm-up rounds of every route, then a pause: V8 compiles and collects garbage (a start-up
  // rebuild's too) on threads of its own, whose CPU time would count in the calls' otherwise
  for (let k = 0; k < WARMUP; k++) for (const p of ROUTES) for (const i of shuffle()) await timed(servers[i]!.agent, servers[i]!.port, p);
  await new Promise((r) => setTimeout(r, 3000));
  const idle0 = servers.map((s) => s.cpu());
  await new Promise((r) => setTimeout(r, 2000));
  idleCpuMs.push(...servers.map((s, i) => (s.cpu() ?? NaN) - (idle0[i] ?? NaN)));
  // CPU read around each call, not over a round (the other servers' calls would add each server's idle CPU)
  for (const p of ROUTES) {
    for (let k = 0; k < REPS; k++) {
      for (const i of shuffle()) {
        const s = servers[i]!;
        const c0 = s.cpu();
        figures[i]![p]!.ms.push((await timed(s.agent, s.port, p)).ms);
        figures[i]![p]!.cpu += ((s.cpu() ?? NaN) - (c0 ?? NaN)) / REPS;
      }
    }
  }
  for (let k = 0; k < AFTER; k++) {
    for (const i of shuffle()) {
      const s = servers[i]!;
      await completeOne(s.agent, s.port, k);
      for (const p of ROUTES) {
        const c0 = s.cpu();
        figures[i]![p]!.after.push((await timed(s.agent, s.port, p)).ms);
        figures[i]![p]!.afterCpu += ((s.cpu() ?? NaN) - (c0 ?? NaN)) / AFTER;
      }
    }
  }
  return servers.map((s, i) => ({
    label: s.label, root: s.root, size: s.size, readyMs: s.readyMs, idleCpuMs: idleCpuMs[i] ?? null,
    routes: Object.fromEntries(ROUTES.map((p) => {
      const f = figures[i]![p]!;
      const cpu = (x: number) => (Number.isNaN(x) ? null : r2(x));
      return [p, {
        firstMs: r2(f.first), medianMs: r2(pct(f.ms, 0.5)), p90Ms: r2(pct(f.ms, 0.9)), minMs: r2(Math.min(...f.ms)), cpuMsPerCall: cpu(f.cpu),
        afterCompletionMs: r2(pct(f.after, 0.5)), afterCompletionCpuMs: cpu(f.afterCpu), sessions: f.sessions,
      }];
    })),
  }));
}

function printRuns(runs: ServerRun[]): void {
  console.log('\n| sessions | server | ready ms | idle CPU ms in 2 s | route | first ms | median ms | p90 ms | min ms | CPU ms/call | after a completion: ms | CPU ms |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of runs) {
    for (const p of ROUTES) {
      const f = r.routes[p]!;
      const cells = [r.size, r.label, r.readyMs, r.idleCpuMs, p, f.firstMs, f.medianMs, f.p90Ms, f.minMs, f.cpuMsPerCall, f.afterCompletionMs, f.afterCompletionCpuMs];
      console.log(`| ${cells.join(' | ')} |`);
    }
  }
}

/** Each server's medians as a multiple of its own at the smallest size (the aim: within 1.5x). */
function ratios(runs: ServerRun[]) {
  const out: Array<{ label: string; route: string; size: number; median: number; cpu: number | null; afterCompletion: number }> = [];
  for (const label of [...new Set(runs.map((r) => r.label))]) {
    const mine = runs.filter((r) => r.label === label);
    const base = mine[0]!;
    for (const r of mine) {
      for (const p of ROUTES) {
        const b = base.routes[p]!;
        const f = r.routes[p]!;
        const cpu = f.cpuMsPerCall === null || !b.cpuMsPerCall ? null : r2(f.cpuMsPerCall / b.cpuMsPerCall);
        out.push({ label, route: p, size: r.size, median: r2(f.medianMs / b.medianMs), cpu, afterCompletion: r2(f.afterCompletionMs / b.afterCompletionMs) });
      }
    }
  }
  return out;
}

async function main(): Promise<void> {
  const baselineRoot = process.env.BENCH_BASELINE_ROOT ? path.resolve(process.env.BENCH_BASELINE_ROOT) : null;
  const dirs: string[] = [];
  const servers: Running[] = [];
  try {
    for (const size of SIZES) {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lamer-bench-stats-'));
      dirs.push(dataDir);
      const t0 = performance.now();
      fill(dataDir, size);
      const mb = Math.round(fs.statSync(path.join(dataDir, 'lamer.db')).size / 2 ** 20);
      console.log(`${size} sessions written in ${Math.round(performance.now() - t0)} ms (${mb} MiB)`);
      if (baselineRoot) {
        // the baseline gets a copy: each server completes sessions of its own
        const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'lamer-bench-stats-'));
        dirs.push(copy);
        fs.copyFileSync(path.join(dataDir, 'lamer.db'), path.join(copy, 'lamer.db'));
        servers.push(await start('baseline', baselineRoot, copy, size));
      }
      servers.push(await start('this tree', root, dataDir, size));
    }
    const runs = await measureAll(servers);
    const byLabel = [...runs].sort((a, b) => (a.label < b.label ? -1 : a.label > b.label ? 1 : a.size - b.size));
    printRuns(byLabel);
    const rel = ratios(byLabel);
    console.log(`\nmedian ms per call as a multiple of the same server's at ${SIZES[0]} sessions\n`);
    console.log('| server | route | sessions | polling, median ms | polling, CPU ms | after a completion, median ms |');
    console.log('|---|---|---|---|---|---|');
    for (const x of rel) console.log(`| ${x.label} | ${x.route} | ${x.size} | ${x.median} | ${x.cpu} | ${x.afterCompletion} |`);
    console.log(`\nload average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} (${os.cpus().length} CPUs)`);
    const out = process.env.BENCH_OUT ?? path.join('bench', 'results', 'stats.json');
    ensureDirSync(path.dirname(path.resolve(root, out)));
    const text = JSON.stringify({ date: new Date().toISOString(), node: process.version, cpus: os.cpus().length, loadAverage: os.loadavg(), rounds: REPS, after: AFTER, runs: byLabel, ratios: rel }, null, 2);
    fs.writeFileSync(path.resolve(root, out), `${text}\n`);
    console.log(`wrote ${out}`);
  } finally {
    for (const s of servers) await s.stop();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
