/**
 * Backend-fault recovery of the builtin engine. A forward pass that throws a backend fault (a
 * WebAssembly trap poisons the wasm heap: every later op fails), or whose backend then fails a
 * one-token probe, starts a recovery: every session cache and loaded model of the faulted backend
 * is dropped, the tfjs backend is re-initialised (src/model/backend.ts `reinitBackend`) and the
 * versions that were loaded are loaded again. Requests wait for it; when it fails, the engine is
 * `failed` for good and `onFatal` is called (the server exits so that its supervisor restarts it).
 */
import { backendGeneration, reinitBackend } from '../../model/backend.js';
import { forwardCached, type CachedRow, type CachedRowResult } from '../../model/gpt-cached.js';
import { BOS } from '../../model/tokenizer.js';
import { EngineError, type EngineHealth } from '../engine.js';
import type { SessionCaches } from './kv-lru.js';
import type { LoadedModel, VersionCache } from './versions.js';

/**
 * Whether `err`, thrown by a forward pass, means the backend itself broke: a WebAssembly trap
 * ("memory access out of bounds", "table index is out of bounds", "unreachable") or an
 * Emscripten abort (allocation failure). Such a module's heap is poisoned: every later op fails.
 */
export function isBackendFault(err: unknown): boolean {
  if (typeof WebAssembly !== 'undefined' && err instanceof WebAssembly.RuntimeError) return true;
  const msg = err instanceof Error ? err.message : String(err);
  return /memory access out of bounds|table index is out of bounds|unreachable|Aborted\(|Cannot enlarge memory|out of memory/i.test(msg);
}

const RETRY = 'the model backend was re-initialised after a fault; retry the request';

export interface RecoveryOptions {
  versions: VersionCache;
  sessions: SessionCaches;
  isDisposed: () => boolean;
  logger?: { info(o: object, msg?: string): void; warn(o: object, msg?: string): void; error?(o: object, msg?: string): void };
  onFatal?: (err: Error) => void;
  /** Test hook: runs before every forward pass with its rows; what it throws is a backend fault. */
  beforeForward?: (rows: CachedRow[]) => void;
}

export class BackendRecovery {
  private recovering: Promise<void> | null = null;
  private failure: string | null = null;
  private recoveries = 0;

  constructor(private readonly opts: RecoveryOptions) {}

  /** `recovering` while the backend is re-initialised after a fault, `failed` when that failed. */
  health(): EngineHealth {
    const state = this.failure !== null ? 'failed' : this.recovering ? 'recovering' : 'ok';
    return { state, recoveries: this.recoveries, ...(this.failure !== null ? { detail: this.failure } : {}) };
  }

  /** Waits for a running recovery; throws an EngineError once the engine has failed for good. */
  async usable(): Promise<void> {
    if (this.recovering) await this.recovering;
    if (this.failure !== null) throw new EngineError(`the model backend failed and could not be re-initialised: ${this.failure}`);
  }

  /**
   * One forward pass of `entry`'s model (the batcher's runner). A forward that throws a backend
   * fault (`isBackendFault`), or whose backend then fails a one-token probe, starts the recovery
   * and fails with an EngineError (engine unavailable: nothing is recorded, the retry works); the passes of an
   * earlier backend generation fail the same way without running.
   */
  runForward(entry: LoadedModel, rows: CachedRow[]): CachedRowResult[] {
    if (this.failure !== null) throw new EngineError(RETRY);
    if (entry.generation !== backendGeneration()) {
      // a model of a replaced backend instance; when it is still the loaded one (the backend was
      // re-initialised by another engine of this process), reload
      if (this.opts.versions.isCurrent(entry)) this.start('the tfjs backend was re-initialised');
      throw new EngineError(RETRY);
    }
    try {
      this.opts.beforeForward?.(rows);
      return forwardCached(entry.model, rows);
    } catch (err) {
      if (err instanceof EngineError) throw err;
      if (!isBackendFault(err) && this.probe(entry)) throw err;
      const msg = err instanceof Error ? err.message : String(err);
      this.start(msg);
      throw new EngineError(`model backend fault (${msg}); the engine re-initialises its backend, retry the request`, { cause: err });
    }
  }

  /** Whether a one-token forward of `entry` still gives finite logprobs. */
  private probe(entry: LoadedModel): boolean {
    try {
      const [r] = forwardCached(entry.model, [{ cache: null, tokens: [BOS], allPositions: false, keepCache: false }]);
      return r.logprobs.every((x) => Number.isFinite(x));
    } catch {
      return false;
    }
  }

  private start(reason: string): void {
    if (this.recovering || this.failure !== null || this.opts.isDisposed()) return;
    const loaded = this.opts.versions.loaded();
    const versions = loaded.map((m) => m.version); // LRU order: the most recent is loaded last
    const faulted = Math.min(backendGeneration(), ...loaded.map((m) => m.generation));
    this.recovering = this.recover(versions, reason, faulted).finally(() => {
      this.recovering = null;
    });
  }

  private async recover(versions: string[], reason: string, faulted: number): Promise<void> {
    const log = this.opts.logger;
    log?.warn({ reason, versions }, 'model backend fault: re-initialising the tfjs backend and reloading the loaded versions');
    this.opts.sessions.clear(true); // tensors of the faulted backend
    this.opts.versions.unloadAll(() => new EngineError(RETRY));
    try {
      await reinitBackend(log, faulted);
      for (const v of versions) {
        const dir = this.opts.versions.dirOf(v);
        if (dir) await this.opts.versions.doLoad(v, dir);
      }
      this.recoveries++;
      log?.info({ versions, recoveries: this.recoveries }, 'model backend recovered');
    } catch (err) {
      this.failure = `${reason}; re-initialising failed: ${err instanceof Error ? err.message : String(err)}`;
      (log?.error ?? log?.warn)?.call(log, { reason: this.failure }, 'model backend could not be re-initialised');
      this.opts.onFatal?.(err instanceof Error ? err : new Error(String(err)));
    }
  }
}
