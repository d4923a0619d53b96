/**
 * `npm run bench:http`: throughput (steps/s) and latency (p50/p99, ms) of the HTTP step path with
 * the constant-time TestEngine, i.e. the server's own overhead (Fastify, validation, SQLite commit,
 * prompt rendering), at concurrency 1, 16 and 64, against a bare reference measured in the same
 * run: bench/bare-reference.ts, a Fastify route that validates the body with ajv and does one
 * better-sqlite3 INSERT (WAL, synchronous=NORMAL). Both run as separate processes started here;
 * at each level they are measured alternately (BENCH_ROUNDS rounds, the order flipped each round)
 * and the table shows the ratio ours / bare as min / median / max over the rounds, so that a
 * busy machine's drift hits both alike.
 *
 * Then the step latency as an attempt grows: BENCH_LENGTH_SESSIONS sessions of one attempt of
 * BENCH_LENGTH_STEPS + 1 steps, one step at a time (node:http), and the median latency of the last
 * 10 steps over that of steps 1-10; once with the chat prompt (every step of the attempt so far:
 * the test engine has no context window, so the prompt and the token ids each step records grow),
 * and once on a second server (in this process) whose version declares a compact prompt of the
 * last 7 steps (records of bounded size, as a model's context makes them).
 *
 * Workload of the throughput runs: each virtual client drives its own sessions through real step
 * sequences: create a session (3 attempts, maxSteps 8); in each attempt post steps 0..7 with 4
 * available actions (each answered with an action) and step 8 with done: attempts 0 and 1 fail (a
 * reflection is written), attempt 2 succeeds; then start a new session. Keep-alive HTTP/1.1, one
 * connection a client.
 *
 * Clients: `autocannon` (default; low client CPU, which matters when client and server share 2
 * cores; latencies in whole ms and including the 1-in-28 session creations) or `http`
 * (BENCH_CLIENT=http: node:http, only step posts timed, sub-ms resolution).
 *
 * Options (env): BENCH_SECONDS (default 8 per run), BENCH_WARMUP_SECONDS (1), BENCH_ROUNDS (3),
 * BENCH_CONCURRENCY (comma list, default 1,16,64), BENCH_LENGTH_STEPS (200; 0 skips the length
 * profile), BENCH_LENGTH_SESSIONS (5), BENCH_NODE_ARGS (extra node flags for the lamer server, e.g.
 * --cpu-prof). Writes bench/results/http.json. The servers' output is passed through; if one exits
 * before it is ready (or is not ready within 60 s) the bench stops at once, exit 1, with its exit
 * status and the last lines of its output.
 *
 * Before/after in one run: BENCH_BASELINE_ROOT names another checkout of the server (e.g. the
 * commit before a change, its node_modules linked or installed); its `src/cli/serve.ts` runs as a
 * third server (own data folder, no BENCH_NODE_ARGS) measured in the same rounds, the order of the
 * three rotated each round, and a second table gives its steps/s and CPU per step beside ours and
 * ours / baseline CPU per step (min / median / max over the rounds).
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureDirSync } from '../src/ensure-dir.js';
import { cpuSeconds, freePort, request, ServerNotReady, type Started, startProcess } from './bench-http-client.js';
import { autocannonSteps, STEPS, stepBody } from './step-workload.js';
import { BYTE_TOKENIZER } from '../src/model/tokenizers.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);
const LEVELS = (process.env.BENCH_CONCURRENCY ?? '1,16,64').split(',').map(Number);
const CLIENT = process.env.BENCH_CLIENT === 'http' ? 'http' : 'autocannon';
const BASELINE_ROOT = process.env.BENCH_BASELINE_ROOT ? path.resolve(process.env.BENCH_BASELINE_ROOT) : null;

function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

interface LevelResult {
  concurrency: number;
  seconds: number;
  steps: number;
  stepsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  errors: number;
  /** Server process CPU time (user + system) per measured step, µs; null where /proc is missing. */
  serverCpuUsPerStep: number | null;
}

async function runLevel(port: number, concurrency: number, serverPid: number | undefined): Promise<LevelResult> {
  let measuring = false;
  let stop = false;
  const latencies: number[] = [];
  let errors = 0;
  const client = async (c: number) => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    let n = 0;
    while (!stop) {
      const created = await request(agent, port, 'POST', '/v1/sessions', {
        taskId: `bench-${concurrency}-${c}-${n++}`,
        instructions: 'Push the box onto the target. Answer with one move.',
        maxAttempts: 3,
        maxSteps: STEPS,
        env: 'bench',
      });
      if (created.status !== 201) {
        errors++;
        continue;
      }
      const id = created.json.id as string;
      for (let a = 0; a < 3 && !stop; a++) {
        for (let t = 0; t <= STEPS && !stop; t++) {
          const body = stepBody(a, t);
          const t0 = performance.now();
          const r = await request(agent, port, 'POST', `/v1/sessions/${id}/steps`, body);
          const dt = performance.now() - t0;
          if (r.status !== 200) errors++;
          else if (measuring) latencies.push(dt);
        }
      }
    }
    agent.destroy();
  };
  const running = Array.from({ length: concurrency }, (_, c) => client(c));
  await new Promise((r) => setTimeout(r, WARMUP * 1000));
  measuring = true;
  const cpu0 = cpuSeconds(serverPid);
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  measuring = false;
  const cpu1 = cpuSeconds(serverPid);
  const elapsed = (performance.now() - t0) / 1000;
  const steps = latencies.length;
  stop = true;
  await Promise.all(running);
  latencies.sort((x, y) => x - y);
  const round = (x: number) => Math.round(x * 100) / 100;
  return {
    concurrency,
    seconds: round(elapsed),
    steps,
    stepsPerSecond: Math.round(steps / elapsed),
    p50Ms: round(percentile(latencies, 0.5)),
    p99Ms: round(percentile(latencies, 0.99)),
    maxMs: round(latencies[latencies.length - 1] ?? NaN),
    errors,
    serverCpuUsPerStep: cpu0 !== null && cpu1 !== null && steps > 0 ? Math.round(((cpu1 - cpu0) / steps) * 1e6) : null,
  };
}

/**
 * The same workload driven by autocannon (bench/step-workload.ts; lower client CPU than
 * node:http). Latency percentiles include the 1-in-28 session creations.
 */
async function runLevelAutocannon(port: number, concurrency: number, serverPid: number | undefined): Promise<LevelResult> {
  await autocannonSteps(port, concurrency, WARMUP);
  const cpu0 = cpuSeconds(serverPid);
  const r = await autocannonSteps(port, concurrency, SECONDS);
  const cpu1 = cpuSeconds(serverPid);
  return {
    concurrency,
    seconds: SECONDS,
    steps: r.steps,
    stepsPerSecond: Math.round(r.steps / SECONDS),
    p50Ms: r.p50Ms,
    p99Ms: r.p99Ms,
    maxMs: r.maxMs,
    errors: r.errors,
    serverCpuUsPerStep: cpu0 !== null && cpu1 !== null && r.requests > 0 ? Math.round(((cpu1 - cpu0) / r.requests) * 1e6) : null,
  };
}

/** Latency of each step of long attempts, as the attempt grows (ours only). */
interface LengthProfile {
  sessions: number;
  stepsPerAttempt: number;
  /** Median over the sessions of each step's latency, ms, for steps 1..N (index 0 is step 1). */
  medianMsByStep: number[];
  /** Median of the per-step medians of steps 1-10 and of the last 10 steps, ms, and last / first. */
  firstTenMs: number;
  lastTenMs: number;
  lastOverFirst: number;
}

/**
 * Drive `sessions` sessions of one attempt of `length + 1` steps (0..length, maxSteps length + 1,
 * 4 available actions) one step at a time over one keep-alive connection (node:http, sub-ms
 * timing), and time each step: a step path that re-reads the attempt so far grows with the step index.
 */
async function lengthProfile(port: number, sessions: number, length: number, promptPrefix?: string): Promise<LengthProfile> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const bySession: number[][] = [];
  try {
    for (let s = 0; s < sessions; s++) {
      const created = await request(agent, port, 'POST', '/v1/sessions', {
        taskId: `bench-length-${s}`,
        instructions: 'Push the box onto the target. Answer with one move.',
        maxAttempts: 1,
        maxSteps: length + 1,
        env: 'bench',
      });
      if (created.status !== 201) throw new Error(`session create: HTTP ${created.status} ${JSON.stringify(created.json)}`);
      const id = created.json.id as string;
      const times: number[] = [];
      for (let t = 0; t <= length; t++) {
        const body = { ...stepBody(0, t), reward: t === 0 ? 0 : -0.1, done: false, success: false };
        const t0 = performance.now();
        const r = await request(agent, port, 'POST', `/v1/sessions/${id}/steps`, body);
        const dt = performance.now() - t0;
        if (r.status !== 200) throw new Error(`step ${t}: HTTP ${r.status} ${JSON.stringify(r.json)}`);
        if (t > 0) times.push(dt);
      }
      if (promptPrefix !== undefined) {
        // the server must have read the declared prompt format (a version it cannot read is served as chat)
        const first = await request(agent, port, 'GET', `/v1/sessions/${id}/trajectory?limit=1`);
        const prompt = String(first.json?.steps?.[0]?.prompt);
        if (!prompt.startsWith(promptPrefix)) throw new Error(`expected prompts starting ${JSON.stringify(promptPrefix)}, got ${JSON.stringify(prompt.slice(0, 80))}`);
      }
      bySession.push(times);
    }
  } finally {
    agent.destroy();
  }
  const median = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  };
  const round = (x: number) => Math.round(x * 1000) / 1000;
  const perStep = Array.from({ length }, (_, i) => median(bySession.map((ts) => ts[i]!)));
  const firstTen = median(perStep.slice(0, 10));
  const lastTen = median(perStep.slice(-10));
  return {
    sessions,
    stepsPerAttempt: length + 1,
    medianMsByStep: perStep.map(round),
    firstTenMs: round(firstTen),
    lastTenMs: round(lastTen),
    lastOverFirst: round(lastTen / firstTen),
  };
}

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const LENGTH = Number(process.env.BENCH_LENGTH_STEPS ?? 200);
const LENGTH_SESSIONS = Number(process.env.BENCH_LENGTH_SESSIONS ?? 5);

/** Min, median and max of `xs` (rounded to 2 decimals). */
function spread(xs: number[]): { min: number; median: number; max: number } {
  const s = [...xs].sort((a, b) => a - b);
  const med = s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  const r = (x: number) => Math.round(x * 100) / 100;
  return { min: r(s[0]!), median: r(med), max: r(s[s.length - 1]!) };
}

async function main(): Promise<void> {
  const [port, barePort] = [await freePort(), await freePort()];
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lamer-bench-'));
  const servers: Started[] = [];
  try {
    const ours = await startProcess(
      'server',
      'src/cli/serve.ts',
      { LAMER_ENGINE: 'test', LAMER_PORT: String(port), LAMER_HOST: '127.0.0.1', LAMER_DATA_DIR: dataDir, LAMER_LOG_LEVEL: 'error', LAMER_API_KEYS: '' },
      port,
      { nodeArgs: (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean) },
    );
    servers.push(ours);
    await ours.ready();
    const bare = await startProcess('bare reference', 'bench/bare-reference.ts', { BARE_PORT: String(barePort), BARE_DB: path.join(dataDir, 'bare.db') }, barePort);
    servers.push(bare);
    await bare.ready();
    let baseline: Started | null = null;
    if (BASELINE_ROOT) {
      const baselinePort = await freePort();
      const env = { LAMER_ENGINE: 'test', LAMER_PORT: String(baselinePort), LAMER_HOST: '127.0.0.1', LAMER_DATA_DIR: path.join(dataDir, 'baseline'), LAMER_LOG_LEVEL: 'error', LAMER_API_KEYS: '' };
      baseline = await startProcess('baseline server', 'src/cli/serve.ts', env, baselinePort, { cwd: BASELINE_ROOT });
      servers.push(baseline);
      await baseline.ready();
    }

    const measure = (s: Started, c: number) => (CLIENT === 'autocannon' ? runLevelAutocannon(s.port, c, s.pid) : runLevel(s.port, c, s.pid));
    type Which = 'bare' | 'ours' | 'baseline';
    const levels: Array<{ concurrency: number; ours: LevelResult[]; bare: LevelResult[]; baseline: LevelResult[]; ratios: number[]; cpuVsBaseline: number[] }> = [];
    const serverOf = { bare, ours, baseline };
    for (const c of LEVELS) {
      const level = { concurrency: c, ours: [] as LevelResult[], bare: [] as LevelResult[], baseline: [] as LevelResult[], ratios: [] as number[], cpuVsBaseline: [] as number[] };
      // Alternated, the order flipped (with a baseline: rotated) each round, so a drift in the
      // machine's load hits all alike.
      for (let r = 0; r < ROUNDS; r++) {
        let order: Which[] = r % 2 === 0 ? ['bare', 'ours'] : ['ours', 'bare'];
        if (baseline) order = (['bare', 'ours', 'baseline'] as Which[]).map((_, i, all) => all[(i + r) % 3]!);
        for (const which of order) level[which].push(await measure(serverOf[which]!, c));
        level.ratios.push(level.ours[r]!.stepsPerSecond / level.bare[r]!.stepsPerSecond);
        if (baseline) level.cpuVsBaseline.push((level.ours[r]!.serverCpuUsPerStep ?? NaN) / (level.baseline[r]!.serverCpuUsPerStep ?? NaN));
      }
      levels.push(level);
    }
    const length = LENGTH > 10 ? await lengthProfile(port, LENGTH_SESSIONS, LENGTH) : null;
    // The test engine has no context window: its chat prompt, and the prompt and token ids each step
    // records, grow with the attempt. A model's context bounds them (the builtin engine drops the
    // oldest steps); a second server whose version declares a compact prompt of the last 7 steps
    // shows the step path with records of bounded size.
    let bounded: LengthProfile | null = null;
    if (LENGTH > 10) {
      const modelDir = path.join(dataDir, 'bounded-model');
      ensureDirSync(modelDir);
      const lamer = {
        config: { vocab_size: BYTE_TOKENIZER.vocabSize, block_size: 16, n_layer: 1, n_head: 1, n_embd: 8 },
        tokenizer: BYTE_TOKENIZER.spec,
        promptFormat: { name: 'compact', envTags: ['bench'], historySteps: 7 },
      };
      fs.writeFileSync(path.join(modelDir, 'model.json'), JSON.stringify({ format: 'lamer-gpt', userDefinedMetadata: { lamer } }));
      // In this process: the test engine's version has no folder of its own, so it is given this one.
      const { startServer } = await import('../src/server.js');
      const b = await startServer({ host: '127.0.0.1', port: 0, engine: 'test', logLevel: 'silent', apiKeys: [], dataDir: path.join(dataDir, 'bounded') });
      try {
        await b.app.repos.models.setCheckpointDir(b.app.models.active().version, modelDir);
        b.app.models.invalidate();
        bounded = await lengthProfile(Number(new URL(b.url).port), LENGTH_SESSIONS, LENGTH, '[bench]');
      } finally {
        await b.close();
      }
    }

    const med = (rs: LevelResult[], f: (r: LevelResult) => number | null) => spread(rs.map((r) => f(r) ?? NaN)).median;
    console.log(`\nsteps/s, ours (test engine) against the bare reference, ${ROUNDS} alternated rounds of ${SECONDS} s per level (client ${CLIENT})\n`);
    console.log('| concurrency | ours steps/s (median) | bare steps/s (median) | ours / bare min | median | max | ours p50 / p99 ms | ours CPU µs/step | bare CPU µs/step | errors |');
    console.log('|---|---|---|---|---|---|---|---|---|---|');
    for (const l of levels) {
      const q = spread(l.ratios);
      const errors = [...l.ours, ...l.bare, ...l.baseline].reduce((n, r) => n + r.errors, 0);
      console.log(
        `| ${l.concurrency} | ${med(l.ours, (r) => r.stepsPerSecond)} | ${med(l.bare, (r) => r.stepsPerSecond)} | ${q.min} | ${q.median} | ${q.max} | ${med(l.ours, (r) => r.p50Ms)} / ${med(l.ours, (r) => r.p99Ms)} | ${med(l.ours, (r) => r.serverCpuUsPerStep)} | ${med(l.bare, (r) => r.serverCpuUsPerStep)} | ${errors} |`,
      );
    }
    if (baseline) {
      console.log(`\nours against the baseline server (${BASELINE_ROOT}), same rounds\n`);
      console.log('| concurrency | ours steps/s (median) | baseline steps/s (median) | ours CPU µs/step | baseline CPU µs/step | ours / baseline CPU min | median | max |');
      console.log('|---|---|---|---|---|---|---|---|');
      for (const l of levels) {
        const q = spread(l.cpuVsBaseline);
        console.log(
          `| ${l.concurrency} | ${med(l.ours, (r) => r.stepsPerSecond)} | ${med(l.baseline, (r) => r.stepsPerSecond)} | ${med(l.ours, (r) => r.serverCpuUsPerStep)} | ${med(l.baseline, (r) => r.serverCpuUsPerStep)} | ${q.min} | ${q.median} | ${q.max} |`,
        );
      }
    }
    if (length) {
      console.log(`\nstep latency as the attempt grows (ours, c=1, ${length.sessions} sessions of ${length.stepsPerAttempt} steps, node:http): steps 1-10 ${length.firstTenMs} ms, last 10 ${length.lastTenMs} ms, last / first ${length.lastOverFirst} (chat prompt of every step so far)`);
    }
    if (bounded) {
      console.log(`  with a prompt of the last 7 steps (compact format): steps 1-10 ${bounded.firstTenMs} ms, last 10 ${bounded.lastTenMs} ms, last / first ${bounded.lastOverFirst}`);
    }
    console.log(`load average at the end: ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} (${os.cpus().length} CPUs)`);
    const out = {
      date: new Date().toISOString(),
      node: process.version,
      cpus: os.cpus().length,
      loadAverage: os.loadavg(),
      engine: 'test',
      client: CLIENT,
      secondsPerRun: SECONDS,
      rounds: ROUNDS,
      stepsPerAttempt: STEPS + 1,
      reference: 'bench/bare-reference.ts: Fastify 5, ajv body validation, one better-sqlite3 INSERT a request (WAL, synchronous=NORMAL)',
      baselineRoot: BASELINE_ROOT,
      levels: levels.map((l) => ({
        concurrency: l.concurrency,
        oursOverBare: spread(l.ratios),
        ours: l.ours,
        bare: l.bare,
        ...(baseline ? { baseline: l.baseline, oursOverBaselineCpu: spread(l.cpuVsBaseline) } : {}),
      })),
      lengthProfile: length,
      lengthProfileBoundedPrompt: bounded,
    };
    ensureDirSync(path.join(root, 'bench', 'results'));
    fs.writeFileSync(path.join(root, 'bench', 'results', 'http.json'), JSON.stringify(out, null, 2) + '\n');
    console.log('wrote bench/results/http.json');
  } finally {
    for (const s of servers.reverse()) await s.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof ServerNotReady ? `bench:http: ${err.message}` : err);
  process.exitCode = 1;
});
