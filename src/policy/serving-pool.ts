/**
 * The serving pool (`LAMER_SERVE_WORKERS=N`, N > 1): N worker threads (node:worker_threads), each
 * running its own `BuiltinEngine` (src/policy/builtin-engine.ts) on its own tfjs backend, behind
 * one `PolicyEngine`. The wasm backend runs one thread per tfjs engine, so one engine uses one
 * core; N engines use N.
 *
 * - Sessions are sticky: a session's first call picks the worker with the fewest sessions (then
 *   the fewest calls in flight), and every later call of it goes to that worker, so its KV cache
 *   stays there; `release` frees the assignment and the worker's cache. Sessionless calls
 *   (`score`, `complete`) go to the worker with the fewest calls in flight.
 * - Versions: `load` runs in every worker, so each holds the same versions with the same LRU cap;
 *   a version is loaded (`isLoaded`, /readyz) when every worker has it. A worker reloads an evicted
 *   version itself when a session pinned to it steps again, as the in-process engine does.
 * - Errors thrown in a worker reach the caller as the same class (`EngineError`, `EngineLimitError`
 *   with its `field`, or an `Error` of the same name) and message, so HTTP answers are unchanged.
 * - Backend faults are recovered inside the worker that had them (src/policy/builtin/recovery.ts);
 *   `health()` is `failed` when any worker failed, else `recovering` when any recovers, and
 *   `recoveries` sums them. A worker whose backend could not be re-initialised, or a worker thread
 *   that dies, calls `onFatal` once (the server exits so that its supervisor restarts it); the
 *   calls waiting on a dead worker fail with an `EngineError`.
 * - `dispose` disposes every worker's engine and terminates the threads.
 *
 * The synchronous parts of `PolicyEngine` (`isLoaded`, `info`, `health`, `queueDepth`) read the
 * state each worker sends with every reply and whenever it changes between calls (at most
 * `statePeriodMs` late).
 *
 * Under tsx the worker starts from serving-bootstrap.mjs, which registers tsx's ESM loader in the
 * thread and imports serving-worker.ts (the same trick as src/training/worker.ts); compiled (.js),
 * serving-worker.js starts directly.
 */
import { Worker } from 'node:worker_threads';
import type { BatcherStats } from '../model/batcher.js';
import type { BuiltinEngineOptions } from './builtin-engine.js';
import {
  EngineError, EngineLimitError, type ActRequest, type CompleteRequest, type Completion, type EngineHealth, type EngineInfo,
  type EngineObserver, type EngineSpec, type Generation, type PolicyEngine, type ReflectRequest, type ScoreRequest,
} from './engine.js';

/** Engine options a worker gets (plain data: functions do not cross threads). */
export type WorkerEngineOptions = Pick<
  BuiltinEngineOptions,
  'backend' | 'batchWindowMs' | 'maxBatchSize' | 'maxLoadedVersions' | 'maxCachedSessions' | 'limits' | 'maxCandidateTokens' | 'maxScoredTokens'
>;

/** `workerData` of a serving worker. */
export interface ServingWorkerData {
  options: WorkerEngineOptions;
  /** Period of the worker's state check between calls, ms. */
  statePeriodMs: number;
  /** Enables the `poison` and `crash` requests (tests only). */
  testHooks: boolean;
}

/** What a worker reports about itself with every reply and on change. */
export interface WorkerState {
  /** Versions loaded in the worker, LRU order (oldest first). */
  loaded: string[];
  health: EngineHealth;
  /** Requests queued in the worker's batchers. */
  queued: number;
}

/** An error as it crosses the thread boundary. */
export interface WireError {
  name: string;
  message: string;
  /** `EngineLimitError.field`. */
  field?: string;
}

/** Per-worker figures for tests and benchmarks. */
export interface ServingWorkerStats {
  /** Tensors held by the worker's tfjs engine. */
  numTensors: number;
  /** Batching counters per loaded version. */
  batchers: Record<string, BatcherStats>;
  /** Sessions holding a KV cache in the worker. */
  cachedSessions: number;
}

/**
 * `order`: the pool's version recency (oldest first), applied by the worker before the call
 * (`BuiltinEngine.touchVersions`) so that its LRU evicts what the in-process engine would.
 */
type Op =
  | { op: 'act'; req: ActRequest; order: string[] }
  | { op: 'reflect'; req: ReflectRequest; order: string[] }
  | { op: 'score'; req: ScoreRequest; order: string[] }
  | { op: 'complete'; req: CompleteRequest; order: string[] }
  | { op: 'load'; version: string; dir: string; order: string[] }
  | { op: 'release'; sessionId: string }
  | { op: 'observe' }
  | { op: 'stats' }
  | { op: 'poison'; on: boolean }
  | { op: 'crash'; code: number }
  | { op: 'dispose' };

export type ToWorker = Op & { id: number };

export type FromWorker =
  | { type: 'ready'; backend: string; state: WorkerState }
  | { type: 'ready'; error: WireError }
  | { type: 'reply'; id: number; ok: true; value: unknown; state: WorkerState }
  | { type: 'reply'; id: number; ok: false; error: WireError; state: WorkerState }
  | { type: 'state'; state: WorkerState }
  | { type: 'forward'; rows: number; ms: number }
  | { type: 'log'; level: 'info' | 'warn' | 'error'; obj: object; msg?: string }
  | { type: 'fatal'; message: string };

export interface PoolLogger {
  info(o: object, msg?: string): void;
  warn(o: object, msg?: string): void;
  error?(o: object, msg?: string): void;
}

export interface ServingPoolOptions extends WorkerEngineOptions {
  /** Worker threads (>= 1). */
  workers: number;
  logger?: PoolLogger;
  /** Called once when a worker's backend could not be re-initialised or a worker thread died. */
  onFatal?: (err: Error) => void;
  /** Period of each worker's state check between calls, ms (default 50). */
  statePeriodMs?: number;
  /** Test hook: enables `poison()` and `crash()`. */
  testHooks?: boolean;
}

/** Rebuilds an error thrown in a worker as the same class with the same message. */
export function fromWire(e: WireError): Error {
  if (e.name === 'EngineLimitError') return new EngineLimitError(e.field ?? 'body', e.message);
  if (e.name === 'EngineError') return new EngineError(e.message);
  const Ctor = ({ TypeError, RangeError, SyntaxError } as Record<string, ErrorConstructor>)[e.name] ?? Error;
  const err = new Ctor(e.message);
  if (err.name !== e.name) err.name = e.name;
  return err;
}

interface Pending {
  resolve(v: unknown): void;
  reject(e: Error): void;
}

class Slot {
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
  if (EXT_JS) return new Worker(new URL('./serving-worker.js', import.meta.url), { workerData: data });
  return new Worker(new URL('./serving-bootstrap.mjs', import.meta.url), { workerData: data, execArgv: [] });
}

export class ServingPool implements PolicyEngine {
  private readonly slots: Slot[] = [];
  private readonly assigned = new Map<string, Slot>();
  /** Versions by last use across all workers, oldest first (loaded ones only ever enter). */
  private readonly recency: string[] = [];
  private nextId = 1;
  private disposed = false;
  private fatalCalled = false;
  private observer: EngineObserver | null = null;

  /** Use `createServingPool`, which waits until every worker's backend is ready. */
  private constructor(
    readonly backend: string,
    private readonly opts: ServingPoolOptions,
  ) {}

  /**
   * Starts `opts.workers` workers and waits until each has its backend.
   * @throws Error (the worker's own error, e.g. a forced backend that does not initialise) when a
   *   worker cannot start; the others are terminated.
   */
  static async create(opts: ServingPoolOptions): Promise<ServingPool> {
    if (!Number.isInteger(opts.workers) || opts.workers < 1) throw new Error(`workers must be an integer >= 1, got ${opts.workers}`);
    const data: ServingWorkerData = {
      options: {
        backend: opts.backend, batchWindowMs: opts.batchWindowMs, maxBatchSize: opts.maxBatchSize, maxLoadedVersions: opts.maxLoadedVersions,
        maxCachedSessions: opts.maxCachedSessions, limits: opts.limits, maxCandidateTokens: opts.maxCandidateTokens, maxScoredTokens: opts.maxScoredTokens,
      },
      statePeriodMs: opts.statePeriodMs ?? 50,
      testHooks: opts.testHooks ?? false,
    };
    const workers = Array.from({ length: opts.workers }, () => spawn(data));
    const ready = await Promise.allSettled(workers.map((w, i) => firstReady(w, i, opts.logger)));
    const failed = ready.find((r) => r.status === 'rejected');
    if (failed) {
      await Promise.all(workers.map((w) => w.terminate()));
      throw (failed as PromiseRejectedResult).reason;
    }
    const first = (ready[0] as PromiseFulfilledResult<{ backend: string; state: WorkerState }>).value;
    const pool = new ServingPool(first.backend, opts);
    workers.forEach((w, i) => {
      const slot = new Slot(i, w);
      slot.state = (ready[i] as PromiseFulfilledResult<{ backend: string; state: WorkerState }>).value.state;
      pool.attach(slot);
      pool.slots.push(slot);
    });
    opts.logger?.info({ workers: opts.workers, backend: first.backend }, 'serving pool started');
    if (first.backend !== 'wasm' && first.backend !== 'cpu') {
      // native and GPU backends already use every core (or the GPU): N copies only cost memory
      opts.logger?.warn({ workers: opts.workers, backend: first.backend }, `LAMER_SERVE_WORKERS=${opts.workers} with the ${first.backend} backend, which is not single-threaded: each worker holds its own copy of every loaded version; 1 is usually better here`);
    }
    return pool;
  }

  private attach(slot: Slot): void {
    const w = slot.worker;
    w.on('message', (m: FromWorker) => this.onMessage(slot, m));
    w.on('error', (err) => this.onDeath(slot, `crashed: ${err.message}`));
    w.on('exit', (code) => this.onDeath(slot, `exited with code ${code}`));
  }

  private onMessage(slot: Slot, m: FromWorker): void {
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
      case 'log': {
        const log = this.opts.logger;
        const obj = { ...m.obj, worker: slot.index };
        if (m.level === 'error') (log?.error ?? log?.warn)?.call(log, obj, m.msg);
        else log?.[m.level](obj, m.msg);
        return;
      }
      case 'fatal':
        this.fatal(new Error(`serving worker ${slot.index}: ${m.message}`));
        return;
      case 'ready':
        return;
    }
  }

  private onDeath(slot: Slot, why: string): void {
    if (slot.dead !== null) return;
    slot.dead = why;
    const err = () => new EngineError(this.disposed ? 'engine disposed' : `serving worker ${slot.index} ${why}; retry the request`);
    for (const p of slot.pending.values()) p.reject(err());
    slot.pending.clear();
    slot.state = { loaded: [], health: { state: 'failed', recoveries: slot.state.health.recoveries, detail: `serving worker ${why}` }, queued: 0 };
    if (this.disposed) return;
    (this.opts.logger?.error ?? this.opts.logger?.warn)?.call(this.opts.logger, { worker: slot.index, why }, 'serving worker stopped');
    this.fatal(new Error(`serving worker ${slot.index} ${why}`));
  }

  private fatal(err: Error): void {
    if (this.fatalCalled || this.disposed) return;
    this.fatalCalled = true;
    this.opts.onFatal?.(err);
  }

  private call<T>(slot: Slot, op: Op): Promise<T> {
    if (this.disposed) return Promise.reject(new EngineError('engine disposed'));
    if (slot.dead !== null) return Promise.reject(new EngineError(`serving worker ${slot.index} ${slot.dead}; retry the request`));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      slot.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      slot.worker.postMessage({ ...op, id } satisfies ToWorker);
    });
  }

  /** Marks `version` most recently used (when `add`, also a version not seen yet); returns the order. */
  private use(version: string, add = false): string[] {
    const i = this.recency.indexOf(version);
    if (i >= 0) this.recency.splice(i, 1);
    if (i >= 0 || add) this.recency.push(version);
    return [...this.recency];
  }

  /** A model call on `slot`, counted in its in-flight calls. */
  private async model<T>(slot: Slot, op: Op): Promise<T> {
    slot.inFlight++;
    try {
      return await this.call<T>(slot, op);
    } finally {
      slot.inFlight--;
    }
  }

  private live(): Slot[] {
    return this.slots.filter((s) => s.dead === null);
  }

  /** The live worker with the fewest sessions, then the fewest calls in flight, then the lowest index. */
  private leastLoaded(bySessions: boolean): Slot {
    if (this.disposed) throw new EngineError('engine disposed');
    const live = this.live();
    if (live.length === 0) throw new EngineError('every serving worker stopped; the server restarts');
    let best = live[0]!;
    for (const s of live) {
      const a = bySessions ? [s.sessions, s.inFlight] : [s.inFlight, s.sessions];
      const b = bySessions ? [best.sessions, best.inFlight] : [best.inFlight, best.sessions];
      if (a[0]! < b[0]! || (a[0] === b[0] && a[1]! < b[1]!)) best = s;
    }
    return best;
  }

  /** The session's worker, assigned at its first call (a session of a dead worker moves). */
  private slotFor(sessionId: string): Slot {
    if (this.disposed) throw new EngineError('engine disposed');
    const cur = this.assigned.get(sessionId);
    if (cur && cur.dead === null) return cur;
    if (cur) cur.sessions--;
    const s = this.leastLoaded(true);
    s.sessions++;
    this.assigned.set(sessionId, s);
    return s;
  }

  /** Index of the worker `sessionId` is assigned to, or undefined (not seen, or released). */
  workerOf(sessionId: string): number | undefined {
    return this.assigned.get(sessionId)?.index;
  }

  /** Number of workers started. */
  get size(): number {
    return this.slots.length;
  }

  info(): EngineInfo {
    return { engine: 'builtin', backend: this.backend, loadedVersions: this.disposed ? [] : this.loadedEverywhere() };
  }

  /** Versions loaded in every worker, in the first worker's LRU order. */
  private loadedEverywhere(): string[] {
    const [first, ...rest] = this.slots;
    if (!first || this.slots.some((s) => s.dead !== null)) return [];
    return first.state.loaded.filter((v) => rest.every((s) => s.state.loaded.includes(v)));
  }

  isLoaded(version: string): boolean {
    return !this.disposed && this.slots.every((s) => s.dead === null && s.state.loaded.includes(version));
  }

  /**
   * Loads `version` in every worker (idempotent; cheap where loaded).
   * @throws EngineError when a worker cannot load it (the first worker's error).
   */
  async load(version: string, checkpointDir: string, spec?: EngineSpec): Promise<void> {
    if (spec && spec.engine !== 'builtin') throw new EngineError(`the serving pool serves builtin versions only, not '${spec.engine}'`);
    if (this.disposed) throw new EngineError('engine disposed');
    // the order before this load: a new version enters last, after the evictions it causes
    const order = this.use(version);
    const results = await Promise.allSettled(this.slots.map((s) => this.call<void>(s, { op: 'load', version, dir: checkpointDir, order })));
    const bad = results.find((r) => r.status === 'rejected');
    if (bad) throw (bad as PromiseRejectedResult).reason;
    this.use(version, true);
  }

  async act(req: ActRequest): Promise<Generation> {
    return this.model(this.slotFor(req.sessionId), { op: 'act', req, order: this.use(req.modelVersion) });
  }

  async reflect(req: ReflectRequest): Promise<Generation> {
    return this.model(this.slotFor(req.sessionId), { op: 'reflect', req, order: this.use(req.modelVersion) });
  }

  async score(req: ScoreRequest): Promise<number[]> {
    if (req.candidates.length === 0) return [];
    return this.model(this.leastLoaded(false), { op: 'score', req, order: this.use(req.modelVersion) });
  }

  async complete(req: CompleteRequest): Promise<Completion> {
    return this.model(this.leastLoaded(false), { op: 'complete', req, order: this.use(req.modelVersion) });
  }

  /** Frees the session's worker assignment and its KV cache there. */
  release(sessionId: string): void {
    const s = this.assigned.get(sessionId);
    if (!s) return;
    this.assigned.delete(sessionId);
    s.sessions--;
    this.call(s, { op: 'release', sessionId }).catch(() => {
      /* a dead or disposed worker holds no cache any more */
    });
  }

  setObserver(observer: EngineObserver): void {
    this.observer = observer;
    for (const s of this.live()) this.call(s, { op: 'observe' }).catch(() => {});
  }

  /** `failed` when any worker failed (or died), else `recovering` when any recovers, else `ok`. */
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
  queueDepth(): number {
    return this.slots.reduce((a, s) => a + s.state.queued, 0);
  }

  /** Per-worker tensors, batching counters and cached sessions (tests, benchmarks). */
  workerStats(): Promise<ServingWorkerStats[]> {
    return Promise.all(this.slots.map((s) => this.call<ServingWorkerStats>(s, { op: 'stats' })));
  }

  /**
   * Test hook (pool created with `testHooks`): while `on`, every forward pass of worker `index`
   * throws a WebAssembly trap, as a poisoned wasm heap does.
   */
  poison(index: number, on: boolean): Promise<void> {
    const s = this.slots[index];
    if (!s) return Promise.reject(new RangeError(`no worker ${index}`));
    return this.call(s, { op: 'poison', on });
  }

  /** Test hook (pool created with `testHooks`): worker `index` exits with `code` at once, as a crashed thread. */
  crash(index: number, code = 3): Promise<void> {
    const s = this.slots[index];
    if (!s) return Promise.reject(new RangeError(`no worker ${index}`));
    return this.call(s, { op: 'crash', code });
  }

  /** Worker threads running now (0 after `dispose`). */
  liveWorkers(): number {
    return this.live().length;
  }

  /** Disposes every worker's engine (5 s at most each) and terminates the threads. */
  async dispose(): Promise<void> {
    if (this.disposed) return;
    const live = this.live();
    await Promise.all(
      live.map((s) =>
        Promise.race([this.call(s, { op: 'dispose' }).catch(() => {}), new Promise((r) => setTimeout(r, 5000).unref())]),
      ),
    );
    this.disposed = true;
    this.assigned.clear();
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
        if (m.level === 'error') (logger?.error ?? logger?.warn)?.call(logger, { ...m.obj, worker: index }, m.msg);
        else logger?.[m.level]({ ...m.obj, worker: index }, m.msg);
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

/**
 * Creates the serving pool: `opts.workers` worker threads, each with a `BuiltinEngine` whose
 * backend is chosen as `createBuiltinEngine` does, and no version loaded yet.
 */
export function createServingPool(opts: ServingPoolOptions): Promise<ServingPool> {
  return ServingPool.create(opts);
}
