/**
 * The serving pool's worker threads (src/policy/serving-pool.ts), their whole lifecycle:
 * - spawn: N threads started together; `start` waits until each has its backend, or terminates
 *   them all and throws the first start error;
 * - calls: one request, one reply (matched by id); every reply and every `state` message updates
 *   the worker's reported state (loaded versions, health, queued requests), and log lines and
 *   forward passes are passed on;
 * - crashes: a thread that errors or exits fails the calls waiting on it with an `EngineError`,
 *   reports `failed`, and calls `onFatal` once (the server exits so that its supervisor restarts
 *   it), as does a worker whose backend could not be re-initialised (`fatal` message);
 * - recovery: backend faults are recovered inside the worker that had them
 *   (src/policy/builtin/recovery.ts); `health()` sums up the workers' reported health;
 * - dispose: each worker's engine is disposed (5 s at most), then the threads are terminated.
 *
 * Under tsx the worker starts from serving-bootstrap.mjs, which registers tsx's ESM loader in the
 * thread and imports serving-worker.ts (the same trick as src/training/run/worker.ts); compiled (.js),
 * serving-worker.js starts directly.
 */
import { Worker } from 'node:worker_threads';
import { EngineError, type EngineHealth, type EngineObserver } from '../engine.js';
import type { WorkerLoad } from './bookkeeping.js';
import { fromWire, type FromWorker, type ServingWorkerData, type ToWorker, type WorkerOp, type WorkerState } from './protocol.js';

/** Where the pool logs (pino's shape); worker log lines get a `worker` index field. */
export interface PoolLogger {
  info(o: object, msg?: string): void;
  warn(o: object, msg?: string): void;
  error?(o: object, msg?: string): void;
}

interface Pending {
  resolve(v: unknown): void;
  reject(e: Error): void;
}

/** One worker thread: its calls waiting for a reply, its load counters and what it last reported. */
export class WorkerSlot implements WorkerLoad {
  readonly pending = new Map<number, Pending>();
  /** Sessions assigned to this worker. */
  sessions = 0;
  /** Model calls (act, reflect, score, complete) sent and not answered. */
  inFlight = 0;
  /** Why the thread is gone, or null while it runs. */
  dead: string | null = null;
  state: WorkerState = { loaded: [], health: { state: 'ok', recoveries: 0 }, queued: 0 };

  constructor(
    readonly index: number,
    readonly worker: Worker,
  ) {}
}

const EXT_JS = import.meta.url.endsWith('.js');

function spawn(data: ServingWorkerData): Worker {
  if (EXT_JS) return new Worker(new URL('../serving-worker.js', import.meta.url), { workerData: data });
  return new Worker(new URL('../serving-bootstrap.mjs', import.meta.url), { workerData: data, execArgv: [] });
}

/** Passes a worker's log line on to `logger` with the worker's index (`error` falls back to `warn`). */
function logFrom(logger: PoolLogger | undefined, index: number, m: Extract<FromWorker, { type: 'log' }>): void {
  const obj = { ...m.obj, worker: index };
  if (m.level === 'error') (logger?.error ?? logger?.warn)?.call(logger, obj, m.msg);
  else logger?.[m.level](obj, m.msg);
}

export interface WorkerThreadsOptions {
  /** Worker threads to start (>= 1; checked by the caller). */
  workers: number;
  /** `workerData` of every worker. */
  data: ServingWorkerData;
  logger?: PoolLogger;
  /** Called once when a worker's backend could not be re-initialised or a worker thread died. */
  onFatal?: (err: Error) => void;
}

/** The pool's running worker threads; `slots[i]` is worker i, live or dead. */
export class WorkerThreads {
  readonly slots: WorkerSlot[] = [];
  /** Receives the workers' forward passes (`PolicyEngine.setObserver`). */
  observer: EngineObserver | null = null;
  private nextId = 1;
  private stopped = false;
  private fatalCalled = false;

  private constructor(
    /** The first worker's tfjs backend (every worker chooses the same way). */
    readonly backend: string,
    private readonly opts: WorkerThreadsOptions,
  ) {}

  /**
   * Starts `opts.workers` workers and waits until each has its backend.
   * @throws Error (the worker's own error, e.g. a forced backend that does not initialise) when a
   *   worker cannot start; the others are terminated.
   */
  static async start(opts: WorkerThreadsOptions): Promise<WorkerThreads> {
    const workers = Array.from({ length: opts.workers }, () => spawn(opts.data));
    const ready = await Promise.allSettled(workers.map((w, i) => firstReady(w, i, opts.logger)));
    const failed = ready.find((r) => r.status === 'rejected');
    if (failed) {
      await Promise.all(workers.map((w) => w.terminate()));
      throw (failed as PromiseRejectedResult).reason;
    }
    const first = (ready[0] as PromiseFulfilledResult<{ backend: string; state: WorkerState }>).value;
    const threads = new WorkerThreads(first.backend, opts);
    workers.forEach((w, i) => {
      const slot = new WorkerSlot(i, w);
      slot.state = (ready[i] as PromiseFulfilledResult<{ backend: string; state: WorkerState }>).value.state;
      threads.attach(slot);
      threads.slots.push(slot);
    });
    return threads;
  }

  /** True once `disposeEngines` has run: every call is refused with `EngineError('engine disposed')`. */
  get disposed(): boolean {
    return this.stopped;
  }

  private attach(slot: WorkerSlot): void {
    const w = slot.worker;
    w.on('message', (m: FromWorker) => this.onMessage(slot, m));
    w.on('error', (err) => this.onDeath(slot, `crashed: ${err.message}`));
    w.on('exit', (code) => this.onDeath(slot, `exited with code ${code}`));
  }

  private onMessage(slot: WorkerSlot, m: FromWorker): void {
    switch (m.type) {
      case 'reply': {
        slot.state = m.state;
        const p = slot.pending.get(m.id);
        if (!p) return;
        slot.pending.delete(m.id);
        if (m.ok) p.resolve(m.value);
        else p.reject(fromWire(m.error));
        return;
      }
      case 'state':
        slot.state = m.state;
        return;
      case 'forward':
        this.observer?.forward(m.rows, m.ms);
        return;
      case 'log':
        logFrom(this.opts.logger, slot.index, m);
        return;
      case 'fatal':
        this.fatal(new Error(`serving worker ${slot.index}: ${m.message}`));
        return;
      case 'ready':
        return;
    }
  }

  private onDeath(slot: WorkerSlot, why: string): void {
    if (slot.dead !== null) return;
    slot.dead = why;
    const err = () => new EngineError(this.stopped ? 'engine disposed' : `serving worker ${slot.index} ${why}; retry the request`);
    for (const p of slot.pending.values()) p.reject(err());
    slot.pending.clear();
    slot.state = { loaded: [], health: { state: 'failed', recoveries: slot.state.health.recoveries, detail: `serving worker ${why}` }, queued: 0 };
    if (this.stopped) return;
    const log = this.opts.logger;
    (log?.error ?? log?.warn)?.call(log, { worker: slot.index, why }, 'serving worker stopped');
    this.fatal(new Error(`serving worker ${slot.index} ${why}`));
  }

  private fatal(err: Error): void {
    if (this.fatalCalled || this.stopped) return;
    this.fatalCalled = true;
    this.opts.onFatal?.(err);
  }

  /**
   * Sends `op` to `slot`'s worker and resolves with its reply's value.
   * @throws EngineError when the pool is disposed or the worker is (or becomes) dead; else the
   *   worker's own error, rebuilt by `fromWire`.
   */
  call<T>(slot: WorkerSlot, op: WorkerOp): Promise<T> {
    if (this.stopped) return Promise.reject(new EngineError('engine disposed'));
    if (slot.dead !== null) return Promise.reject(new EngineError(`serving worker ${slot.index} ${slot.dead}; retry the request`));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      slot.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      slot.worker.postMessage({ ...op, id } satisfies ToWorker);
    });
  }

  /** Workers whose thread runs. */
  live(): WorkerSlot[] {
    return this.slots.filter((s) => s.dead === null);
  }

  /** `failed` when any worker failed (or died), else `recovering` when any recovers, else `ok`; `recoveries` sums them. */
  health(): EngineHealth {
    const hs = this.slots.map((s) => s.state.health);
    const recoveries = hs.reduce((a, h) => a + h.recoveries, 0);
    const failed = hs.find((h) => h.state === 'failed');
    if (failed) return { state: 'failed', recoveries, ...(failed.detail !== undefined ? { detail: failed.detail } : {}) };
    const rec = hs.find((h) => h.state === 'recovering');
    if (rec) return { state: 'recovering', recoveries, ...(rec.detail !== undefined ? { detail: rec.detail } : {}) };
    return { state: 'ok', recoveries };
  }

  /** Requests queued in the workers' batchers (as last reported). */
  queued(): number {
    return this.slots.reduce((a, s) => a + s.state.queued, 0);
  }

  /**
   * First half of dispose: disposes every live worker's engine (5 s at most each), then refuses
   * every later call (`disposed`). No-op once disposed.
   */
  async disposeEngines(): Promise<void> {
    if (this.stopped) return;
    await Promise.all(
      this.live().map((s) =>
        Promise.race([this.call(s, { op: 'dispose' }).catch(() => {}), new Promise((r) => setTimeout(r, 5000).unref())]),
      ),
    );
    this.stopped = true;
  }

  /** Second half of dispose: terminates the threads; calls still waiting fail with `EngineError('engine disposed')`. */
  async terminate(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.worker.terminate()));
    for (const s of this.slots) this.onDeath(s, 'disposed');
  }
}

/** Resolves with a worker's `ready` message (passing its log lines on to `logger`), or rejects with its start error or its death. */
function firstReady(w: Worker, index: number, logger?: PoolLogger): Promise<{ backend: string; state: WorkerState }> {
  return new Promise((resolve, reject) => {
    const onMsg = (m: FromWorker) => {
      if (m.type === 'log') {
        // the backend choice is logged while the worker starts
        logFrom(logger, index, m);
        return;
      }
      if (m.type !== 'ready') return;
      cleanup();
      if ('error' in m) reject(fromWire(m.error));
      else resolve({ backend: m.backend, state: m.state });
    };
    const onErr = (err: Error) => {
      cleanup();
      reject(new Error(`serving worker failed to start: ${err.message}`, { cause: err }));
    };
    const onExit = (code: number) => {
      cleanup();
      reject(new Error(`serving worker exited with code ${code} while starting`));
    };
    const cleanup = () => {
      w.off('message', onMsg);
      w.off('error', onErr);
      w.off('exit', onExit);
    };
    w.on('message', onMsg);
    w.on('error', onErr);
    w.on('exit', onExit);
  });
}
