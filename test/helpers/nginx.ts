/**
 * nginx as the gateway of tests and benchmarks: the deployed configuration, docker/nginx.conf,
 * run on loopback in front of replicas listening on 127.0.0.1, as a non-daemon child process with
 * everything it writes (configuration, logs, pid, temporary files) in a temporary folder.
 *
 * Only addresses, paths and the worker count are changed from the file ({@link renderGatewayConfig}):
 * the upstream's `server` lines become one line per given port with the first line's parameters
 * (max_fails, fail_timeout), `listen 8080` becomes `listen 127.0.0.1:<port>`, the error log, access
 * log and pid go to the folder, the temporary paths are set there (so that nginx runs as any user),
 * and `worker_processes` is 1. Every failover, timeout, keepalive and body-size setting is the
 * file's own, so the tests check what is deployed.
 *
 * The binary is LAMER_NGINX when set, else `nginx` in /usr/sbin, /usr/local/sbin or PATH (Debian's
 * `nginx-light`; `.ci/run` installs it when missing). Where none can run, {@link nginxUnavailable}
 * gives one line saying why, for `describe.skipIf`.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

/** The gateway configuration that docker/compose.yaml mounts. */
export const GATEWAY_CONFIG = path.join(ROOT, 'docker', 'nginx.conf');

/** One access-log line of the gateway (the `lamer` JSON log format of docker/nginx.conf). */
export interface AccessEntry {
  time: string;
  requestId: string;
  remote: string;
  method: string;
  uri: string;
  status: number;
  /** Every replica tried, in order, comma-separated (`127.0.0.1:4001, 127.0.0.1:4002`); '' when none. */
  upstream: string;
  /** The status of each try, in the same order (`502, 200`); '' when none. */
  upstreamStatus: string;
  seconds: number;
  upstreamSeconds: string;
}

export interface NginxGateway {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  port: number;
  /** pid of the nginx master process. */
  pid: number;
  /** The folder holding the configuration, logs and temporary files (removed by `stop()`). */
  dir: string;
  /** The access log so far, one entry a request answered. */
  accessLog(): AccessEntry[];
  /**
   * The access log once it holds at least `n` entries: nginx writes a request's entry when it
   * finalises the request, which can be after the client has read the answer.
   * @throws Error when fewer than `n` entries are written within 10 s (a request nginx never logged).
   */
  accessLogAtLeast(n: number): Promise<AccessEntry[]>;
  /** The error log so far. */
  errorLog(): string;
  /** Fast shutdown (SIGTERM, then SIGKILL after 5 s), then the folder is removed. Idempotent. */
  stop(): Promise<void>;
}

/** The nginx binary to run, or null: LAMER_NGINX when set (and only it), else the usual places. */
export function nginxBinary(): string | null {
  const env = process.env.LAMER_NGINX;
  if (env) return fs.existsSync(env) ? env : null;
  const dirs = ['/usr/sbin', '/usr/local/sbin', ...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean)];
  for (const d of dirs) {
    const p = path.join(d, 'nginx');
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      /* not here */
    }
  }
  return null;
}

/** Why no nginx can run here (one line), or null when `nginx -v` runs. */
export function nginxUnavailable(): string | null {
  const bin = nginxBinary();
  if (!bin) {
    const where = process.env.LAMER_NGINX ? `LAMER_NGINX=${process.env.LAMER_NGINX}` : '/usr/sbin, /usr/local/sbin or PATH; apt-get install nginx-light, or set LAMER_NGINX';
    return `nginx is not installed (no nginx binary in ${where})`;
  }
  try {
    execFileSync(bin, ['-v'], { stdio: 'pipe', timeout: 10_000 });
    return null;
  } catch (err) {
    return `nginx cannot run (${bin} -v: ${firstLine(err)})`;
  }
}

/** Where and how the rendered configuration runs. */
export interface RenderOptions {
  /** Replica addresses, `host:port`, in order. At least one. */
  upstreams: string[];
  /** Address the gateway listens on, `127.0.0.1:<port>`. */
  listen: string;
  /** Folder for logs, pid and temporary files (absolute path without spaces). */
  dir: string;
  /** nginx worker processes (default 1). */
  workers?: number;
}

/** Replace the one match of `re` in `text` by `to`. @throws Error naming `what` when it matches zero or several times. */
function replaceOne(text: string, re: RegExp, to: string | ((m: string, ...g: string[]) => string), what: string): string {
  const all = text.match(new RegExp(re.source, re.flags.includes('g') ? re.flags : `${re.flags}g`)) ?? [];
  if (all.length !== 1) throw new Error(`gateway configuration: expected one ${what}, found ${all.length}`);
  return text.replace(re, to as string);
}

/**
 * The gateway configuration `text` (docker/nginx.conf) made to run on loopback with `o`'s
 * addresses and paths; every other line is kept as it is.
 * @throws Error when `text` lacks one of the lines replaced (or holds it twice), or when
 *   `o.upstreams` is empty or `o.dir` holds whitespace.
 */
export function renderGatewayConfig(text: string, o: RenderOptions): string {
  if (o.upstreams.length === 0) throw new Error('gateway configuration: at least one upstream is needed');
  if (/\s/.test(o.dir)) throw new Error(`gateway configuration: the folder ${JSON.stringify(o.dir)} holds whitespace`);
  let out = replaceOne(text, /^worker_processes\s+[^;]+;/m, `worker_processes ${o.workers ?? 1};`, 'worker_processes line');
  out = replaceOne(out, /^error_log\s+\S+/m, `error_log ${o.dir}/error.log`, 'error_log line');
  out = replaceOne(out, /^pid\s+[^;]+;/m, `pid ${o.dir}/nginx.pid;`, 'pid line');
  out = replaceOne(out, /^(\s*access_log\s+)\S+(\s+lamer;)/m, (_m, a: string, b: string) => `${a}${o.dir}/access.log${b}`, 'access_log line');
  out = replaceOne(out, /^(\s*)listen\s+8080;/m, (_m, indent: string) => `${indent}listen ${o.listen};`, 'listen 8080 line');
  out = replaceOne(
    out,
    /(upstream\s+lamer\s*\{)([\s\S]*?)(\n\s*\})/,
    (_m, head: string, body: string, tail: string) => head + replaceServers(body, o.upstreams) + tail,
    'upstream lamer block',
  );
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((k) => `    ${k}_temp_path ${o.dir}/${k};`).join('\n');
  return replaceOne(out, /^http\s*\{\n/m, (m) => `${m}${temp}\n`, 'http block');
}

/** The upstream block's body with its `server` lines replaced by one line per address, with the first line's parameters. */
function replaceServers(body: string, upstreams: string[]): string {
  const server = /^(\s*)server\s+\S+((?:\s+[^;\s]+)*)\s*;/;
  const lines = body.split('\n');
  const first = lines.findIndex((l) => server.test(l));
  if (first < 0) throw new Error('gateway configuration: the upstream lamer block has no server line');
  const [, indent, params] = server.exec(lines[first]!)!;
  const servers = upstreams.map((u) => `${indent}server ${u}${params};`);
  return [...lines.slice(0, first), ...servers, ...lines.slice(first + 1).filter((l) => !server.test(l))].join('\n');
}

/** A TCP port free on 127.0.0.1 right now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

function firstLine(err: unknown): string {
  const e = err as { stderr?: Buffer | string; message?: string };
  const text = (e?.stderr && String(e.stderr).trim()) || e?.message || String(err);
  return text.split('\n').find((l) => l.trim() !== '')?.trim() ?? 'unknown error';
}

/**
 * Start nginx with docker/nginx.conf (or `opts.config`) in front of the replicas listening on
 * 127.0.0.1 at `opts.upstreams` (ports), on a free loopback port. Resolves once it accepts
 * connections.
 * @returns the gateway, or `{ skip }` with one line saying why nginx cannot run here.
 * @throws Error when `nginx -t` refuses the rendered configuration (its output in the message), or
 *   when nginx exits at start for another reason than a port taken meanwhile.
 */
export async function startNginx(opts: { upstreams: number[]; config?: string; workers?: number }): Promise<NginxGateway | { skip: string }> {
  const why = nginxUnavailable();
  if (why) return { skip: why };
  const bin = nginxBinary()!;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lamer-nginx-'));
  // nginx's workers run as an unprivileged user when it starts as root: they need to reach the temporary paths
  fs.chmodSync(dir, 0o755);
  const text = fs.readFileSync(opts.config ?? GATEWAY_CONFIG, 'utf8');
  const conf = path.join(dir, 'nginx.conf');
  const args = ['-p', dir, '-e', path.join(dir, 'error.log'), '-c', conf];
  let lastError = '';
  try {
    // A free port can be taken between the probe and the start: try a few.
    for (let tries = 0; tries < 3; tries++) {
      const port = await freePort();
      fs.writeFileSync(
        conf,
        renderGatewayConfig(text, { upstreams: opts.upstreams.map((p) => `127.0.0.1:${p}`), listen: `127.0.0.1:${port}`, dir, workers: opts.workers }),
      );
      try {
        execFileSync(bin, [...args, '-t', '-q'], { stdio: 'pipe', timeout: 30_000 });
      } catch (err) {
        throw new Error(`nginx -t refused the gateway configuration: ${String((err as { stderr?: Buffer }).stderr ?? err).trim()}`);
      }
      const child = spawn(bin, [...args, '-g', 'daemon off;'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      let gone = false;
      void exited.then(() => (gone = true));
      const deadline = Date.now() + 30_000;
      while (!gone && !(await accepts(port)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      if (!gone && (await accepts(port))) return gateway(child, exited, port, dir);
      if (!gone) child.kill('SIGKILL');
      await exited;
      const log = fs.existsSync(path.join(dir, 'error.log')) ? fs.readFileSync(path.join(dir, 'error.log'), 'utf8') : '';
      lastError = `${log}${out}`.trim().split('\n').pop() ?? 'no output';
      if (!/Address already in use/.test(log + out)) throw new Error(`nginx did not start: ${lastError}`);
    }
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  fs.rmSync(dir, { recursive: true, force: true });
  return { skip: `nginx could not listen on a free loopback port (${lastError})` };
}

function gateway(child: ChildProcess, exited: Promise<number | null>, port: number, dir: string): NginxGateway {
  let stopped: Promise<void> | null = null;
  const read = (f: string) => (fs.existsSync(path.join(dir, f)) ? fs.readFileSync(path.join(dir, f), 'utf8') : '');
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    pid: child.pid!,
    dir,
    accessLog: () =>
      read('access.log')
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as AccessEntry),
    async accessLogAtLeast(n) {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const log = this.accessLog();
        if (log.length >= n) return log;
        if (Date.now() > deadline) throw new Error(`nginx logged ${log.length} requests, expected at least ${n}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    errorLog: () => read('error.log'),
    stop() {
      stopped ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGTERM');
          const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
          await exited;
          clearTimeout(timer);
        }
        fs.rmSync(dir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}

/**
 * For a test file: {@link startNginx}, stopped after the file's tests. Where nginx cannot run,
 * prints one line saying why and returns null (pair it with `describe.skipIf(nginxUnavailable())`).
 */
export async function nginxForTests(opts: { upstreams: number[]; config?: string }): Promise<NginxGateway | null> {
  const started = await startNginx(opts);
  if ('skip' in started) {
    console.warn(`nginx tests skipped: ${started.skip}`);
    return null;
  }
  afterAll(() => started.stop());
  return started;
}
