/**
 * A bench-only trace of the server's event loop, loaded into the server process with
 * `BENCH_NODE_ARGS="--import tsx --import <abs path>/bench/loop-trace.ts"` (bench/healthz-burst.ts)
 * and written as JSON lines to `$LOOP_TRACE_DIR/trace-<pid>.jsonl` when the process exits.
 *
 * Every record has `t`, ms of the monotonic clock (`process.hrtime`, the clock of `--cpu-prof`
 * timestamps, in µs there), and one of these kinds:
 * - `cb`: one top-level callback of the loop (async_hooks before/after at depth 0; only with
 *   LOOP_TRACE_HOOKS=1, which also times promise continuations and slows them) that took at least
 *   LOOP_TRACE_MIN_MS (2) ms: its `ms`, resource `type`, and the labels recorded inside it;
 * - `fwd`: a forward section (ForwardBatcher's `forward`): `ms`, `rows`, `tokens` (real new
 *   tokens), `padded` (rows x longest);
 * - `conn`: the server accepted a connection (`port`: the client's port);
 * - `req` / `res`: a request's headers parsed (`url`, `port`) and its answer finished;
 * - `gc`: a garbage collection (`ms`, `kind`);
 * - `create`: SessionService.create's synchronous prefix and its whole duration.
 * The bench records its probes' start (bench/healthz-burst.ts with LOOP_TRACE_DIR set) in the same
 * clock, matched by the client's port.
 */
import { createHook } from 'node:async_hooks';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';

const now = () => Number(process.hrtime.bigint()) / 1e6;
const recs: object[] = [];
const MIN_MS = Number(process.env.LOOP_TRACE_MIN_MS ?? 2);
let labels: string[] | null = null;
/** What ran in the loop iteration now in progress: label -> [count, ms]. */
let turnLabels: Record<string, [number, number]> = {};
const label = (s: string, ms = 0) => {
  labels?.push(s);
  const key = s.replace(/ \d+(\.\d+)?ms$/, '');
  const c = (turnLabels[key] ??= [0, 0]);
  c[0]++;
  c[1] += ms;
};

/**
 * Loop iterations: a callback re-armed with `setImmediate` runs once per iteration (check phase),
 * so the time between two runs is one iteration; while the loop is idle (an iteration under 1 ms)
 * it re-arms with a 1 ms timer instead, so that the trace does not spin. An iteration of at least
 * MIN_MS is recorded as `turn` with its wall `ms`, the process's CPU `cpuMs` (all threads) and
 * what ran in it (`what`: label -> [count, ms]).
 */
let lastTurn = now();
let lastCpu = process.cpuUsage();
function turn(): void {
  const t = now();
  const cpu = process.cpuUsage();
  const ms = t - lastTurn;
  if (ms >= MIN_MS) {
    const cpuMs = (cpu.user + cpu.system - lastCpu.user - lastCpu.system) / 1000;
    recs.push({ k: 'turn', t: lastTurn, ms, cpuMs, what: turnLabels });
  }
  turnLabels = {};
  lastTurn = t;
  lastCpu = cpu;
  if (ms < 1) setTimeout(turn, 1).unref();
  else setImmediate(turn).unref();
}
setImmediate(turn).unref();

if (process.env.LOOP_TRACE_HOOKS === '1') {
  const types = new Map<number, string>();
  let depth = 0;
  let t0 = 0;
  let type = '';
  createHook({
    init(id, t) {
      types.set(id, t);
    },
    before(id) {
      if (depth++ === 0) {
        t0 = now();
        type = types.get(id) ?? '?';
        labels = [];
      }
    },
    after() {
      if (--depth === 0) {
        const ms = now() - t0;
        if (ms >= MIN_MS) recs.push({ k: 'cb', t: t0, ms, type, labels });
        labels = null;
      }
    },
    destroy(id) {
      types.delete(id);
    },
  }).enable();
}

new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    recs.push({ k: 'gc', t: now() - (performance.now() - e.startTime), ms: e.duration, kind: ((e as PerformanceEntry & { detail?: { kind?: number } }).detail)?.kind });
  }
}).observe({ entryTypes: ['gc'] });

const emit = http.Server.prototype.emit;
http.Server.prototype.emit = function (this: http.Server, ev: string, ...args: unknown[]) {
  if (ev === 'connection') {
    const s = args[0] as import('node:net').Socket;
    recs.push({ k: 'conn', t: now(), port: s.remotePort });
    label('conn');
  } else if (ev === 'request') {
    const req = args[0] as http.IncomingMessage;
    const res = args[1] as http.ServerResponse;
    const port = req.socket.remotePort;
    const url = req.url;
    recs.push({ k: 'req', t: now(), url, port });
    label(`req ${req.method} ${url?.replace(/ses_[0-9a-z]+/, ':id')}`);
    res.once('finish', () => recs.push({ k: 'res', t: now(), url, port, status: res.statusCode }));
  }
  return (emit as (this: http.Server, ev: string, ...a: unknown[]) => boolean).call(this, ev, ...args);
} as typeof emit;

const root = process.cwd();
const { ForwardBatcher } = (await import(pathToFileURL(path.join(root, 'src/model/batcher.ts')).href)) as typeof import('../src/model/batcher.js');
const proto = ForwardBatcher.prototype as unknown as { forward(rows: { tokens: unknown[] }[]): { ms: number } };
const forward = proto.forward;
proto.forward = function (this: unknown, rows) {
  const t = now();
  const out = forward.call(this, rows);
  const lens = rows.map((r) => r.tokens.length);
  const tokens = lens.reduce((a, b) => a + b, 0);
  recs.push({ k: 'fwd', t, ms: out.ms, rows: rows.length, tokens, padded: rows.length * Math.max(...lens) });
  label(`fwd ${Math.round(out.ms)}ms`, out.ms);
  return out;
};
const { SessionService } = (await import(pathToFileURL(path.join(root, 'src/agent/sessions.ts')).href)) as typeof import('../src/agent/sessions.js');
const sp = SessionService.prototype as unknown as { create(...a: unknown[]): Promise<unknown> };
const create = sp.create;
sp.create = function (this: unknown, ...a: unknown[]) {
  const t = now();
  const p = create.apply(this, a);
  const syncMs = now() - t;
  label(`create sync ${syncMs.toFixed(1)}ms`, syncMs);
  void p.then(
    () => recs.push({ k: 'create', t, syncMs, ms: now() - t }),
    () => recs.push({ k: 'create', t, syncMs, ms: now() - t, failed: true }),
  );
  return p;
};

process.on('exit', () => {
  const dir = process.env.LOOP_TRACE_DIR ?? '.';
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, `trace-${process.pid}.jsonl`), recs.map((r) => JSON.stringify(r)).join('\n') + '\n');
});
