/**
 * Per-session KV caches of the builtin engine, an LRU with a cap: a session's next step reuses the
 * cache for the longest common prefix with its previous tokens (src/policy/builtin/generate.ts
 * `prefill`). A request takes its session's state out (`take`) and puts the new one back (`put`);
 * a session released while a request of it runs gets no cache back.
 */
import { backendGeneration } from '../../model/backend.js';
import { disposeCache } from '../../model/gpt-cached.js';
import type { RowCache } from '../../model/kv-cache.js';
import type { PromptFit } from '../../model/tokenizer.js';

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
   * Takes a session's state out for one request of `version` (null for no session, no state, or a
   * state of another version, whose cache is disposed). Every `take` is followed by one `put`.
   */
  take(sessionId: string | null, version: string): SessionState | null {
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
  put(sessionId: string | null, st: SessionState | null): void {
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
