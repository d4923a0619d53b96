/**
 * `npm run bench:http`: throughput (steps/s) and latency (p50/p99, ms) of the HTTP step path with
 * the constant-time TestEngine, i.e. the server's own overhead (Fastify, validation, SQLite commit,
 * prompt rendering), at concurrency 1, 16 and 64.
 *
 * The server runs as a separate process (`tsx src/cli/serve.ts`, engine test, a fresh SQLite data
 * directory). Each virtual client drives its own sessions through real step sequences: create a
 * session (3 attempts, maxSteps 8); in each attempt post steps 0..7 with 4 available actions (each
 * answered with an action) and step 8 with done: attempts 0 and 1 fail (a reflection is written),
 * attempt 2 succeeds; then start a new session. Keep-alive HTTP/1.1, one connection a client.
 *
 * Clients: `autocannon` (default; low client CPU, which matters when client and server share 2
 * cores; latencies in whole ms and including the 1-in-28 session creations) or `http`
 * (BENCH_CLIENT=http: node:http, only step posts timed, sub-ms resolution).
 *
 * Options (env): BENCH_SECONDS (default 8 per level), BENCH_WARMUP_SECONDS (1),
 * BENCH_CONCURRENCY (comma list, default 1,16,64), BENCH_NODE_ARGS (extra node flags for the
 * server, e.g. --cpu-prof). Writes bench/results/http.json. The server's output is passed through;
 * if it exits before it is ready (or is not ready within 60 s) the bench stops at once, exit 1,
 * with the server's exit status and the last lines of its output.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureDirSync } from '../src/ensure-dir.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);
const LEVELS = (process.env.BENCH_CONCURRENCY ?? '1,16,64').split(',').map(Number);
const STEPS = 8;
const CLIENT = process.env.BENCH_CLIENT === 'http' ? 'http' : 'autocannon';
const ACTIONS = ['up', 'down', 'left', 'right'];

/**
 * Body of step `t` (0..STEPS) of attempt `a` (0..2) in both clients' workload: a Sokoban-like board;
 * reward 0 at step 0, then -0.1 a step, except +10 at the last step of the third attempt, which
 * succeeds.
 */
function stepBody(a: number, t: number) {
  const last = t === STEPS;
  return {
    attempt: a,
    step: t,
    observation: `0: # # # # # #\n1: # _ P _ _ #\n2: # _ X _ O #\n3: # _ _ _ _ #\n4: # # # # # #\nstep ${t}`,
    reward: t === 0 ? 0 : last && a === 2 ? 10 : -0.1,
    done: last,
    success: last && a === 2,
    availableActions: ACTIONS,
  };
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      srv.close(() => (typeof a === 'object' && a ? resolve(a.port) : reject(new Error('no port'))));
    });
  });
}

function request(agent: http.Agent, port: number, method: string, p: string, body?: unknown): Promise<{ status: number; json: any }> {
  const data = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, method, path: p, agent, headers: data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {} },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, json: text ? JSON.parse(text) : null });
        });
      },
    );
    req.on('error', reject);
    if (data) req.write(data);
    req.end();
  });
}

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

/** CPU seconds (user + system) used so far by process `pid`, from /proc; null when unavailable. */
function cpuSeconds(pid: number | undefined): number | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return ticks / 100;
  } catch {
    return null;
  }
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
 * The same workload driven by autocannon (lower client CPU than node:http): each connection cycles
 * through [create session, 27 steps (3 attempts x 9 steps)] with its state in autocannon's
 * per-connection `context`. Latency percentiles include the 1-in-28 session creations.
 */
async function runLevelAutocannon(port: number, concurrency: number, serverPid: number | undefined): Promise<LevelResult> {
  const specifier = 'autocannon'; // untyped package: imported by name to skip type resolution
  const { default: autocannon } = (await import(specifier)) as {
    default: (opts: Record<string, unknown>) => Promise<Record<string, any>>;
  };
  const stepRequests = [];
  for (let a = 0; a < 3; a++) {
    for (let t = 0; t <= STEPS; t++) {
      const body = JSON.stringify(stepBody(a, t));
      stepRequests.push({
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        setupRequest: (req: Record<string, unknown>, ctx: Record<string, unknown>) => ({ ...req, path: `/v1/sessions/${String(ctx.id)}/steps` }),
      });
    }
  }
  let n = 0;
  const requests = [
    {
      method: 'POST',
      path: '/v1/sessions',
      headers: { 'content-type': 'application/json' },
      setupRequest: (req: Record<string, unknown>) => ({
        ...req,
        body: JSON.stringify({ taskId: `bench-${n++}`, instructions: 'Push the box onto the target. Answer with one move.', maxAttempts: 3, maxSteps: STEPS, env: 'bench' }),
      }),
      onResponse: (_status: number, body: string, ctx: Record<string, unknown>) => {
        ctx.id = (JSON.parse(body) as { id: string }).id;
      },
    },
    ...stepRequests,
  ];
  const run = (duration: number) => autocannon({ url: `http://127.0.0.1:${port}`, connections: concurrency, duration, requests });
  await run(WARMUP);
  const cpu0 = cpuSeconds(serverPid);
  const r = await run(SECONDS);
  const cpu1 = cpuSeconds(serverPid);
  const total = r.requests.total as number;
  const steps = Math.round((total * 27) / 28);
  return {
    concurrency,
    seconds: SECONDS,
    steps,
    stepsPerSecond: Math.round(steps / SECONDS),
    p50Ms: r.latency.p50 as number,
    p99Ms: r.latency.p99 as number,
    maxMs: r.latency.max as number,
    errors: (r.errors as number) + (r.non2xx as number),
    serverCpuUsPerStep: cpu0 !== null && cpu1 !== null && total > 0 ? Math.round(((cpu1 - cpu0) / total) * 1e6) : null,
  };
}

/** The bench cannot go on: the server it started exited or never got ready (message: why, and the server's last output). */
class ServerNotReady extends Error {}

async function main(): Promise<void> {
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lamer-bench-'));
  const child = spawn(process.execPath, [...(process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean), '--import', 'tsx', 'src/cli/serve.ts'], {
    cwd: root,
    env: { ...process.env, LAMER_ENGINE: 'test', LAMER_PORT: String(port), LAMER_HOST: '127.0.0.1', LAMER_DATA_DIR: dataDir, LAMER_LOG_LEVEL: 'error', LAMER_API_KEYS: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // The server's output goes on to ours; its last 8 KB are kept to show if it stops.
  let tail = '';
  const pass = (to: NodeJS.WriteStream) => (d: Buffer) => {
    to.write(d);
    tail = (tail + d.toString('utf8')).slice(-8192);
  };
  child.stdout!.on('data', pass(process.stdout));
  child.stderr!.on('data', pass(process.stderr));
  let exitedWith: string | null = null;
  const exited = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      exitedWith = signal ? `signal ${signal}` : `status ${code}`;
      resolve();
    }),
  );
  const lastLines = () => tail.trimEnd().split('\n').slice(-20).join('\n') || '(no output)';
  try {
    const agent = new http.Agent({ keepAlive: true });
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (exitedWith) throw new ServerNotReady(`the server exited (${exitedWith}) before it was ready; its last output:\n${lastLines()}`);
      try {
        if ((await request(agent, port, 'GET', '/readyz')).status === 200) break;
      } catch {
        /* not up yet */
      }
      if (Date.now() > deadline) throw new ServerNotReady(`the server was not ready within 60 s; its last output:\n${lastLines()}`);
      // wake at once when the server exits
      await Promise.race([new Promise((r) => setTimeout(r, 200)), exited]);
    }
    agent.destroy();
    const results: LevelResult[] = [];
    for (const c of LEVELS) {
      results.push(CLIENT === 'autocannon' ? await runLevelAutocannon(port, c, child.pid) : await runLevel(port, c, child.pid));
    }
    console.log('| concurrency | steps/s | p50 ms | p99 ms | max ms | steps | errors | server CPU µs/step |');
    console.log('|---|---|---|---|---|---|---|---|');
    for (const r of results) {
      console.log(
        `| ${r.concurrency} | ${r.stepsPerSecond} | ${r.p50Ms} | ${r.p99Ms} | ${r.maxMs} | ${r.steps} | ${r.errors} | ${r.serverCpuUsPerStep ?? 'n/a'} |`,
      );
    }
    console.log(`load average during the run: ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} (${os.cpus().length} CPUs)`);
    const out = {
      date: new Date().toISOString(),
      node: process.version,
      cpus: os.cpus().length,
      loadAverage: os.loadavg(),
      engine: 'test',
      client: CLIENT,
      secondsPerLevel: SECONDS,
      stepsPerAttempt: STEPS + 1,
      results,
    };
    ensureDirSync(path.join(root, 'bench', 'results'));
    fs.writeFileSync(path.join(root, 'bench', 'results', 'http.json'), JSON.stringify(out, null, 2) + '\n');
    console.log('wrote bench/results/http.json');
  } finally {
    if (!exitedWith) child.kill('SIGTERM');
    await exited;
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof ServerNotReady ? `bench:http: ${err.message}` : err);
  process.exitCode = 1;
});
