/**
 * The forward sections of src/model/batcher.ts: how a group's rows are cut into sections of
 * bounded cost, how a row longer than the bound is split into parts over its own cache and stitched
 * back, the bound a time target sets, and the event-loop turns given after each section.
 *
 * Why sections: tfjs on wasm and cpu runs a forward pass synchronously (it downloads the logprobs in
 * the same call), so the event loop serves nothing else, health checks included, until it ends.
 * A group is therefore run in sections of at most `maxSectionTokens` tokens, counted as the
 * forward costs them (`planSections`): its rows packed in order, and a row longer than the bound split along its
 * tokens into parts, each part continuing the KV cache of the part before it (causal attention
 * over cached keys equals attention over the whole sequence, so the logprobs are those of the
 * unsplit row up to float rounding). After each section the event loop gets
 * `1 + floor(ms / YIELD_TURN_MS)` turns (`setImmediate`), at most MAX_YIELD_TURNS, before the next
 * section or group runs: Node 20 (libuv 1.46) accepts at most one new connection per turn,
 * so a section that held the loop for `ms` lets that many waiting connections in (a gateway's
 * health check, new clients) and serves the requests that arrived meanwhile.
 * With a time target (`sectionTargetMs`, LAMER_FORWARD_SECTION_MS) the bound of each group's
 * sections is also `targetMs / c` tokens, c the running average of the sections' wall ms per token
 * (`timedSectionBound`): where other processes share the cores a token costs more wall time and the
 * sections get shorter.
 *
 * Apart from batcher.ts because none of it queues, groups or settles requests: it works on token
 * counts, durations and single rows, and its planning and bounds are tested without a model.
 */
import { disposeCache, type CachedRow } from './gpt-cached.js';
import type { RowCache } from './kv-cache.js';

/**
 * Default bound on the padded new tokens of one forward section (LAMER_FORWARD_SECTION_TOKENS),
 * chosen by measurement (docs/performance.md "Health checks under a burst").
 */
export const DEFAULT_FORWARD_SECTION_TOKENS = 512;

/**
 * Default target duration of one forward section, ms (LAMER_FORWARD_SECTION_MS): 0, the token bound
 * alone. A time target shrinks sections when other processes take the cores, which shortens the
 * waits of health checks but cuts the rows per forward (to 1-2 of 8-10 on a loaded 2-core VM) when
 * CPU is scarcest, at a throughput cost not yet resolved by measurement (docs/performance.md
 * "Health checks under a burst"); deployments whose probes time out under load can set e.g. 40.
 */
export const DEFAULT_FORWARD_SECTION_MS = 0;

/** The time target never bounds a section below this many tokens (the per-forward overhead would dominate). */
export const MIN_TIMED_SECTION_TOKENS = 64;

/** Weight of the newest section in the running average of milliseconds per token. */
export const SECTION_COST_EMA = 0.25;

/** After a section the event loop gets one turn, plus one per this many milliseconds it took. */
export const YIELD_TURN_MS = 10;

/** Most event-loop turns given after one section. */
export const MAX_YIELD_TURNS = 64;

/** New tokens `[from, to)` of row `row` of a group, run in one section. */
export interface RowPart {
  row: number;
  from: number;
  to: number;
}

/**
 * The counted tokens of a section of `rows` rows whose longest has `maxLen` new tokens and which
 * have `sumLen` in all: the real tokens when rows are packed, else rows x the longest (padding).
 */
export function sectionCost(rows: number, maxLen: number, sumLen: number, packed: boolean): number {
  return packed ? sumLen : rows * maxLen;
}

/**
 * Splits a group's rows (their new-token counts, in order) into forward sections of at most
 * `maxTokens` tokens each, counted as padded (rows x the longest row's count) or, with `packed`,
 * as the sum of the counts: whole rows are packed in order while the section stays within the
 * bound; a row longer than the bound runs alone, split along its tokens into `ceil(n / maxTokens)`
 * parts of near-equal length, in order.
 * @throws Error when `maxTokens` is not >= 1 or a count is not >= 1.
 */
export function planSections(lengths: readonly number[], maxTokens: number, packed = false): RowPart[][] {
  if (!(maxTokens >= 1)) throw new Error(`maxTokens must be >= 1, got ${maxTokens}`);
  const sections: RowPart[][] = [];
  let cur: RowPart[] = [];
  let curMax = 0;
  let curSum = 0;
  lengths.forEach((n, row) => {
    if (!(n >= 1)) throw new Error(`row ${row} has ${n} new tokens; a row needs at least one`);
    if (n > maxTokens) {
      if (cur.length > 0) sections.push(cur);
      cur = [];
      curMax = 0;
      curSum = 0;
      const k = Math.ceil(n / maxTokens);
      for (let j = 0; j < k; j++) sections.push([{ row, from: Math.floor((j * n) / k), to: Math.floor(((j + 1) * n) / k) }]);
      return;
    }
    const cost = sectionCost(cur.length + 1, Math.max(curMax, n), curSum + n, packed);
    if (cur.length > 0 && cost > maxTokens) {
      sections.push(cur);
      cur = [];
      curMax = 0;
      curSum = 0;
    }
    cur.push({ row, from: 0, to: n });
    curMax = Math.max(curMax, n);
    curSum += n;
  });
  if (cur.length > 0) sections.push(cur);
  return sections;
}

/** A split row between its parts: the cache of its tokens so far, and their logprob rows when it wants every position. */
export interface Carried {
  cache: RowCache | null;
  logprobs: Float32Array[];
}

/** Disposes a cache that may belong to a backend instance that has since been replaced. */
export function disposeQuietly(cache: RowCache | null): void {
  try {
    disposeCache(cache);
  } catch {
    /* its heap went with the instance */
  }
}

/** The row a part runs: the row itself when whole, else its tokens `[from, to)` over the cache of the part before. */
export function partRow(row: CachedRow, part: RowPart, carried: Carried | undefined): CachedRow {
  const n = row.tokens.length;
  if (part.from === 0 && part.to === n) return row;
  return {
    cache: part.from === 0 ? row.cache : (carried?.cache ?? null),
    tokens: row.tokens.slice(part.from, part.to),
    allPositions: row.allPositions,
    keepCache: part.to < n || row.keepCache,
  };
}

/** Concatenates logprob rows. */
export function concatRows(parts: Float32Array[]): Float32Array {
  if (parts.length === 1) return parts[0];
  const out = new Float32Array(parts.reduce((s, p) => s + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/**
 * The token bound of the next section under a time target: `floor(targetMs / msPerToken)` within
 * `[min(MIN_TIMED_SECTION_TOKENS, maxTokens), maxTokens]`; `maxTokens` while no section has been
 * timed yet (`msPerToken` null) or without a target (`targetMs` 0).
 */
export function timedSectionBound(msPerToken: number | null, targetMs: number, maxTokens: number): number {
  if (!(targetMs > 0) || msPerToken === null || !(msPerToken > 0)) return maxTokens;
  return Math.max(Math.min(MIN_TIMED_SECTION_TOKENS, maxTokens), Math.min(maxTokens, Math.floor(targetMs / msPerToken)));
}

/** Event-loop turns after a section of `ms` milliseconds (see the module comment). */
export function yieldTurnsAfter(ms: number): number {
  return Math.min(MAX_YIELD_TURNS, 1 + Math.floor(Math.max(0, ms) / YIELD_TURN_MS));
}

/** Gives the event loop `turns` turns (each `setImmediate` callback runs after that turn's poll phase). */
export async function yieldTurns(turns: number): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
