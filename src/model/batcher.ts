/**
 * Dynamic batching of concurrent forward requests into forward passes, each one a bounded
 * synchronous section of the event loop.
 *
 * Requests (each one or more `CachedRow`s: a prefill, one decode token, or a set of candidate
 * actions) are queued; a flush runs when `maxBatchSize` rows are waiting or `windowMs` after the
 * first queued request (`windowMs` 0: on the next macrotask, which still gathers every request
 * submitted in the same tick), or at once when every running request has a forward queued. One
 * flush runs the rows of the group of requests it takes. Requests left over run in the next
 * flush right away.
 *
 * Grouping depends on what a forward costs (`packedRows`):
 * - packed forwards (src/model/gpt-cached.ts on wasm and cpu) cost their real tokens, whatever the
 *   mix of lengths: requests of every kind (prefills, decode steps, candidate scoring) are grouped
 *   in queue order up to `maxBatchSize` rows and MULTI_TOKEN_BATCH_TOKENS tokens, and a section
 *   holds at most `maxSectionTokens` real tokens;
 * - padded forwards cost rows x the longest row's new tokens: single-token decode requests are
 *   batched with each other; multi-token requests (prefills, candidate scoring) are batched
 *   together only while padding stays cheap (padded tokens <= 2x real tokens + 64, and <=
 *   MULTI_TOKEN_BATCH_TOKENS), so one long prefill never makes 32 decode rows pay for 1,000 padded
 *   query positions; no group of several requests goes over `maxSectionTokens` padded tokens.
 * A single request larger than `maxBatchSize` rows or `maxSectionTokens` runs alone.
 *
 * A group runs in forward sections of at most `maxSectionTokens` tokens, counted as the forward
 * costs them, with event-loop turns between sections (a time target, `sectionTargetMs`, shortens
 * them as each token gets slower): src/model/forward-sections.ts, whose module comment says why.
 */
import type { CachedRow, CachedRowResult } from './gpt-cached.js';
import {
  DEFAULT_FORWARD_SECTION_TOKENS, SECTION_COST_EMA, concatRows, disposeQuietly, partRow, planSections, sectionCost, timedSectionBound,
  yieldTurns, yieldTurnsAfter, type Carried,
} from './forward-sections.js';

export {
  DEFAULT_FORWARD_SECTION_MS, DEFAULT_FORWARD_SECTION_TOKENS, MAX_YIELD_TURNS, MIN_TIMED_SECTION_TOKENS, SECTION_COST_EMA, YIELD_TURN_MS,
  planSections, sectionCost, timedSectionBound, yieldTurnsAfter, type RowPart,
} from './forward-sections.js';

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
   * Most padded new tokens (rows x the longest row's new tokens) in one forward section (>= 1;
   * default DEFAULT_FORWARD_SECTION_TOKENS): the bound on how long one forward holds the event loop.
   */
  maxSectionTokens?: number;
  /**
   * Target wall time of one forward section, ms (> 0), or absent / 0 for the token bound alone: a
   * section then holds at most `targetMs / c` tokens, c being the running average (weight
   * SECTION_COST_EMA) of the milliseconds per counted token of the sections so far, and never
   * fewer than MIN_TIMED_SECTION_TOKENS nor more than `maxSectionTokens` (`timedSectionBound`).
   * Wall time, not CPU time: on a machine whose cores other processes share, a token costs more
   * wall time, sections get shorter, and the event loop still turns about every `targetMs`.
   */
  sectionTargetMs?: number;
  /** Clock for the sections' durations, ms (default `performance.now`; tests drive it). */
  now?: () => number;
  /**
   * Number of requests (act/reflect/score calls) now running on this model. When every one of
   * them has a forward queued, nobody else can join the batch, so it runs at once instead of
   * waiting out the window (a lone session never pays the window).
   */
  activeRequests?: () => number;
  /** Called after each forward section with its number of rows and its duration in ms (for /metrics). */
  onForward?: (rows: number, ms: number) => void;
  /**
   * true: `run` packs rows (a forward costs the sum of their new tokens, src/model/gpt-cached.ts
   * `forwardPacked`); false or absent: it pads them (rows x the longest). Sets the grouping and the
   * section bound's count (see the module comment).
   */
  packedRows?: boolean;
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
  /** Forward passes (sections) run. */
  forwards: number;
  /** Rows processed (sum of section sizes; a row split along its tokens counts once per part). */
  rows: number;
  /** Largest section seen, in rows. */
  maxRows: number;
  /** Milliseconds spent inside forward passes. */
  busyMs: number;
}

export class ForwardBatcher {
  private queue: Pending[] = [];
  private timer: NodeJS.Timeout | null = null;
  private immediate: NodeJS.Immediate | null = null;
  /** A group is running (its sections and the turns after them); flushes wait for it. */
  private running = false;
  /** Incremented by `close`: a group running then stops before its next section. */
  private closes = 0;
  private closeError: Error | null = null;
  private readonly sectionTokens: number;
  private readonly targetMs: number;
  private readonly now: () => number;
  /** Running average of the milliseconds per counted token of the sections run (null before the first). */
  private msPerToken: number | null = null;
  readonly stats: BatcherStats = { forwards: 0, rows: 0, maxRows: 0, busyMs: 0 };

  /**
   * @param run one synchronous forward pass of the given rows (src/model/gpt-cached.ts `forwardCached`
   *   through the engine): one result per row, in order.
   * @throws Error when an option is out of range.
   */
  constructor(
    private readonly run: (rows: CachedRow[]) => CachedRowResult[],
    private readonly opts: BatcherOptions,
  ) {
    if (!(opts.maxBatchSize >= 1)) throw new Error(`maxBatchSize must be >= 1, got ${opts.maxBatchSize}`);
    if (!(opts.windowMs >= 0)) throw new Error(`windowMs must be >= 0, got ${opts.windowMs}`);
    this.sectionTokens = opts.maxSectionTokens ?? DEFAULT_FORWARD_SECTION_TOKENS;
    if (!(this.sectionTokens >= 1)) throw new Error(`maxSectionTokens must be >= 1, got ${opts.maxSectionTokens}`);
    this.targetMs = opts.sectionTargetMs ?? 0;
    if (!(this.targetMs >= 0)) throw new Error(`sectionTargetMs must be >= 0, got ${opts.sectionTargetMs}`);
    this.now = opts.now ?? (() => performance.now());
  }

  /** The token bound of the next section (`timedSectionBound` of the running cost). */
  get sectionBound(): number {
    return timedSectionBound(this.msPerToken, this.targetMs, this.sectionTokens);
  }

  /** Folds a section's wall ms per counted token into the running average the time target reads. */
  private recordCost(rows: CachedRow[], ms: number): void {
    let maxLen = 0;
    let sumLen = 0;
    for (const r of rows) {
      maxLen = Math.max(maxLen, r.tokens.length);
      sumLen += r.tokens.length;
    }
    const perToken = ms / sectionCost(rows.length, maxLen, sumLen, this.opts.packedRows === true);
    this.msPerToken = this.msPerToken === null ? perToken : this.msPerToken + SECTION_COST_EMA * (perToken - this.msPerToken);
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
    if (this.opts.packedRows) return this.takePackedGroup();
    const first = this.queue[0];
    const group = [first];
    let rows = first.rows.length;
    let tokens = first.tokens;
    let maxTok = first.maxTokens;
    const rest: Pending[] = [];
    const bound = this.sectionBound;
    const cap = first.decode ? bound : Math.min(MULTI_TOKEN_BATCH_TOKENS, bound);
    for (let i = 1; i < this.queue.length; i++) {
      const p = this.queue[i];
      const newMax = Math.max(maxTok, p.maxTokens);
      const padded = (rows + p.rows.length) * newMax;
      let fits = rows + p.rows.length <= this.opts.maxBatchSize && p.decode === first.decode && padded <= cap;
      if (fits && !first.decode) fits = padded <= 2 * (tokens + p.tokens) + 64;
      if (fits) {
        group.push(p);
        rows += p.rows.length;
        tokens += p.tokens;
        maxTok = newMax;
      } else rest.push(p);
    }
    this.queue = rest;
    return group;
  }

  /**
   * The packed grouping: the oldest request, then the next ones in queue order while the group
   * stays within `maxBatchSize` rows and MULTI_TOKEN_BATCH_TOKENS tokens (any kind of request).
   */
  private takePackedGroup(): Pending[] {
    const group = [this.queue[0]];
    let rows = group[0].rows.length;
    let tokens = group[0].tokens;
    let i = 1;
    for (; i < this.queue.length; i++) {
      const p = this.queue[i];
      if (rows + p.rows.length > this.opts.maxBatchSize || tokens + p.tokens > MULTI_TOKEN_BATCH_TOKENS) break;
      group.push(p);
      rows += p.rows.length;
      tokens += p.tokens;
    }
    this.queue = this.queue.slice(i);
    return group;
  }

  private flush(): void {
    this.timer = null;
    this.immediate = null;
    // a running group flushes again when it ends
    if (this.running || this.queue.length === 0) return;
    this.running = true;
    void this.runGroup(this.takeGroup());
  }

  /**
   * Runs a group and settles its requests, gives the event loop its turns, then flushes what
   * queued meanwhile (unless a timer or an immediate will).
   */
  private async runGroup(group: Pending[]): Promise<void> {
    let lastMs = 0;
    try {
      const results = await this.runSections(
        group.flatMap((p) => p.rows),
        (ms) => (lastMs = ms),
      );
      let o = 0;
      for (const p of group) {
        p.resolve(results.slice(o, o + p.rows.length));
        o += p.rows.length;
      }
    } catch (err) {
      for (const p of group) p.reject(err);
    }
    // The continuations of the requests just settled queue their next rows meanwhile (microtasks
    // run first), and new connections and requests are taken in.
    await yieldTurns(yieldTurnsAfter(lastMs));
    this.running = false;
    if (this.queue.length > 0 && !this.timer && !this.immediate) this.flush();
  }

  /**
   * Runs `rows` section by section (`planSections`), giving the event loop its turns between
   * sections; returns one result per row, in order. A split row's earlier parts keep their cache
   * for the next part (disposed once that part ran) and, when the row wants every position, their
   * logprob rows.
   * @param onSection told each section's duration, ms.
   * @throws what a forward throws, or the error of `close` when it came between two sections; the
   *   caches made for the rows are disposed then.
   */
  private async runSections(rows: CachedRow[], onSection: (ms: number) => void): Promise<CachedRowResult[]> {
    const sections = planSections(
      rows.map((r) => r.tokens.length),
      this.sectionBound,
      this.opts.packedRows === true,
    );
    const results: Array<CachedRowResult | undefined> = new Array(rows.length);
    const carried = new Map<number, Carried>();
    const closes = this.closes;
    let lastMs = 0;
    try {
      for (let s = 0; s < sections.length; s++) {
        if (s > 0) await yieldTurns(yieldTurnsAfter(lastMs));
        if (this.closes !== closes) throw this.closeError ?? new Error('batcher closed');
        const parts = sections[s];
        const out = this.forward(parts.map((part) => partRow(rows[part.row], part, carried.get(part.row))));
        lastMs = out.ms;
        onSection(out.ms);
        parts.forEach((part, j) => {
          const row = rows[part.row];
          const r = out.results[j];
          if (part.from === 0 && part.to === row.tokens.length) {
            results[part.row] = r;
            return;
          }
          const before = carried.get(part.row);
          if (part.from > 0) disposeQuietly(before?.cache ?? null); // the cache this part continued
          const logprobs = row.allPositions ? [...(before?.logprobs ?? []), r.logprobs] : [r.logprobs];
          if (part.to < row.tokens.length) carried.set(part.row, { cache: r.cache, logprobs });
          else {
            carried.delete(part.row);
            results[part.row] = { logprobs: concatRows(logprobs), cache: r.cache };
          }
        });
      }
    } catch (err) {
      for (const r of results) disposeQuietly(r?.cache ?? null);
      for (const c of carried.values()) disposeQuietly(c.cache);
      throw err;
    }
    return results as CachedRowResult[];
  }

  /** One synchronous forward section, timed and counted. */
  private forward(rows: CachedRow[]): { results: CachedRowResult[]; ms: number } {
    const t0 = this.now();
    const results = this.run(rows);
    const ms = this.now() - t0;
    if (this.targetMs > 0) this.recordCost(rows, ms);
    this.stats.busyMs += ms;
    this.stats.forwards++;
    this.stats.rows += rows.length;
    this.stats.maxRows = Math.max(this.stats.maxRows, rows.length);
    try {
      this.opts.onForward?.(rows.length, ms);
    } catch {
      /* an observer's failure never fails the forward */
    }
    return { results, ms };
  }

  /** Requests queued now, waiting for a forward pass. */
  get queuedRequests(): number {
    return this.queue.length;
  }

  /**
   * Rejects everything queued with `err` (engine shutdown, model unloaded); a group running now
   * stops before its next section with the same error.
   */
  close(err: Error): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.immediate) clearImmediate(this.immediate);
    this.timer = null;
    this.immediate = null;
    this.closes++;
    this.closeError = err;
    for (const p of this.queue) p.reject(err);
    this.queue = [];
  }
}
