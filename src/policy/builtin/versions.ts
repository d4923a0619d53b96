/**
 * The builtin engine's loaded model versions: an LRU with a cap. An evicted version is disposed
 * only once its in-flight requests finish, and is reloaded transparently from its folder when a
 * request for it comes again. Each loaded version has its own forward batcher
 * (src/model/batcher.ts) whose passes run through the engine's `runForward`.
 */
import { backendGeneration } from '../../model/backend.js';
import { ForwardBatcher } from '../../model/batcher.js';
import { packedAttentionAvailable } from '../../model/packed-attention.js';
import { checkpointText, loadCheckpoint } from '../../model/checkpoint.js';
import type { Tokenizer } from '../../model/tokenizers.js';
import { warmUpForward, type CachedRow, type CachedRowResult } from '../../model/gpt-cached.js';
import type { GPT } from '../../model/gpt.js';
import { EngineError } from '../engine.js';

export interface LoadedModel {
  /** Backend generation the model's tensors live in (src/model/backend.ts backendGeneration). */
  generation: number;
  version: string;
  dir: string;
  model: GPT;
  /** The checkpoint's tokenizer (byte or game vocabulary; src/model/tokenizer.ts). */
  tokenizer: Tokenizer;
  batcher: ForwardBatcher;
  inFlight: number;
  evicted: boolean;
}

export interface VersionCacheOptions {
  /** Max versions kept loaded (>= 1). */
  maxLoadedVersions: number;
  batchWindowMs: number;
  maxBatchSize: number;
  /** Most padded tokens of one forward section (absent: the batcher's default). */
  maxSectionTokens?: number;
  /** Target wall time of one forward section, ms (absent or 0: the token bound alone). */
  sectionTargetMs?: number;
  /** Smallest block_size a checkpoint may have (the generation caps + margin). */
  minBlockSize: number;
  /** Runs one forward pass of a loaded model (the batchers' runner). */
  runForward: (entry: LoadedModel, rows: CachedRow[]) => CachedRowResult[];
  /** Reports each forward pass (rows, ms). */
  onForward: (rows: number, ms: number) => void;
  /** Called when a version is evicted (its sessions' caches go with it). */
  onEvict: (version: string) => void;
  logger?: { info(o: object, msg?: string): void; error?(o: object, msg?: string): void };
}

export class VersionCache {
  /** LRU order: oldest first. */
  private readonly models = new Map<string, LoadedModel>();
  /** Checkpoint folder of every version ever asked for (for reloads). */
  private readonly dirs = new Map<string, string>();
  private readonly loading = new Map<string, Promise<void>>();

  constructor(private readonly opts: VersionCacheOptions) {
    if (opts.maxLoadedVersions < 1) throw new Error('maxLoadedVersions must be >= 1');
  }

  /** Whether `version` is loaded now. */
  has(version: string): boolean {
    return this.models.has(version);
  }

  /** Whether `m` is the loaded entry of its version now (not evicted, not replaced by a reload). */
  isCurrent(m: LoadedModel): boolean {
    return this.models.get(m.version) === m;
  }

  /** Checkpoint folder `version` loads from (set by `setDir`), loaded now or not. */
  dirOf(version: string): string | undefined {
    return this.dirs.get(version);
  }

  /** Records the checkpoint folder of `version`, for its next load or reload. */
  setDir(version: string, dir: string): void {
    this.dirs.set(version, dir);
  }

  /** The loaded versions, least recently used first. */
  loaded(): LoadedModel[] {
    return [...this.models.values()];
  }

  /** Loads `version` unless loaded (marking it most recent) or loading (joining that load). */
  loadOrJoin(version: string, dir: string): Promise<void> {
    if (this.models.has(version)) {
      this.touch(version);
      return Promise.resolve();
    }
    let p = this.loading.get(version);
    if (!p) {
      p = this.doLoad(version, dir).finally(() => this.loading.delete(version));
      this.loading.set(version, p);
    }
    return p;
  }

  /**
   * Loads a checkpoint as the most recent version, evicting the oldest beyond the cap.
   * @throws EngineError when the checkpoint cannot be read or its context is too small; its message
   *   names the version only (the folder and the loader's error are logged, and kept as `cause`).
   */
  async doLoad(version: string, dir: string): Promise<void> {
    let model: GPT;
    let tokenizer: Tokenizer;
    try {
      const loaded = await loadCheckpoint(dir);
      model = loaded.model;
      tokenizer = checkpointText(loaded.metadata).tokenizer;
    } catch (err) {
      // The folder and the loader's message are for the operator (the log, and the error's cause,
      // which startup failures print); the error's own message reaches tenants.
      const detail = `cannot load model version ${version} from ${dir}: ${err instanceof Error ? err.message : String(err)}`;
      this.opts.logger?.error?.({ version, dir, err: detail }, 'cannot load model version');
      throw new EngineError(`model version '${version}' cannot be loaded (its checkpoint is missing or damaged); an operator must check the server log`, {
        cause: new Error(detail, { cause: err }),
      });
    }
    const minBlock = this.opts.minBlockSize;
    if (model.config.block_size < minBlock) {
      model.dispose();
      throw new EngineError(`model version ${version}: block_size ${model.config.block_size} too small for the generation caps (needs >= ${minBlock})`);
    }
    // Before the version counts as loaded (and /readyz says ready): the first forward's one-time costs.
    let warmUpMs: number;
    try {
      warmUpMs = warmUpForward(model);
    } catch (err) {
      model.dispose();
      throw new EngineError(`model version '${version}' failed its first forward pass`, { cause: err });
    }
    const entry: LoadedModel = { generation: backendGeneration(), version, dir, model, tokenizer, batcher: undefined as unknown as ForwardBatcher, inFlight: 0, evicted: false };
    entry.batcher = new ForwardBatcher((rows) => this.opts.runForward(entry, rows), {
      windowMs: this.opts.batchWindowMs,
      maxBatchSize: this.opts.maxBatchSize,
      maxSectionTokens: this.opts.maxSectionTokens,
      sectionTargetMs: this.opts.sectionTargetMs,
      packedRows: packedAttentionAvailable(), // forwardCached packs rows on this backend
      activeRequests: () => entry.inFlight,
      onForward: (rows, ms) => this.opts.onForward(rows, ms),
    });
    this.models.set(version, entry);
    this.opts.logger?.info({ version, dir, config: model.config, warmUpMs: Math.round(warmUpMs) }, 'model version loaded');
    while (this.models.size > this.opts.maxLoadedVersions) {
      const oldest = this.models.keys().next().value as string;
      this.evict(oldest);
    }
  }

  /** Marks a loaded version most recently used. */
  touch(version: string): void {
    const m = this.models.get(version);
    if (m) {
      this.models.delete(version);
      this.models.set(version, m);
    }
  }

  private evict(version: string): void {
    const m = this.models.get(version);
    if (!m) return;
    this.models.delete(version);
    m.evicted = true;
    this.opts.onEvict(version);
    if (m.inFlight === 0) this.disposeModel(m);
    this.opts.logger?.info({ version, inFlight: m.inFlight }, 'model version evicted (LRU cap)');
  }

  /** Closes a model's batcher and frees its tensors (those of a replaced backend instance are dropped). */
  disposeModel(m: LoadedModel): void {
    m.batcher.close(new EngineError(`model version ${m.version} unloaded`));
    if (m.generation === backendGeneration()) {
      m.model.dispose();
      return;
    }
    // tensors of a replaced backend instance: freeing them may fail, that instance is gone anyway
    for (const v of m.model.trainableVariables) {
      try {
        v.dispose();
      } catch {
        /* its heap went with the instance */
      }
    }
  }

  /**
   * Pins a loaded version for one request (`release` unpins).
   * @throws EngineError when it is not loaded.
   */
  pin(version: string): LoadedModel {
    const m = this.models.get(version);
    if (!m) throw new EngineError(`model version ${version} could not be kept loaded`);
    this.touch(version);
    m.inFlight++;
    return m;
  }

  /** Unpins a model; an evicted one is disposed with its last request. */
  release(m: LoadedModel): void {
    m.inFlight--;
    if (m.evicted && m.inFlight === 0) this.disposeModel(m);
  }

  /**
   * Unloads every version: disposed now when idle, else when their requests finish; with
   * `closeBusy`, the batchers of busy ones are closed at once with the error it makes.
   */
  unloadAll(closeBusy?: () => EngineError): void {
    for (const m of this.models.values()) {
      m.evicted = true;
      if (m.inFlight === 0) this.disposeModel(m);
      else if (closeBusy) m.batcher.close(closeBusy());
    }
    this.models.clear();
  }
}
