/**
 * The builtin policy engine (docs/architecture.md "The policy engine and the model"): the GPT of src/model/gpt.ts
 * behind the `PolicyEngine` interface, with
 * - byte-level prompts fitted to the context by dropping the oldest steps (src/model/tokenizer.ts);
 * - sampling with temperature / top-p / top-k / seed, stop tokens and separate length caps for
 *   actions and reflections (src/model/sampling.ts);
 * - `availableActions`: the answer is sampled token by token, constrained to the candidates (their
 *   bytes + EOS) by walking their trie: at each position the allowed tokens are the next tokens of
 *   the candidates that agree so far (src/model/sampling.ts candidateSupport), and the same
 *   temperature / top-k / top-p apply within that set; a position with one allowed token is forced
 *   (logprob 0) and needs no forward pass of its own;
 * - dynamic batching of concurrent steps into one forward pass (src/model/batcher.ts);
 * - per-session KV caches: a session's next step reuses the cache for the longest common prefix
 *   with its previous tokens (truncating the cache to it) and only runs the new tokens;
 * - loaded versions kept in an LRU with a cap; an evicted version is disposed only once its
 *   in-flight requests finish, and is reloaded transparently from its folder when a session pinned
 *   to it steps again.
 *
 * Its parts live in src/policy/builtin/: `versions.ts` (the loaded-version LRU), `kv-lru.ts` (the
 * session KV caches; one `SessionCache` owns a session's cache while a request runs), `generate.ts` (prompt fit, prefill, the sampling loop), `candidates.ts`
 * (trie sampling and scoring of candidates), `recovery.ts` (backend-fault recovery); this file
 * composes them behind `PolicyEngine`.
 *
 * Recorded logprobs (act and reflect) are those of the sampling distribution itself, the behaviour
 * policy (src/model/sampling.ts samplingLogprobs): logits / temperature, restricted to the support
 * (allowed candidates' tokens, top-k, top-p), renormalised; training recomputes exactly that
 * (src/training/data/behaviour.ts). `score()` stays the plain likelihood (temperature 1, no truncation).
 */
import * as tf from '@tensorflow/tfjs';
import { initBackend, type BackendPreference } from '../model/backend.js';
import type { BatcherStats } from '../model/batcher.js';
import type { CachedRow } from '../model/gpt-cached.js';
import { DEFAULT_LIMITS, type GenerationLimits } from '../model/sampling.js';
import {
  EngineError, EngineLimitError, type ActRequest, type CompleteRequest, type Completion, type EngineHealth, type EngineInfo,
  type EngineObserver, type Generation, type PolicyEngine, type ReflectRequest, type ReplayAnswer, type ReplayRequest, type ScoreRequest,
} from './engine.js';
import { sampleCandidate, scoreCandidates, type CandidateCaps } from './builtin/candidates.js';
import { completion, generate, type GenContext } from './builtin/generate.js';
import { SessionCaches } from './builtin/kv-lru.js';
import { replayCall } from './builtin/replay.js';
import { BackendRecovery } from './builtin/recovery.js';
import { VersionCache, type LoadedModel } from './builtin/versions.js';

export interface BuiltinEngineOptions {
  backend?: BackendPreference;
  /** Batching window in ms (default 2). */
  batchWindowMs?: number;
  /** Max rows per forward pass (default 32). */
  maxBatchSize?: number;
  /**
   * Most padded tokens of one synchronous forward section; the event loop gets turns between
   * sections (default DEFAULT_FORWARD_SECTION_TOKENS, src/model/forward-sections.ts).
   */
  forwardSectionTokens?: number;
  /**
   * Target wall time of one forward section, ms; 0 or absent: the token bound alone (the batcher's
   * `sectionTargetMs`, src/model/batcher.ts).
   */
  forwardSectionMs?: number;
  /** Max model versions kept loaded (default 3, >= 1). */
  maxLoadedVersions?: number;
  /** Max sessions with a KV cache kept (LRU, default 256). */
  maxCachedSessions?: number;
  /** Length caps and stop tokens (defaults in src/model/sampling.ts). */
  limits?: Partial<GenerationLimits>;
  logger?: { info(o: object, msg?: string): void; warn(o: object, msg?: string): void; error?(o: object, msg?: string): void };
  /**
   * Most candidate tokens (each candidate's UTF-8 bytes + EOS, summed) of one call (default
   * `DEFAULT_MAX_CANDIDATE_TOKENS`, src/policy/builtin/candidates.ts); more is an `EngineLimitError` before any model work.
   */
  maxCandidateTokens?: number;
  /**
   * Most candidate tokens of one call that scores every candidate (`score()`, completions with
   * choices), which runs each of their tokens through the model (default
   * `DEFAULT_MAX_SCORED_TOKENS`); `act` walks the candidates' trie instead and is far cheaper.
   */
  maxScoredTokens?: number;
  /**
   * Called when the backend faulted and could not be re-initialised: the engine answers nothing
   * any more (`health().state` 'failed'); the server exits so that its supervisor restarts it.
   */
  onFatal?: (err: Error) => void;
  /** Test hook: runs before every forward pass with its rows; what it throws is a backend fault. */
  beforeForward?: (rows: CachedRow[]) => void;
}

export class BuiltinEngine implements PolicyEngine {
  private readonly versions: VersionCache;
  private readonly sessions: SessionCaches;
  private readonly recovery: BackendRecovery;
  private readonly limits: GenerationLimits;
  private readonly ctx: GenContext;
  private readonly caps: CandidateCaps;
  private disposed = false;
  private observer: EngineObserver | null = null;

  constructor(
    readonly backend: string,
    opts: Required<Pick<BuiltinEngineOptions, 'batchWindowMs' | 'maxBatchSize' | 'maxLoadedVersions' | 'maxCachedSessions'>> &
      Pick<BuiltinEngineOptions, 'forwardSectionTokens' | 'forwardSectionMs' | 'logger' | 'limits' | 'maxCandidateTokens' | 'maxScoredTokens' | 'onFatal' | 'beforeForward'>,
  ) {
    this.limits = { ...DEFAULT_LIMITS, ...(opts.limits ?? {}) };
    this.versions = new VersionCache({
      maxLoadedVersions: opts.maxLoadedVersions,
      batchWindowMs: opts.batchWindowMs,
      maxBatchSize: opts.maxBatchSize,
      maxSectionTokens: opts.forwardSectionTokens,
      sectionTargetMs: opts.forwardSectionMs,
      minBlockSize: Math.max(this.limits.maxActionTokens, this.limits.maxReflectionTokens) + 16,
      runForward: (entry, rows) => this.recovery.runForward(entry, rows),
      onForward: (rows, ms) => this.observer?.forward(rows, ms),
      onEvict: (version) => this.sessions.dropVersion(version),
      logger: opts.logger,
    });
    this.sessions = new SessionCaches(opts.maxCachedSessions, (version) => !this.disposed && this.versions.has(version));
    this.recovery = new BackendRecovery({
      versions: this.versions,
      sessions: this.sessions,
      isDisposed: () => this.disposed,
      logger: opts.logger,
      onFatal: opts.onFatal,
      beforeForward: opts.beforeForward,
    });
    this.ctx = { sessions: this.sessions, stopSet: new Set(this.limits.stopTokens) };
    this.caps = { maxCandidateTokens: opts.maxCandidateTokens, maxScoredTokens: opts.maxScoredTokens };
  }

  /** `recovering` while the backend is re-initialised after a fault, `failed` when that failed. */
  health(): EngineHealth {
    return this.recovery.health();
  }

  info(): EngineInfo {
    return { engine: 'builtin', backend: this.backend, loadedVersions: this.versions.loaded().map((m) => m.version) };
  }

  /** Batching counters per loaded version (for /metrics and benchmarks). */
  stats(): Record<string, BatcherStats> {
    const out: Record<string, BatcherStats> = {};
    for (const m of this.versions.loaded()) out[m.version] = { ...m.batcher.stats };
    return out;
  }

  /** Forward passes of every loaded version are reported to `observer` (rows, ms). */
  setObserver(observer: EngineObserver): void {
    this.observer = observer;
  }

  /** Requests queued in all loaded versions' batchers now. */
  queueDepth(): number {
    let n = 0;
    for (const m of this.versions.loaded()) n += m.batcher.queuedRequests;
    return n;
  }

  isLoaded(version: string): boolean {
    return this.versions.has(version);
  }

  async load(version: string, checkpointDir: string): Promise<void> {
    if (this.disposed) throw new EngineError('engine disposed');
    this.versions.setDir(version, checkpointDir);
    await this.recovery.usable();
    return this.versions.loadOrJoin(version, checkpointDir);
  }

  /** Pins a loaded model for one request (loading it again if it was evicted). */
  private async acquire(version: string): Promise<LoadedModel> {
    if (this.disposed) throw new EngineError('engine disposed');
    await this.recovery.usable();
    if (!this.versions.has(version)) {
      const dir = this.versions.dirOf(version);
      if (!dir) throw new EngineError(`model version ${version} is not loaded`);
      await this.load(version, dir);
    }
    return this.versions.pin(version);
  }

  /** Runs `fn` with `version` pinned. */
  private async withModel<T>(version: string, fn: (m: LoadedModel) => Promise<T>): Promise<T> {
    const m = await this.acquire(version);
    try {
      return await fn(m);
    } finally {
      this.versions.release(m);
    }
  }

  release(sessionId: string): void {
    this.sessions.release(sessionId);
  }

  /**
   * Marks the loaded ones among `versions` most recently used, in that order (the last one most
   * recent); the others are ignored. The serving pool applies its global order with this, so that
   * every worker evicts the same version.
   */
  touchVersions(versions: readonly string[]): void {
    for (const v of versions) this.versions.touch(v);
  }

  /** Sessions holding a KV cache now (for tests and the serving pool's statistics). */
  cachedSessions(): number {
    return this.sessions.size;
  }

  async act(req: ActRequest): Promise<Generation> {
    return this.withModel(req.modelVersion, (m) => {
      const actions = req.availableActions;
      if (!actions || actions.length === 0) {
        return generate(this.ctx, m, req.sessionId, req.prompt, this.limits.maxActionTokens, req.sampling);
      }
      return sampleCandidate(this.ctx, m, this.caps, req.sessionId, req.prompt, actions, req.sampling);
    });
  }

  async reflect(req: ReflectRequest): Promise<Generation> {
    return this.withModel(req.modelVersion, (m) => generate(this.ctx, m, req.sessionId, req.prompt, this.limits.maxReflectionTokens, req.sampling));
  }

  /** Sum of logprobs of each candidate's tokens (its UTF-8 bytes followed by EOS) after the prompt. */
  async score(req: ScoreRequest): Promise<number[]> {
    if (req.candidates.length === 0) return [];
    return this.withModel(req.modelVersion, async (m) => {
      const { logprobs } = await scoreCandidates(this.ctx, m, this.caps, null, req.prompt, req.candidates);
      return logprobs.map((lp) => lp.reduce((a, b) => a + b, 0));
    });
  }

  /**
   * A sessionless completion (the OpenAI-compatible endpoint): with `choices`, the constrained
   * path of `act` with `availableActions` (same tokens, logprobs and choice); otherwise up to
   * `min(maxTokens, block_size / 2)` sampled tokens; a `maxTokens` over `block_size / 2` that the
   * request set (`maxTokensField`) is an EngineLimitError naming that field, before any model work.
   * Stop strings cut the output before their first
   * occurrence; the token ids and logprobs are cut at the token where it begins (for the byte
   * tokenizer the same byte), so they are exactly those of the returned text. finishReason 'stop' when EOS, a stop string or a
   * choice ended it, else 'length'.
   */
  async complete(req: CompleteRequest): Promise<Completion> {
    return this.withModel(req.modelVersion, async (m): Promise<Completion> => {
      if (req.choices && req.choices.length > 0) {
        return { ...(await sampleCandidate(this.ctx, m, this.caps, null, req.prompt, req.choices, req.sampling)), finishReason: 'stop' };
      }
      const half = Math.floor(m.model.config.block_size / 2);
      if (req.maxTokensField !== undefined && req.maxTokens > half) {
        const context = m.model.config.block_size;
        const why = `model version ${m.version} generates at most ${half} tokens (half its context of ${context})`;
        throw new EngineLimitError(req.maxTokensField, `is ${req.maxTokens}: ${why}; send at most ${half}`);
      }
      const cap = Math.max(1, Math.min(Math.floor(req.maxTokens), half));
      return completion(this.ctx, m, await generate(this.ctx, m, null, req.prompt, cap, req.sampling), req.stop ?? []);
    });
  }

  /**
   * One recorded call replayed (src/policy/builtin/replay.ts): the version's own answer to the
   * prompt and the logprob of each recorded answer token; no session's cache is touched.
   */
  async replay(req: ReplayRequest): Promise<ReplayAnswer> {
    return this.withModel(req.modelVersion, (m) => replayCall(this.ctx, m, this.caps, this.limits.maxActionTokens, req));
  }

  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    this.sessions.clear();
    this.versions.unloadAll();
  }

  /** Tensors currently held by the tfjs engine (for tests and /metrics). */
  static numTensors(): number {
    return tf.memory().numTensors;
  }
}

/**
 * Creates the builtin engine: selects the tfjs backend (`auto` tries
 * tfjs-node-gpu, tfjs-node, wasm, cpu) and returns an engine with no version loaded yet; the
 * server calls `load('base', 'models/base')` (or the active version) next.
 */
export async function createBuiltinEngine(opts: BuiltinEngineOptions = {}): Promise<PolicyEngine> {
  return createBuiltinEngineInstance(opts);
}

/** Same as `createBuiltinEngine`, typed as the class (stats(), numTensors()) for tests and benches. */
export async function createBuiltinEngineInstance(opts: BuiltinEngineOptions = {}): Promise<BuiltinEngine> {
  const backend = await initBackend(opts.backend ?? 'auto', opts.logger);
  return new BuiltinEngine(backend, {
    batchWindowMs: opts.batchWindowMs ?? 2,
    maxBatchSize: opts.maxBatchSize ?? 32,
    forwardSectionTokens: opts.forwardSectionTokens,
    forwardSectionMs: opts.forwardSectionMs,
    maxLoadedVersions: opts.maxLoadedVersions ?? 3,
    maxCachedSessions: opts.maxCachedSessions ?? 256,
    limits: opts.limits,
    logger: opts.logger,
    maxCandidateTokens: opts.maxCandidateTokens,
    maxScoredTokens: opts.maxScoredTokens,
    onFatal: opts.onFatal,
    beforeForward: opts.beforeForward,
  });
}
