/**
 * The builtin policy engine (shared/DESIGN.md §4): the GPT of src/model/gpt.ts
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
 * Recorded logprobs (act and reflect) are those of the sampling distribution itself, the behaviour
 * policy (src/model/sampling.ts samplingLogprobs): logits / temperature, restricted to the support
 * (allowed candidates' tokens, top-k, top-p), renormalised; training recomputes exactly that
 * (src/training/job.ts). `score()` stays the plain likelihood (temperature 1, no truncation).
 */
import * as tf from '@tensorflow/tfjs';
import { backendGeneration, initBackend, reinitBackend, type BackendPreference } from '../model/backend.js';
import { ForwardBatcher, type BatcherStats } from '../model/batcher.js';
import { loadCheckpoint } from '../model/checkpoint.js';
import type { GPT } from '../model/gpt.js';
import {
  cacheLength, disposeCache, forwardCached, truncateCache, type CachedRow, type CachedRowResult,
} from '../model/gpt-cached.js';
import type { RowCache } from '../model/kv-cache.js';
import {
  DEFAULT_LIMITS, drawIndex, rngFor, sampleIndex, samplingLogprobs, type GenerationLimits, type Rng,
} from '../model/sampling.js';
import { MULTI_TOKEN_BATCH_TOKENS } from '../model/batcher.js';
import {
  BOS, completeUtf8Prefix, decode, encodeCandidate, encodePrompt, UTF8_START, utf8Allowed, utf8Next, type EncodedPrompt,
} from '../model/tokenizer.js';
import {
  EngineError, EngineLimitError, type ActRequest, type EngineHealth, type EngineInfo, type Generation, type PolicyEngine, type PromptParts,
  type ReflectRequest, type SamplingParams, type ScoreRequest, type EngineObserver, type CompleteRequest, type Completion,
} from './engine.js';

export interface BuiltinEngineOptions {
  backend?: BackendPreference;
  /** Batching window in ms (default 2). */
  batchWindowMs?: number;
  /** Max rows per forward pass (default 32). */
  maxBatchSize?: number;
  /** Max model versions kept loaded (default 3, >= 1). */
  maxLoadedVersions?: number;
  /** Max sessions with a KV cache kept (LRU, default 256). */
  maxCachedSessions?: number;
  /** Length caps and stop tokens (defaults in src/model/sampling.ts). */
  limits?: Partial<GenerationLimits>;
  logger?: { info(o: object, msg?: string): void; warn(o: object, msg?: string): void; error?(o: object, msg?: string): void };
  /**
   * Most candidate tokens (each candidate's UTF-8 bytes + EOS, summed) of one call (default
   * `DEFAULT_MAX_CANDIDATE_TOKENS`); more is an `EngineLimitError` before any model work.
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

/**
 * Default cap on candidate tokens per call (LAMER_MAX_CANDIDATE_TOKENS): 512 actions of 511 bytes
 * fit. `act` walks the candidates' trie: measured on wasm on the 2-core VM, 512 candidates of 503
 * bytes sharing 500 took 3.3 s, 512 pseudo-random ones of 510 bytes 0.24 s.
 */
export const DEFAULT_MAX_CANDIDATE_TOKENS = 262144;

/**
 * Default cap on scored candidate tokens per call. Scoring runs in chunks of at most
 * `MULTI_TOKEN_BATCH_TOKENS` padded tokens, so memory per forward stays flat (all candidates in
 * one forward trapped the wasm heap); the cap bounds time: 64,128 tokens took 10.7 s on wasm on
 * the 2-core VM, 32,064 took 8.2 s.
 */
export const DEFAULT_MAX_SCORED_TOKENS = 65536;

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

interface LoadedModel {
  /** Backend generation the model's tensors live in (see BuiltinEngine.generation). */
  generation: number;
  version: string;
  dir: string;
  model: GPT;
  batcher: ForwardBatcher;
  inFlight: number;
  evicted: boolean;
}

interface SessionState {
  version: string;
  /** Backend generation of `cache`'s tensors; a cache of an earlier generation is dropped. */
  gen: number;
  /** Fit of the session's last prompt: its head and step count, and how many steps were dropped. */
  fit?: { head: string; steps: number; dropped: number };
  /** Tokens whose keys/values are in `cache`, `[cacheLength]`. */
  tokens: number[];
  cache: RowCache | null;
}

/**
 * Index of the first output token where any of `stops` (UTF-8) begins, or -1. Output tokens are
 * bytes (< 256) except special tokens, which end the scan.
 */
function firstStop(out: readonly number[], stops: readonly string[]): number {
  const pats = stops.filter((x) => x.length > 0).map((x) => Array.from(new TextEncoder().encode(x)));
  if (pats.length === 0) return -1;
  for (let i = 0; i < out.length && out[i]! < 256; i++) {
    for (const p of pats) {
      if (i + p.length > out.length) continue;
      let ok = true;
      for (let j = 0; j < p.length && ok; j++) ok = out[i + j] === p[j];
      if (ok) return i;
    }
  }
  return -1;
}

/** Length of the common prefix of two token arrays. */
function commonPrefix(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

export class BuiltinEngine implements PolicyEngine {
  private readonly models = new Map<string, LoadedModel>(); // LRU order: oldest first
  private readonly dirs = new Map<string, string>();
  private readonly loading = new Map<string, Promise<void>>();
  private readonly sessions = new Map<string, SessionState>(); // LRU order
  private readonly busy = new Map<string, number>();
  private readonly releasedWhileBusy = new Set<string>();
  private readonly limits: GenerationLimits;
  private readonly stopSet: Set<number>;
  private disposed = false;
  private observer: EngineObserver | null = null;
  private recovering: Promise<void> | null = null;
  private failure: string | null = null;
  private recoveries = 0;

  constructor(
    readonly backend: string,
    private readonly opts: Required<Pick<BuiltinEngineOptions, 'batchWindowMs' | 'maxBatchSize' | 'maxLoadedVersions' | 'maxCachedSessions'>> &
      Pick<BuiltinEngineOptions, 'logger' | 'limits' | 'maxCandidateTokens' | 'maxScoredTokens' | 'onFatal' | 'beforeForward'>,
  ) {
    this.limits = { ...DEFAULT_LIMITS, ...(opts.limits ?? {}) };
    this.stopSet = new Set(this.limits.stopTokens);
    if (opts.maxLoadedVersions < 1) throw new Error('maxLoadedVersions must be >= 1');
  }

  /** `recovering` while the backend is re-initialised after a fault, `failed` when that failed. */
  health(): EngineHealth {
    const state = this.failure !== null ? 'failed' : this.recovering ? 'recovering' : 'ok';
    return { state, recoveries: this.recoveries, ...(this.failure !== null ? { detail: this.failure } : {}) };
  }

  info(): EngineInfo {
    return { engine: 'builtin', backend: this.backend, loadedVersions: [...this.models.keys()] };
  }

  /** Batching counters per loaded version (for /metrics and benchmarks). */
  stats(): Record<string, BatcherStats> {
    const out: Record<string, BatcherStats> = {};
    for (const [v, m] of this.models) out[v] = { ...m.batcher.stats };
    return out;
  }

  /** Forward passes of every loaded version are reported to `observer` (rows, ms). */
  setObserver(observer: EngineObserver): void {
    this.observer = observer;
  }

  /** Requests queued in all loaded versions' batchers now. */
  queueDepth(): number {
    let n = 0;
    for (const m of this.models.values()) n += m.batcher.queuedRequests;
    return n;
  }

  isLoaded(version: string): boolean {
    return this.models.has(version);
  }

  async load(version: string, checkpointDir: string): Promise<void> {
    if (this.disposed) throw new EngineError('engine disposed');
    this.dirs.set(version, checkpointDir);
    await this.usable();
    const loaded = this.models.get(version);
    if (loaded) {
      this.touch(version);
      return;
    }
    let p = this.loading.get(version);
    if (!p) {
      p = this.doLoad(version, checkpointDir).finally(() => this.loading.delete(version));
      this.loading.set(version, p);
    }
    return p;
  }

  private async doLoad(version: string, dir: string): Promise<void> {
    let model: GPT;
    try {
      ({ model } = await loadCheckpoint(dir));
    } catch (err) {
      throw new EngineError(`cannot load model version ${version} from ${dir}: ${(err as Error).message}`, { cause: err });
    }
    const minBlock = Math.max(this.limits.maxActionTokens, this.limits.maxReflectionTokens) + 16;
    if (model.config.block_size < minBlock) {
      model.dispose();
      throw new EngineError(`model version ${version}: block_size ${model.config.block_size} too small for the generation caps (needs >= ${minBlock})`);
    }
    const entry: LoadedModel = { generation: backendGeneration(), version, dir, model, batcher: undefined as unknown as ForwardBatcher, inFlight: 0, evicted: false };
    entry.batcher = new ForwardBatcher((rows) => this.runForward(entry, rows), {
      windowMs: this.opts.batchWindowMs,
      maxBatchSize: this.opts.maxBatchSize,
      activeRequests: () => entry.inFlight,
      onForward: (rows, ms) => this.observer?.forward(rows, ms),
    });
    this.models.set(version, entry);
    this.opts.logger?.info({ version, dir, config: model.config }, 'model version loaded');
    while (this.models.size > this.opts.maxLoadedVersions) {
      const oldest = this.models.keys().next().value as string;
      this.evict(oldest);
    }
  }

  private touch(version: string): void {
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
    for (const [sid, st] of this.sessions) {
      if (st.version === version) {
        disposeCache(st.cache);
        this.sessions.delete(sid);
      }
    }
    if (m.inFlight === 0) this.disposeModel(m);
    this.opts.logger?.info({ version, inFlight: m.inFlight }, 'model version evicted (LRU cap)');
  }

  private disposeModel(m: LoadedModel): void {
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

  /** Waits for a running recovery; throws once the engine has failed for good. */
  private async usable(): Promise<void> {
    if (this.recovering) await this.recovering;
    if (this.failure !== null) throw new EngineError(`the model backend failed and could not be re-initialised: ${this.failure}`);
  }

  /**
   * One forward pass of `entry`'s model (the batcher's runner). A forward that throws a backend
   * fault (`isBackendFault`), or whose backend then fails a one-token probe, starts the recovery
   * (`recover`) and fails with an EngineError (503: nothing is recorded, the retry works); the
   * passes of an earlier backend generation fail the same way without running.
   */
  private runForward(entry: LoadedModel, rows: CachedRow[]): CachedRowResult[] {
    if (this.failure !== null) throw new EngineError('the model backend was re-initialised after a fault; retry the request');
    if (entry.generation !== backendGeneration()) {
      // a model of a replaced backend instance; when it is still the loaded one (the backend was
      // re-initialised by another engine of this process), reload
      if (this.models.get(entry.version) === entry) this.startRecovery('the tfjs backend was re-initialised');
      throw new EngineError('the model backend was re-initialised after a fault; retry the request');
    }
    try {
      this.opts.beforeForward?.(rows);
      return forwardCached(entry.model, rows);
    } catch (err) {
      if (err instanceof EngineError) throw err;
      if (!isBackendFault(err) && this.probe(entry)) throw err;
      const msg = err instanceof Error ? err.message : String(err);
      this.startRecovery(msg);
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

  private startRecovery(reason: string): void {
    if (this.recovering || this.failure !== null || this.disposed) return;
    const versions = [...this.models.keys()]; // LRU order: the most recent is loaded last
    const faulted = Math.min(backendGeneration(), ...[...this.models.values()].map((m) => m.generation));
    this.recovering = this.recover(versions, reason, faulted).finally(() => {
      this.recovering = null;
    });
  }

  /**
   * Recovery after a backend fault: every session cache and loaded model of the faulted backend
   * is dropped, the tfjs backend is re-initialised (`reinitBackend`) and the versions that were
   * loaded are loaded again from their folders. Requests wait for it (`usable`). When it fails,
   * the engine is `failed` for good and `onFatal` is called.
   */
  private async recover(versions: string[], reason: string, faulted: number): Promise<void> {
    const log = this.opts.logger;
    log?.warn({ reason, versions }, 'model backend fault: re-initialising the tfjs backend and reloading the loaded versions');
    for (const st of this.sessions.values()) {
      try {
        disposeCache(st.cache);
      } catch {
        /* tensors of the faulted backend */
      }
    }
    this.sessions.clear();
    for (const m of this.models.values()) {
      m.evicted = true;
      if (m.inFlight === 0) this.disposeModel(m);
      else m.batcher.close(new EngineError('the model backend was re-initialised after a fault; retry the request'));
    }
    this.models.clear();
    try {
      await reinitBackend(log, faulted);
      for (const v of versions) {
        const dir = this.dirs.get(v);
        if (dir) await this.doLoad(v, dir);
      }
      this.recoveries++;
      log?.info({ versions, recoveries: this.recoveries }, 'model backend recovered');
    } catch (err) {
      this.failure = `${reason}; re-initialising failed: ${err instanceof Error ? err.message : String(err)}`;
      (log?.error ?? log?.warn)?.call(log, { reason: this.failure }, 'model backend could not be re-initialised');
      this.opts.onFatal?.(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /** Pins a loaded model for one request (loading it again if it was evicted). */
  private async acquire(version: string): Promise<LoadedModel> {
    if (this.disposed) throw new EngineError('engine disposed');
    await this.usable();
    if (!this.models.has(version)) {
      const dir = this.dirs.get(version);
      if (!dir) throw new EngineError(`model version ${version} is not loaded`);
      await this.load(version, dir);
    }
    const m = this.models.get(version);
    if (!m) throw new EngineError(`model version ${version} could not be kept loaded`);
    this.touch(version);
    m.inFlight++;
    return m;
  }

  private releaseModel(m: LoadedModel): void {
    m.inFlight--;
    if (m.evicted && m.inFlight === 0) this.disposeModel(m);
  }

  // ---- per-session KV caches ----

  private takeSession(sessionId: string | null, version: string): SessionState | null {
    if (sessionId === null) return null;
    this.busy.set(sessionId, (this.busy.get(sessionId) ?? 0) + 1);
    const st = this.sessions.get(sessionId);
    if (!st) return null;
    this.sessions.delete(sessionId);
    if (st.version !== version) {
      disposeCache(st.cache);
      return null;
    }
    return st;
  }

  private putSession(sessionId: string | null, st: SessionState | null): void {
    if (sessionId === null) {
      if (st) disposeCache(st.cache);
      return;
    }
    const n = (this.busy.get(sessionId) ?? 1) - 1;
    if (n <= 0) this.busy.delete(sessionId);
    else this.busy.set(sessionId, n);
    const released = this.releasedWhileBusy.has(sessionId);
    if (released && n <= 0) this.releasedWhileBusy.delete(sessionId);
    const m = st ? this.models.get(st.version) : undefined;
    if (!st || released || this.disposed || !m || st.gen !== backendGeneration()) {
      if (st) disposeCache(st.cache);
      return;
    }
    // a view into a batch forward's keys/values would pin the whole batch while the session idles
    if (st.cache?.sharedKV && st.cache.sharedKV.batch > 1) st.cache.compact();
    const old = this.sessions.get(sessionId); // a concurrent request of the same session
    if (old) disposeCache(old.cache);
    this.sessions.delete(sessionId);
    this.sessions.set(sessionId, st);
    while (this.sessions.size > this.opts.maxCachedSessions) {
      const [sid, evicted] = this.sessions.entries().next().value as [string, SessionState];
      disposeCache(evicted.cache);
      this.sessions.delete(sid);
    }
  }

  release(sessionId: string): void {
    const st = this.sessions.get(sessionId);
    if (st) {
      disposeCache(st.cache);
      this.sessions.delete(sessionId);
    }
    if ((this.busy.get(sessionId) ?? 0) > 0) this.releasedWhileBusy.add(sessionId);
  }

  /**
   * Runs the prompt through the model reusing the session's cache for the common prefix.
   * @returns the cache now holding `ids` and the logprob row predicting the token after `ids`.
   */
  private async prefill(m: LoadedModel, st: SessionState | null, ids: number[]): Promise<{ cache: RowCache; last: Float32Array }> {
    let base: RowCache | null = null;
    let reuse = 0;
    if (st && st.cache) {
      // at least one new token is needed to get the next-token logprobs
      reuse = Math.min(commonPrefix(st.tokens, ids), ids.length - 1);
      if (reuse === cacheLength(st.cache)) {
        base = st.cache;
        st.cache = null;
      } else if (reuse > 0) {
        base = truncateCache(st.cache, reuse);
      }
      disposeCache(st.cache);
      st.cache = null;
      if (!base) reuse = 0;
    }
    try {
      const [r] = await m.batcher.submit([{ cache: base, tokens: ids.slice(reuse), allPositions: false, keepCache: true }]);
      return { cache: r.cache!, last: r.logprobs };
    } finally {
      disposeCache(base);
    }
  }

  /**
   * Fits the prompt to `block_size - reserve` tokens (oldest steps dropped first, tokenizer.ts).
   * Hysteresis, so that a long attempt does not recompute its whole prompt every step once it
   * overflows: when the prompt extends the session's previous one (same head, no fewer steps), at
   * least as many steps are dropped as last time; when it newly overflows, steps are dropped until
   * a quarter of the context is free, so the next steps append to a stable, cached prefix.
   */
  private fit(prompt: PromptParts, m: LoadedModel, reserve: number, prev?: SessionState['fit']): EncodedPrompt {
    const budget = m.model.config.block_size - reserve;
    const carry = prev && prev.head === prompt.head && prompt.steps.length >= prev.steps ? prev.dropped : 0;
    let enc = encodePrompt(prompt, budget, { minDroppedSteps: carry });
    if (enc.droppedSteps > carry) {
      const slack = encodePrompt(prompt, budget - Math.floor(m.model.config.block_size / 4), { minDroppedSteps: enc.droppedSteps });
      if (slack.headTruncatedBytes === 0 && slack.tailTruncatedBytes === 0) enc = encodePrompt(prompt, budget, { minDroppedSteps: slack.droppedSteps });
    }
    return enc;
  }

  /** Samples up to `maxNew` tokens after the prompt; updates the session's cache. */
  private async generate(m: LoadedModel, sessionId: string | null, prompt: PromptParts, maxNew: number, sampling: SamplingParams): Promise<Generation> {
    const rng = rngFor(sampling);
    const st = this.takeSession(sessionId, m.version);
    const enc = this.fit(prompt, m, maxNew, st?.fit);
    const fitted = { head: prompt.head, steps: prompt.steps.length, dropped: enc.droppedSteps };
    let cache: RowCache | null = null;
    const seq = enc.ids.slice();
    let out: number[] = [];
    let logprobs: number[] = [];
    // only tokens that keep the output valid UTF-8 are sampled (tokenizer.ts utf8Allowed)
    let u8 = UTF8_START;
    const V = m.model.config.vocab_size;
    try {
      const pre = await this.prefill(m, st, enc.ids);
      cache = pre.cache;
      let row = pre.last;
      for (;;) {
        const dist = samplingLogprobs(row, sampling, utf8Allowed(u8, V)); // the behaviour policy at this position
        const t = drawIndex(dist, sampling.temperature, rng);
        u8 = utf8Next(u8, t);
        out.push(t);
        logprobs.push(dist[t]);
        if (this.stopSet.has(t) || out.length >= maxNew || seq.length >= m.model.config.block_size) break;
        const [r] = await m.batcher.submit([{ cache, tokens: [t], allPositions: false, keepCache: true }]);
        disposeCache(cache);
        cache = r.cache;
        seq.push(t);
        row = r.logprobs;
      }
      this.putSession(sessionId, { version: m.version, gen: m.generation, tokens: seq, cache, fit: fitted });
      cache = null;
    } catch (err) {
      disposeCache(cache);
      this.putSession(sessionId, null);
      throw err instanceof EngineError ? err : new EngineError(`generation failed: ${(err as Error).message}`, { cause: err });
    }
    // a length cap reached inside a character: its leading bytes are not part of the answer
    const complete = completeUtf8Prefix(out);
    if (complete < out.length) {
      out = out.slice(0, complete);
      logprobs = logprobs.slice(0, complete);
    }
    const textIds = out.length > 0 && this.stopSet.has(out[out.length - 1]) ? out.slice(0, -1) : out;
    return {
      output: decode(textIds),
      promptTokenIds: enc.ids,
      promptText: enc.text,
      promptTruncatedChars: enc.truncatedChars,
      outputTokenIds: out,
      logprobs,
      droppedSteps: enc.droppedSteps,
      modelVersion: m.version,
    };
  }

  /**
   * Samples one of `candidates` token by token down their trie (see the module doc): at position j
   * the allowed tokens are the j-th tokens of the candidates agreeing with the output so far; one
   * allowed token is forced (logprob log 1 = 0, no forward pass); otherwise the next-token row is
   * computed (the forced tokens pending before it in the same forward) and a token is drawn from
   * `samplingLogprobs(row, sampling, allowed)`, whose value at the token is recorded. Ends when a
   * candidate is complete (its last token, EOS, was drawn); duplicates resolve to the lowest index.
   */
  private async generateConstrained(m: LoadedModel, sessionId: string | null, prompt: PromptParts, candidates: string[], sampling: SamplingParams): Promise<Generation> {
    const tokens = candidates.map(encodeCandidate);
    const reserve = this.candidateReserve(m, candidates);
    const rng: Rng = rngFor(sampling);
    const st = this.takeSession(sessionId, m.version);
    const enc = this.fit(prompt, m, reserve, st?.fit);
    let cache: RowCache | null = null;
    try {
      const pre = await this.prefill(m, st, enc.ids);
      cache = pre.cache;
      let row = pre.last;
      const seq = enc.ids.slice(); // tokens in the cache
      const out: number[] = [];
      const logprobs: number[] = [];
      let pending: number[] = [];
      let live = tokens.map((_, i) => i);
      let choice = -1;
      for (let j = 0; choice < 0; j++) {
        const allowed = [...new Set(live.filter((c) => tokens[c].length > j).map((c) => tokens[c][j]))];
        if (allowed.length === 0) throw new EngineError('constrained sampling left every candidate'); // unreachable: candidates end in EOS
        let t: number;
        let lp = 0;
        if (allowed.length === 1) {
          t = allowed[0];
        } else {
          if (pending.length > 0) {
            const [r] = await m.batcher.submit([{ cache, tokens: pending, allPositions: false, keepCache: true }]);
            disposeCache(cache);
            cache = r.cache;
            seq.push(...pending);
            pending = [];
            row = r.logprobs;
          }
          const dist = samplingLogprobs(row, sampling, allowed);
          t = drawIndex(dist, sampling.temperature, rng);
          lp = dist[t];
        }
        out.push(t);
        logprobs.push(lp);
        live = live.filter((c) => tokens[c][j] === t);
        choice = live.find((c) => tokens[c].length === j + 1) ?? -1;
        if (choice < 0) pending.push(t);
      }
      this.putSession(sessionId, { version: m.version, gen: m.generation, tokens: seq, cache, fit: { head: prompt.head, steps: prompt.steps.length, dropped: enc.droppedSteps } });
      cache = null;
      return {
        output: candidates[choice], promptTokenIds: enc.ids, promptText: enc.text, promptTruncatedChars: enc.truncatedChars, outputTokenIds: out, logprobs,
        droppedSteps: enc.droppedSteps, modelVersion: m.version, choiceIndex: choice,
      };
    } catch (err) {
      disposeCache(cache);
      this.putSession(sessionId, null);
      throw err instanceof EngineError ? err : new EngineError(`constrained sampling failed: ${(err as Error).message}`, { cause: err });
    }
  }

  /**
   * Exact per-token logprobs of each candidate continuation (bytes + EOS) after the prompt, from one
   * batched forward over the prompt's cache. Row j of candidate c predicts token j+1 of c.
   */
  private async scoreCandidates(
    m: LoadedModel,
    sessionId: string | null,
    prompt: PromptParts,
    candidates: string[],
  ): Promise<{ enc: EncodedPrompt; tokens: number[][]; logprobs: number[][] }> {
    const V = m.model.config.vocab_size;
    const reserve = this.candidateReserve(m, candidates, true);
    const tokens = candidates.map(encodeCandidate);
    const st = this.takeSession(sessionId, m.version);
    const enc = this.fit(prompt, m, reserve, st?.fit);
    let cache: RowCache | null = null;
    try {
      const pre = await this.prefill(m, st, enc.ids);
      cache = pre.cache;
      // Candidates longest first, in chunks of at most MULTI_TOKEN_BATCH_TOKENS padded tokens, so
      // that one forward's attention stays small whatever the number of candidates (all of them
      // in one forward ran the wasm heap out of bounds).
      const order = tokens.map((_, i) => i).filter((i) => tokens[i].length >= 2).sort((a, b) => tokens[b].length - tokens[a].length || a - b);
      const chunks: number[][] = [];
      for (const i of order) {
        const cur = chunks[chunks.length - 1];
        // rows are sorted longest first, so the chunk's first row sets its padded width
        if (cur && (cur.length + 1) * (tokens[cur[0]].length - 1) <= MULTI_TOKEN_BATCH_TOKENS) cur.push(i);
        else chunks.push([i]);
      }
      const results = new Map<number, Float32Array>();
      const done = await Promise.all(
        chunks.map((ids) => m.batcher.submit(ids.map((i) => ({ cache, tokens: tokens[i].slice(0, -1), allPositions: true, keepCache: false })))),
      );
      chunks.forEach((ids, k) => ids.forEach((i, r) => results.set(i, done[k][r].logprobs)));
      const logprobs = tokens.map((c, i) =>
        c.map((t, j) => (j === 0 ? pre.last[t] : results.get(i)![(j - 1) * V + t])),
      );
      this.putSession(sessionId, { version: m.version, gen: m.generation, tokens: enc.ids.slice(), cache, fit: { head: prompt.head, steps: prompt.steps.length, dropped: enc.droppedSteps } });
      cache = null;
      return { enc, tokens, logprobs };
    } catch (err) {
      disposeCache(cache);
      this.putSession(sessionId, null);
      throw err instanceof EngineError ? err : new EngineError(`scoring failed: ${(err as Error).message}`, { cause: err });
    }
  }

  /**
   * Tokens to keep free for the candidates after the prompt: the longest one's. Checked before any
   * model work (EngineLimitError, a 400 for the caller): each candidate (UTF-8 bytes + EOS) fits
   * half the context, and all of them together fit `maxCandidateTokens` (and `maxScoredTokens`
   * when every candidate is scored).
   */
  private candidateReserve(m: LoadedModel, candidates: string[], scored = false): number {
    const half = Math.floor(m.model.config.block_size / 2);
    const candidateCap = this.opts.maxCandidateTokens ?? DEFAULT_MAX_CANDIDATE_TOKENS;
    const scoredCap = this.opts.maxScoredTokens ?? DEFAULT_MAX_SCORED_TOKENS;
    const cap = scored ? Math.min(candidateCap, scoredCap) : candidateCap;
    let longest = 0;
    let total = 0;
    for (let i = 0; i < candidates.length; i++) {
      const n = Buffer.byteLength(candidates[i]!, 'utf8') + 1;
      if (n > half) {
        throw new EngineLimitError(`body/availableActions/${i}`, `is ${n} tokens (UTF-8 bytes + 1); model version ${m.version} takes candidates of at most ${half} tokens (half its context of ${m.model.config.block_size})`);
      }
      longest = Math.max(longest, n);
      total += n;
    }
    if (total > cap) {
      const which = cap === candidateCap ? 'LAMER_MAX_CANDIDATE_TOKENS' : 'when every candidate is scored';
      throw new EngineLimitError('body/availableActions', `total ${total} tokens (UTF-8 bytes + 1 per action); at most ${cap} per call (${which})`);
    }
    return longest;
  }

  async act(req: ActRequest): Promise<Generation> {
    const m = await this.acquire(req.modelVersion);
    try {
      const actions = req.availableActions;
      if (!actions || actions.length === 0) {
        return await this.generate(m, req.sessionId, req.prompt, this.limits.maxActionTokens, req.sampling);
      }
      return await this.generateConstrained(m, req.sessionId, req.prompt, actions, req.sampling);
    } finally {
      this.releaseModel(m);
    }
  }

  async reflect(req: ReflectRequest): Promise<Generation> {
    const m = await this.acquire(req.modelVersion);
    try {
      return await this.generate(m, req.sessionId, req.prompt, this.limits.maxReflectionTokens, req.sampling);
    } finally {
      this.releaseModel(m);
    }
  }

  /** Sum of logprobs of each candidate's tokens (its UTF-8 bytes followed by EOS) after the prompt. */
  async score(req: ScoreRequest): Promise<number[]> {
    if (req.candidates.length === 0) return [];
    const m = await this.acquire(req.modelVersion);
    try {
      const { logprobs } = await this.scoreCandidates(m, null, req.prompt, req.candidates);
      return logprobs.map((lp) => lp.reduce((a, b) => a + b, 0));
    } finally {
      this.releaseModel(m);
    }
  }

  /**
   * A sessionless completion (the OpenAI-compatible endpoint): with `choices`, the constrained
   * path of `act` with `availableActions` (same tokens, logprobs and choice); otherwise up to
   * `min(maxTokens, block_size / 2)` sampled tokens. Stop strings cut the output before their first
   * occurrence; the token ids and logprobs are cut at the same byte (tokens are bytes), so they
   * are exactly those of the returned text. finishReason 'stop' when EOS, a stop string or a
   * choice ended it, else 'length'.
   */
  async complete(req: CompleteRequest): Promise<Completion> {
    const m = await this.acquire(req.modelVersion);
    try {
      if (req.choices && req.choices.length > 0) {
        return { ...(await this.generateConstrained(m, null, req.prompt, req.choices, req.sampling)), finishReason: 'stop' };
      }
      const cap = Math.max(1, Math.min(Math.floor(req.maxTokens), Math.floor(m.model.config.block_size / 2)));
      const g = await this.generate(m, null, req.prompt, cap, req.sampling);
      const last = g.outputTokenIds[g.outputTokenIds.length - 1];
      let finishReason: Completion['finishReason'] = last !== undefined && this.stopSet.has(last) ? 'stop' : 'length';
      const cut = firstStop(g.outputTokenIds, req.stop ?? []);
      if (cut >= 0) {
        g.outputTokenIds = g.outputTokenIds.slice(0, cut);
        g.logprobs = g.logprobs.slice(0, cut);
        g.output = decode(g.outputTokenIds);
        finishReason = 'stop';
      }
      return { ...g, finishReason };
    } finally {
      this.releaseModel(m);
    }
  }

  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    for (const st of this.sessions.values()) disposeCache(st.cache);
    this.sessions.clear();
    for (const m of this.models.values()) {
      m.evicted = true;
      if (m.inFlight === 0) this.disposeModel(m);
    }
    this.models.clear();
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
