/**
 * Dynamic batching of concurrent forward requests into one model forward pass.
 *
 * Requests (each one or more `CachedRow`s: a prefill, one decode token, or a set of candidate
 * actions) are queued; a flush runs when `maxBatchSize` rows are waiting or `windowMs` after the
 * first queued request (`windowMs` 0: on the next macrotask, which still gathers every request
 * submitted in the same tick), or at once when every running request has a forward queued. One flush = one `forwardCached` call over the rows of the requests
 * it takes. Requests left over run in the next flush right away.
 *
 * Grouping: single-token decode requests are batched with each other; multi-token requests
 * (prefills, candidate scoring) are batched together only while padding stays cheap (padded tokens
 * <= 2x real tokens + 64, and <= MULTI_TOKEN_BATCH_TOKENS), so one long prefill never makes 32
 * decode rows pay for 1,000 padded query positions. A single request larger than `maxBatchSize`
 * rows runs alone.
 */
import type { CachedRow, CachedRowResult } from './gpt-cached.js';

/**
 * Cap on padded tokens when batching multi-token requests together. A prefill of N tokens is
 * already a batch of N positions for the matmuls, and its attention costs the same per row
 * batched or not, so batching long prefills only adds padding and memory traffic (measured: 32
 * prefills of ~450 tokens batched ran slower than one by one), while short ones (prompt deltas of
 * ~100 tokens, candidate actions) gain ~2x from sharing a pass (fixed per-op overhead).
 */
export const MULTI_TOKEN_BATCH_TOKENS = 2048;

export interface BatcherOptions {
  /** Milliseconds to wait for more requests after the first one queues. 0 = next macrotask. */
  windowMs: number;
  /** Max rows in one forward pass (>= 1). 1 disables batching across requests. */
  maxBatchSize: number;
  /**
   * Number of requests (act/reflect/score calls) now running on this model. When every one of
   * them has a forward queued, nobody else can join the batch, so it runs at once instead of
   * waiting out the window (a lone session never pays the window).
   */
  activeRequests?: () => number;
  /** Called after each forward pass with its number of rows and its duration in ms (for /metrics). */
  onForward?: (rows: number, ms: number) => void;
}

interface Pending {
  rows: CachedRow[];
  decode: boolean;
  tokens: number;
  maxTokens: number;
  resolve(r: CachedRowResult[]): void;
  reject(e: unknown): void;
}

export interface BatcherStats {
  /** Forward passes run. */
  forwards: number;
  /** Rows processed (sum of batch sizes). */
  rows: number;
  /** Largest batch seen. */
  maxRows: number;
  /** Milliseconds spent inside forward passes. */
  busyMs: number;
}

export class ForwardBatcher {
  private queue: Pending[] = [];
  private timer: NodeJS.Timeout | null = null;
  private immediate: NodeJS.Immediate | null = null;
  readonly stats: BatcherStats = { forwards: 0, rows: 0, maxRows: 0, busyMs: 0 };

  constructor(
    private readonly run: (rows: CachedRow[]) => CachedRowResult[],
    private readonly opts: BatcherOptions,
  ) {
    if (!(opts.maxBatchSize >= 1)) throw new Error(`maxBatchSize must be >= 1, got ${opts.maxBatchSize}`);
    if (!(opts.windowMs >= 0)) throw new Error(`windowMs must be >= 0, got ${opts.windowMs}`);
  }

  /** Queues rows for the next forward; resolves with one result per row, in order. */
  submit(rows: CachedRow[]): Promise<CachedRowResult[]> {
    if (rows.length === 0) return Promise.resolve([]);
    return new Promise((resolve, reject) => {
      const lens = rows.map((r) => r.tokens.length);
      this.queue.push({
        rows,
        decode: lens.every((n) => n === 1),
        tokens: lens.reduce((a, b) => a + b, 0),
        maxTokens: Math.max(...lens),
        resolve,
        reject,
      });
      const queuedRows = this.queue.reduce((s, p) => s + p.rows.length, 0);
      const everyoneQueued = this.opts.activeRequests !== undefined && this.queue.length >= this.opts.activeRequests();
      if (queuedRows >= this.opts.maxBatchSize || everyoneQueued) this.scheduleNow();
      else if (!this.timer && !this.immediate) {
        if (this.opts.windowMs > 0) this.timer = setTimeout(() => this.flush(), this.opts.windowMs);
        else this.scheduleNow();
      }
    });
  }

  private scheduleNow(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (!this.immediate) this.immediate = setImmediate(() => this.flush());
  }

  /** Takes the group of requests to run now: the oldest request plus compatible ones. */
  private takeGroup(): Pending[] {
    const first = this.queue[0];
    const group = [first];
    let rows = first.rows.length;
    let tokens = first.tokens;
    let maxTok = first.maxTokens;
    const rest: Pending[] = [];
    for (let i = 1; i < this.queue.length; i++) {
      const p = this.queue[i];
      let fits = rows + p.rows.length <= this.opts.maxBatchSize && p.decode === first.decode;
      if (fits && !first.decode) {
        const newMax = Math.max(maxTok, p.maxTokens);
        const padded = (rows + p.rows.length) * newMax;
        fits = padded <= 2 * (tokens + p.tokens) + 64 && padded <= MULTI_TOKEN_BATCH_TOKENS;
      }
      if (fits) {
        group.push(p);
        rows += p.rows.length;
        tokens += p.tokens;
        maxTok = Math.max(maxTok, p.maxTokens);
      } else rest.push(p);
    }
    this.queue = rest;
    return group;
  }

  private flush(): void {
    this.timer = null;
    this.immediate = null;
    if (this.queue.length === 0) return;
    const group = this.takeGroup();
    const rows = group.flatMap((p) => p.rows);
    const t0 = performance.now();
    try {
      const results = this.run(rows);
      const ms = performance.now() - t0;
      this.stats.busyMs += ms;
      try {
        this.opts.onForward?.(rows.length, ms);
      } catch {
        /* an observer's failure never fails the forward */
      }
      this.stats.forwards++;
      this.stats.rows += rows.length;
      this.stats.maxRows = Math.max(this.stats.maxRows, rows.length);
      let o = 0;
      for (const p of group) {
        p.resolve(results.slice(o, o + p.rows.length));
        o += p.rows.length;
      }
    } catch (err) {
      for (const p of group) p.reject(err);
    }
    // Leftovers (and requests queued while this forward ran) go next, after the continuations of
    // the requests just resolved have had a chance to queue their next rows (microtasks first).
    if (this.queue.length > 0) this.scheduleNow();
  }

  /** Requests queued now, waiting for a forward pass. */
  get queuedRequests(): number {
    return this.queue.length;
  }

  /** Rejects everything queued (engine shutdown). */
  close(err: Error): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.immediate) clearImmediate(this.immediate);
    this.timer = null;
    this.immediate = null;
    for (const p of this.queue) p.reject(err);
    this.queue = [];
  }
}
