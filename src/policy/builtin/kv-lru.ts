/**
 * Per-session KV caches of the builtin engine, an LRU with a cap: a session's next step reuses the
 * cache for the longest common prefix with its previous tokens (`SessionCache.prefill`).
 *
 * Ownership: the cache tensors of a session have one owner at a time. Between requests it is the
 * LRU (`SessionCaches`). A request opens a `SessionCache` (`SessionCaches.open`), which takes the
 * session's state out of the LRU and alone owns the tensors while the request runs (`prefill`,
 * `extend`); it ends with `commit` (the state goes back to the LRU as the most recent) or
 * `dispose` (the tensors are freed and the session keeps no cache). A session released while a
 * request of it runs gets no cache back.
 */
import { backendGeneration } from '../../model/backend.js';
import { cacheLength, disposeCache, truncateCache } from '../../model/gpt-cached.js';
import type { RowCache } from '../../model/kv-cache.js';
import type { PromptFit } from '../../model/tokenizer.js';
import type { LoadedModel } from './versions.js';

/** Fit of a session's last prompt (defined with `fitPrompt` in the tokenizer). */
export type { PromptFit };

export interface SessionState {
  version: string;
  /** Backend generation of `cache`'s tensors; a cache of an earlier generation is dropped. */
  gen: number;
  fit?: PromptFit;
  /** Tokens whose keys/values are in `cache`, `[cacheLength]`. */
  tokens: number[];
  cache: RowCache | null;
}

/** Length of the common prefix of two token arrays. */
export function commonPrefix(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/**
 * One request's KV cache of a session (or of no session) on a pinned model: the only holder of its
 * tensors from `SessionCaches.open` until `commit` or `dispose`. Tokens held: `tokens`.
 */
export class SessionCache {
  private cache: RowCache | null = null;
  private held: number[] = [];
  private closed = false;

  /**
   * @param prior the session's state taken out of the LRU (its cache is now owned here), or null.
   * @param done gives the state back to the LRU (null: the session keeps no cache); called once.
   */
  constructor(
    private readonly m: LoadedModel,
    private prior: SessionState | null,
    private readonly done: (st: SessionState | null) => void,
  ) {}

  /** How the session's previous prompt was fitted (the tokenizer's hysteresis), if known. */
  get priorFit(): PromptFit | undefined {
    return this.prior?.fit;
  }

  /** Tokens whose keys/values the cache holds, `[length]`. */
  get tokens(): readonly number[] {
    return this.held;
  }

  /**
   * The cache itself, lent for forwards that do not keep a cache (`keepCache: false`, e.g. scoring
   * candidates against the prompt); the caller never disposes or keeps it.
   */
  get rows(): RowCache | null {
    return this.cache;
  }

  /**
   * Runs `ids` through the model, reusing the prior state's cache for the longest common prefix
   * (at least the last token is recomputed: its logprobs are the answer). The prior cache is
   * consumed: kept as the base when all of it is reused, truncated when part is, else disposed.
   * @returns the logprob row `[vocab]` predicting the token after `ids`; the cache then holds `ids`.
   */
  async prefill(ids: number[]): Promise<Float32Array> {
    const st = this.prior;
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
      const [r] = await this.m.batcher.submit([{ cache: base, tokens: ids.slice(reuse), allPositions: false, keepCache: true }]);
      disposeCache(this.cache);
      this.cache = r.cache!;
      this.held = ids.slice();
      return r.logprobs;
    } finally {
      disposeCache(base);
    }
  }

  /**
   * Appends `tokens` (>= 1) to the cache in one forward.
   * @returns the logprob row `[vocab]` predicting the token after them.
   */
  async extend(tokens: number[]): Promise<Float32Array> {
    const [r] = await this.m.batcher.submit([{ cache: this.cache, tokens, allPositions: false, keepCache: true }]);
    disposeCache(this.cache);
    this.cache = r.cache;
    this.held.push(...tokens);
    return r.logprobs;
  }

  /** Gives the cache back to the LRU as the session's state (prompt fitted as `fit`); ends this object. */
  commit(fit: PromptFit): void {
    if (this.closed) return;
    this.closed = true;
    const st: SessionState = { version: this.m.version, gen: this.m.generation, tokens: this.held, cache: this.cache, fit };
    this.cache = null;
    this.done(st);
  }

  /** Frees the cache (and what is left of the prior one); the session keeps no cache. No-op after `commit`. */
  dispose(): void {
    if (this.closed) return;
    this.closed = true;
    disposeCache(this.cache);
    this.cache = null;
    if (this.prior) disposeCache(this.prior.cache);
    this.done(null);
  }
}

export class SessionCaches {
  /** LRU order: oldest first. */
  private readonly sessions = new Map<string, SessionState>();
  private readonly busy = new Map<string, number>();
  private readonly releasedWhileBusy = new Set<string>();

  /**
   * @param maxCachedSessions most sessions with a cache kept.
   * @param accepts whether a state of this version may be kept now (its version still loaded,
   *   the engine not disposed).
   */
  constructor(
    private readonly maxCachedSessions: number,
    private readonly accepts: (version: string) => boolean,
  ) {}

  /**
   * Opens one request's cache of session `sessionId` (null: no session) on the pinned model `m`:
   * takes the session's state out of the LRU; the request ends it with `commit` or `dispose`.
   */
  open(sessionId: string | null, m: LoadedModel): SessionCache {
    const st = this.take(sessionId, m.version);
    return new SessionCache(m, st, (next) => this.put(sessionId, next));
  }

  /**
   * Takes a session's state out for one request of `version` (null for no session, no state, or a
   * state of another version, whose cache is disposed). Every `take` is followed by one `put`.
   */
  private take(sessionId: string | null, version: string): SessionState | null {
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

  /**
   * Puts a session's state back after a request (null after a failure), as the most recent; it is
   * disposed instead when the session was released meanwhile, its version is gone, or its tensors
   * belong to a replaced backend. The oldest sessions beyond the cap lose their caches.
   */
  private put(sessionId: string | null, st: SessionState | null): void {
    if (sessionId === null) {
      if (st) disposeCache(st.cache);
      return;
    }
    const n = (this.busy.get(sessionId) ?? 1) - 1;
    if (n <= 0) this.busy.delete(sessionId);
    else this.busy.set(sessionId, n);
    const released = this.releasedWhileBusy.has(sessionId);
    if (released && n <= 0) this.releasedWhileBusy.delete(sessionId);
    if (!st || released || !this.accepts(st.version) || st.gen !== backendGeneration()) {
      if (st) disposeCache(st.cache);
      return;
    }
    // a view into a batch forward's keys/values would pin the whole batch while the session idles
    if (st.cache?.sharedKV && st.cache.sharedKV.batch > 1) st.cache.compact();
    const old = this.sessions.get(sessionId); // a concurrent request of the same session
    if (old) disposeCache(old.cache);
    this.sessions.delete(sessionId);
    this.sessions.set(sessionId, st);
    while (this.sessions.size > this.maxCachedSessions) {
      const [sid, evicted] = this.sessions.entries().next().value as [string, SessionState];
      disposeCache(evicted.cache);
      this.sessions.delete(sid);
    }
  }

  /** Sessions holding a cache now. */
  get size(): number {
    return this.sessions.size;
  }

  /** Drops a session's cache; a request of it running now will not put one back. */
  release(sessionId: string): void {
    const st = this.sessions.get(sessionId);
    if (st) {
      disposeCache(st.cache);
      this.sessions.delete(sessionId);
    }
    if ((this.busy.get(sessionId) ?? 0) > 0) this.releasedWhileBusy.add(sessionId);
  }

  /** Drops the caches of every session of `version`. */
  dropVersion(version: string): void {
    for (const [sid, st] of this.sessions) {
      if (st.version === version) {
        disposeCache(st.cache);
        this.sessions.delete(sid);
      }
    }
  }

  /** Drops every cache; with `tolerant`, a cache whose disposal fails (a faulted backend) is skipped. */
  clear(tolerant = false): void {
    for (const st of this.sessions.values()) {
      try {
        disposeCache(st.cache);
      } catch (err) {
        if (!tolerant) throw err;
      }
    }
    this.sessions.clear();
  }
}
