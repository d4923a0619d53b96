/**
 * Plain HTTP helpers shared by the benches that start a server process and drive it
 * (bench/http.ts, bench/builtin-http.ts, bench/healthz-burst.ts, bench/stats.ts, bench/scale-out.ts):
 * a free port, one request, figures read from a server's /metrics, a server process (or `lamer serve`
 * of some checkout) started and waited for, and a process's CPU time.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');

/** A TCP port free on 127.0.0.1 at the moment of asking. @throws Error when none is given. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      srv.close(() => (typeof a === 'object' && a ? resolve(a.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * One request to 127.0.0.1:`port` through `agent`, `body` sent as JSON: the answer's status and
 * parsed JSON body (null when empty). @throws Error on a connection error or a body that is not JSON.
 */
export function request(agent: http.Agent, port: number, method: string, p: string, body?: unknown): Promise<{ status: number; json: any }> {
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

/**
 * The /metrics text (Prometheus exposition) of the server on 127.0.0.1:`port`, on a fresh connection.
 * @throws Error on a connection error.
 */
export function metricsText(port: number): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/metrics', agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(body));
    }).on('error', reject);
  });
}

/** The value of metric `name` (its first series) in a /metrics text; NaN when absent. */
export const readMetric = (text: string, name: string): number =>
  Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);

/**
 * The engine's forward passes, the rows in them and the seconds spent in them so far (counters: subtract two
 * readings), from the server's /metrics (`lamer_engine_batch_rows`, `lamer_engine_forward_seconds`); NaN where absent.
 */
export async function forwardCounters(port: number): Promise<{ forwards: number; rows: number; forwardSeconds: number }> {
  const text = await metricsText(port);
  const read = (name: string) => readMetric(text, name);
  return {
    forwards: read('lamer_engine_batch_rows_count'),
    rows: read('lamer_engine_batch_rows_sum'),
    forwardSeconds: read('lamer_engine_forward_seconds_sum'),
  };
}

/** Clock ticks (user + system, 100 a second) used so far by process `pid`, from /proc (Linux); null when unavailable. */
function cpuTicks(pid: number | undefined): number | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // fields 3.. of proc(5)
    return Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14, 15)
  } catch {
    return null;
  }
}

/** CPU seconds (user + system) used so far by process `pid`, from /proc; null when unavailable. */
export function cpuSeconds(pid: number | undefined): number | null {
  const ticks = cpuTicks(pid);
  return ticks === null ? null : ticks / 100;
}

/** CPU milliseconds (user + system) used so far by process `pid`, in steps of 10 ms, from /proc; null when unavailable. */
export function cpuMs(pid: number | undefined): number | null {
  const ticks = cpuTicks(pid);
  return ticks === null ? null : ticks * 10;
}

/** The bench cannot go on: a server it started exited or never got ready (message: why, and the server's last output). */
export class ServerNotReady extends Error {}

/** A server process the bench started: its port, pid, and how to wait for it and stop it. */
export interface Started {
  name: string;
  port: number;
  pid: number | undefined;
  /**
   * Resolves once `GET /readyz` answers 200. @throws ServerNotReady when it exits first or is not ready within
   * the start's `readyTimeoutS` (by default BENCH_READY_TIMEOUT_S, 60 s; a loaded machine compiles and starts
   * the server slowly).
   */
  ready(): Promise<void>;
  /** SIGTERM (unless it has exited) and wait for the exit. */
  stop(): Promise<void>;
}

/** How `startProcess` runs its script and waits for it. */
export interface StartOptions {
  /** Node flags put before `--import tsx` (e.g. --cpu-prof); none by default. */
  nodeArgs?: string[];
  /** The process's working directory, against which a relative script resolves: the repository root by default. */
  cwd?: string;
  /** Longest wait in `ready()`, s (Infinity: no deadline); by default BENCH_READY_TIMEOUT_S, else 60. */
  readyTimeoutS?: number;
  /** Pause between two `/readyz` polls, ms (default 200); shorter where the time to ready is measured. */
  pollMs?: number;
}

/** Longest wait for a started server's readiness when the start names none, s (BENCH_READY_TIMEOUT_S). */
const READY_TIMEOUT_S = Number(process.env.BENCH_READY_TIMEOUT_S ?? 60);

/**
 * Spawn `node [nodeArgs] --import tsx <script>` in `options.cwd` (the repository root unless given) with
 * `env` added, its output passed through to ours (the last 8 KB kept for the message when it stops early).
 */
export async function startProcess(
  name: string,
  script: string,
  env: Record<string, string>,
  port: number,
  options: StartOptions = {},
): Promise<Started> {
  const { nodeArgs = [], cwd = root, readyTimeoutS = READY_TIMEOUT_S, pollMs = 200 } = options;
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script], {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
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
  return {
    name,
    port,
    pid: child.pid,
    async ready() {
      const agent = new http.Agent({ keepAlive: true });
      const deadline = Date.now() + readyTimeoutS * 1000;
      try {
        for (;;) {
          if (exitedWith) throw new ServerNotReady(`the ${name} exited (${exitedWith}) before it was ready; its last output:\n${lastLines()}`);
          try {
            if ((await request(agent, port, 'GET', '/readyz')).status === 200) return;
          } catch {
            /* not up yet */
          }
          if (Date.now() > deadline) {
            throw new ServerNotReady(`the ${name} was not ready within ${readyTimeoutS} s; its last output:\n${lastLines()}`);
          }
          // wake at once when the server exits
          await Promise.race([new Promise((r) => setTimeout(r, pollMs)), exited]);
        }
      } finally {
        agent.destroy();
      }
    },
    async stop() {
      if (!exitedWith) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** How `startServe` runs `lamer serve`. */
export interface ServeOptions extends Omit<StartOptions, 'cwd'> {
  /** The checkout whose `src/cli/serve.ts` runs, in it (e.g. a BENCH_BASELINE_ROOT one): this repository by default. */
  root?: string;
  /** LAMER_ENGINE. */
  engine: 'builtin' | 'test';
  /** LAMER_DATA_DIR, left in place; by default a fresh directory `<os.tmpdir()>/<tmpPrefix>XXXXXX`, removed by `stop()`. */
  dataDir?: string;
  /** The fresh data directory's name prefix (default `lamer-bench-`). */
  tmpPrefix?: string;
  /** More LAMER_* variables for the server (e.g. LAMER_HEALTH_PORT); the ones set here win over them. */
  env?: Record<string, string>;
}

/**
 * Start `lamer serve` (`tsx src/cli/serve.ts` of `options.root`) on a free port of 127.0.0.1, log level
 * error, no API keys (tenant `default`), and wait until `GET /readyz` answers 200. `stop()` also removes the
 * data directory when this made it. @throws ServerNotReady when it exits first or is not ready within
 * `readyTimeoutS`; the process is stopped and its fresh data directory removed before the throw.
 */
export async function startServe(name: string, options: ServeOptions): Promise<Started> {
  const { root: serverRoot = root, engine, dataDir, tmpPrefix = 'lamer-bench-', env: extraEnv = {}, ...start } = options;
  const port = await freePort();
  const dir = dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), tmpPrefix));
  const env = {
    ...extraEnv,
    LAMER_ENGINE: engine, LAMER_PORT: String(port), LAMER_HOST: '127.0.0.1',
    LAMER_DATA_DIR: dir, LAMER_LOG_LEVEL: 'error', LAMER_API_KEYS: '',
  };
  const s = await startProcess(name, 'src/cli/serve.ts', env, port, { ...start, cwd: serverRoot });
  const stop = async () => {
    await s.stop();
    if (dataDir === undefined) fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    await s.ready();
  } catch (err) {
    await stop();
    throw err;
  }
  return { ...s, stop };
}
