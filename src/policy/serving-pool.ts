/**
 * The serving pool (`LAMER_SERVE_WORKERS=N`, N > 1): N worker threads (node:worker_threads), each
 * running its own `BuiltinEngine` (src/policy/builtin-engine.ts) on its own tfjs backend, behind
 * one `PolicyEngine`. The wasm backend runs one thread per tfjs engine, so one engine uses one
 * core; N engines use N.
 *
 * - Sessions are sticky: a session's first call picks the worker with the fewest sessions (then
 *   the fewest calls in flight), and every later call of it goes to that worker, so its KV cache
 *   stays there; `release` frees the assignment and the worker's cache. Sessionless calls
 *   (`score`, `complete`, `replay`) go to the worker with the fewest calls in flight.
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
 * Its parts live in src/policy/serving/: `protocol.ts` (the messages between the pool and a
 * worker), `workers.ts` (the threads' lifecycle: spawn, calls, crashes, health, dispose),
 * `bookkeeping.ts` (sticky session assignment, version recency); this file composes them behind
 * `PolicyEngine`. The worker side is serving-worker.ts.
 */
import {
  EngineError, type ActRequest, type CompleteRequest, type Completion, type EngineHealth, type EngineInfo, type EngineObserver,
  type EngineSpec, type Generation, type PolicyEngine, type ReflectRequest, type ReplayAnswer, type ReplayRequest, type ScoreRequest,
} from './engine.js';
import { SessionAssignments, VersionRecency } from './serving/bookkeeping.js';
import type { ServingWorkerData, ServingWorkerStats, WorkerEngineOptions, WorkerOp } from './serving/protocol.js';
import { WorkerThreads, type PoolLogger, type WorkerSlot } from './serving/workers.js';

export {
  fromWire, type FromWorker, type ServingWorkerData, type ServingWorkerStats, type ToWorker, type WireError, type WorkerEngineOptions,
  type WorkerState,
} from './serving/protocol.js';
export type { PoolLogger } from './serving/workers.js';

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

export class ServingPool implements PolicyEngine {
  private readonly sessions: SessionAssignments<WorkerSlot>;
  private readonly recency = new VersionRecency();

  /** Use `createServingPool`, which waits until every worker's backend is ready. */
  private constructor(private readonly threads: WorkerThreads) {
    this.sessions = new SessionAssignments(threads.slots);
  }

  /** The tfjs backend the workers run (the first worker's; every worker chooses the same way). */
  get backend(): string {
    return this.threads.backend;
  }

  /**
   * Starts `opts.workers` workers and waits until each has its backend.
   * @throws Error when `opts.workers` is not an integer >= 1, or (the worker's own error, e.g. a
   *   forced backend that does not initialise) when a worker cannot start; the others are terminated.
   */
  static async create(opts: ServingPoolOptions): Promise<ServingPool> {
    if (!Number.isInteger(opts.workers) || opts.workers < 1) throw new Error(`workers must be an integer >= 1, got ${opts.workers}`);
    const data: ServingWorkerData = {
      options: {
        backend: opts.backend, batchWindowMs: opts.batchWindowMs, maxBatchSize: opts.maxBatchSize, forwardSectionTokens: opts.forwardSectionTokens,
        forwardSectionMs: opts.forwardSectionMs,
        maxLoadedVersions: opts.maxLoadedVersions,
        maxCachedSessions: opts.maxCachedSessions, limits: opts.limits, maxCandidateTokens: opts.maxCandidateTokens, maxScoredTokens: opts.maxScoredTokens,
      },
      statePeriodMs: opts.statePeriodMs ?? 50,
      testHooks: opts.testHooks ?? false,
    };
    const threads = await WorkerThreads.start({ workers: opts.workers, data, logger: opts.logger, onFatal: opts.onFatal });
    const pool = new ServingPool(threads);
    const backend = threads.backend;
    opts.logger?.info({ workers: opts.workers, backend }, 'serving pool started');
    if (backend !== 'wasm' && backend !== 'cpu') {
      // native and GPU backends already use every core (or the GPU): N copies only cost memory
      opts.logger?.warn({ workers: opts.workers, backend }, `LAMER_SERVE_WORKERS=${opts.workers} with the ${backend} backend, which is not single-threaded: each worker holds its own copy of every loaded version; 1 is usually better here`);
    }
    return pool;
  }

  /** A model call on `slot`, counted in its in-flight calls. */
  private async model<T>(slot: WorkerSlot, op: WorkerOp): Promise<T> {
    slot.inFlight++;
    try {
      return await this.threads.call<T>(slot, op);
    } finally {
      slot.inFlight--;
    }
  }

  /**
   * The session's worker (sticky), or for a sessionless call the worker with the fewest calls in flight.
   * @throws EngineError when the pool is disposed or every worker stopped.
   */
  private pick(sessionId?: string): WorkerSlot {
    if (this.threads.disposed) throw new EngineError('engine disposed');
    return sessionId === undefined ? this.sessions.leastLoaded(false) : this.sessions.workerFor(sessionId);
  }

  /** Index of the worker `sessionId` is assigned to, or undefined (not seen, or released). */
  workerOf(sessionId: string): number | undefined {
    return this.sessions.workerOf(sessionId)?.index;
  }

  /** Number of workers started. */
  get size(): number {
    return this.threads.slots.length;
  }

  info(): EngineInfo {
    return { engine: 'builtin', backend: this.backend, loadedVersions: this.threads.disposed ? [] : this.loadedEverywhere() };
  }

  /** Versions loaded in every worker, in the first worker's LRU order ([] while any worker is dead). */
  private loadedEverywhere(): string[] {
    const [first, ...rest] = this.threads.slots;
    if (!first || this.threads.slots.some((s) => s.dead !== null)) return [];
    return first.state.loaded.filter((v) => rest.every((s) => s.state.loaded.includes(v)));
  }

  /** Whether every worker is live and has `version` loaded (as last reported). */
  isLoaded(version: string): boolean {
    return !this.threads.disposed && this.threads.slots.every((s) => s.dead === null && s.state.loaded.includes(version));
  }

  /**
   * Loads `version` in every worker (idempotent; cheap where loaded).
   * @throws EngineError when `spec` is not a builtin engine, when the pool is disposed, or when a
   *   worker cannot load it (the first worker's error).
   */
  async load(version: string, checkpointDir: string, spec?: EngineSpec): Promise<void> {
    if (spec && spec.engine !== 'builtin') throw new EngineError(`the serving pool serves builtin versions only, not '${spec.engine}'`);
    if (this.threads.disposed) throw new EngineError('engine disposed');
    // the order before this load: a new version enters last, after the evictions it causes
    const order = this.recency.use(version);
    const results = await Promise.allSettled(this.threads.slots.map((s) => this.threads.call<void>(s, { op: 'load', version, dir: checkpointDir, order })));
    const bad = results.find((r) => r.status === 'rejected');
    if (bad) throw (bad as PromiseRejectedResult).reason;
    this.recency.use(version, true);
  }

  async act(req: ActRequest): Promise<Generation> {
    return this.model(this.pick(req.sessionId), { op: 'act', req, order: this.recency.use(req.modelVersion) });
  }

  async reflect(req: ReflectRequest): Promise<Generation> {
    return this.model(this.pick(req.sessionId), { op: 'reflect', req, order: this.recency.use(req.modelVersion) });
  }

  async score(req: ScoreRequest): Promise<number[]> {
    if (req.candidates.length === 0) return [];
    return this.model(this.pick(), { op: 'score', req, order: this.recency.use(req.modelVersion) });
  }

  async complete(req: CompleteRequest): Promise<Completion> {
    return this.model(this.pick(), { op: 'complete', req, order: this.recency.use(req.modelVersion) });
  }

  /** A recorded call replayed (sessionless), on the worker with the fewest calls in flight. */
  async replay(req: ReplayRequest): Promise<ReplayAnswer> {
    return this.model(this.pick(), { op: 'replay', req, order: this.recency.use(req.modelVersion) });
  }

  /** Frees the session's worker assignment and its KV cache there. */
  release(sessionId: string): void {
    const s = this.sessions.release(sessionId);
    if (!s) return;
    this.threads.call(s, { op: 'release', sessionId }).catch(() => {
      /* a dead or disposed worker holds no cache any more */
    });
  }

  setObserver(observer: EngineObserver): void {
    this.threads.observer = observer;
    for (const s of this.threads.live()) this.threads.call(s, { op: 'observe' }).catch(() => {});
  }

  /** `failed` when any worker failed (or died), else `recovering` when any recovers, else `ok`. */
  health(): EngineHealth {
    return this.threads.health();
  }

  /** Requests queued in the workers' batchers (as last reported). */
  queueDepth(): number {
    return this.threads.queued();
  }

  /** Per-worker tensors, batching counters and cached sessions (tests, benchmarks). */
  workerStats(): Promise<ServingWorkerStats[]> {
    return Promise.all(this.threads.slots.map((s) => this.threads.call<ServingWorkerStats>(s, { op: 'stats' })));
  }

  /**
   * Test hook (pool created with `testHooks`): while `on`, every forward pass of worker `index`
   * throws a WebAssembly trap, as a poisoned wasm heap does.
   * @throws RangeError (rejects) when there is no worker `index`.
   */
  poison(index: number, on: boolean): Promise<void> {
    const s = this.threads.slots[index];
    if (!s) return Promise.reject(new RangeError(`no worker ${index}`));
    return this.threads.call(s, { op: 'poison', on });
  }

  /**
   * Test hook (pool created with `testHooks`): worker `index` exits with `code` at once, as a crashed thread.
   * @throws RangeError (rejects) when there is no worker `index`.
   */
  crash(index: number, code = 3): Promise<void> {
    const s = this.threads.slots[index];
    if (!s) return Promise.reject(new RangeError(`no worker ${index}`));
    return this.threads.call(s, { op: 'crash', code });
  }

  /** Worker threads running now (0 after `dispose`). */
  liveWorkers(): number {
    return this.threads.live().length;
  }

  /** Disposes every worker's engine (5 s at most each) and terminates the threads. */
  async dispose(): Promise<void> {
    if (this.threads.disposed) return;
    await this.threads.disposeEngines();
    this.sessions.clear();
    await this.threads.terminate();
  }
}

/**
 * Creates the serving pool: `opts.workers` worker threads, each with a `BuiltinEngine` whose
 * backend is chosen as `createBuiltinEngine` does, and no version loaded yet.
 * @throws Error as `ServingPool.create`.
 */
export function createServingPool(opts: ServingPoolOptions): Promise<ServingPool> {
  return ServingPool.create(opts);
}
