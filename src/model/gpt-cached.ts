/**
 * The GPT's serving path: a batched forward of rows that each carry their own KV cache
 * (src/model/kv-cache.ts) of a different length. Used by src/policy/builtin (through
 * src/model/batcher.ts); the maths are those of `forwardHidden` in src/model/gpt.ts.
 */
import * as tf from '@tensorflow/tfjs';
import { forwardHidden, lmHead, type GPT } from './gpt.js';
import { RowCache, SharedKV } from './kv-cache.js';
import type { PastKV } from './layers.js';

/** One row of a cached, batched forward (serving). */
export interface CachedRow {
  /** Cache of the row's previous c tokens, or null when c = 0 (src/model/kv-cache.ts). */
  cache: RowCache | null;
  /** New token ids, length n >= 1; positions are c .. c+n-1, and c + n <= block_size. */
  tokens: number[];
  /** true: return logprobs at every new position `[n, V]`; false: only at the last `[1, V]`. */
  allPositions: boolean;
  /** true: return the extended cache (c + n positions). */
  keepCache: boolean;
}

export interface CachedRowResult {
  /** Log-softmax rows, row-major `[n or 1, V]`; row j predicts the token after new token j. */
  logprobs: Float32Array;
  /** Extended cache when `keepCache` (a view of this forward's keys/values); the caller disposes it. */
  cache: RowCache | null;
}

/** Counts of `forwardCached` calls by path (process-wide; for tests and benchmarks). */
export const forwardCachedStats = { lockStep: 0, general: 0 };

/** Number of cached positions of a row cache (0 for null). */
export function cacheLength(cache: RowCache | null): number {
  return cache ? cache.length : 0;
}

/** Layout of one batched forward: sizes, and the token ids, positions and mask as host arrays. */
interface BatchPlan {
  B: number;
  /** Cached and new tokens per row. */
  cs: number[];
  ns: number[];
  /** The rows continue one previous forward exactly (its shared keys/values are the past). */
  lockStep: SharedKV | null;
  Cmax: number;
  Nmax: number;
  /** First cached column of each row. */
  starts: number[];
  idxVals: Int32Array;
  posVals: Int32Array;
  maskVals: Float32Array;
}

/**
 * Checks the rows and lays them out: row i's keys are `[padding, cache_i (c_i), new tokens (Nmax,
 * right-padded)]` with the cache ending at column Cmax; query j of row i attends to its cached keys
 * and to new keys <= j, at position c_i + j.
 * @throws Error when a row has no tokens or would exceed block_size.
 */
function planBatch(model: GPT, rows: CachedRow[]): BatchPlan {
  const { block_size } = model.config;
  const B = rows.length;
  const cs = rows.map((r) => cacheLength(r.cache));
  const ns = rows.map((r) => r.tokens.length);
  rows.forEach((r, i) => {
    if (ns[i] < 1) throw new Error('forwardCached: a row needs at least one new token');
    if (cs[i] + ns[i] > block_size) throw new Error(`forwardCached: ${cs[i] + ns[i]} positions exceed block_size ${block_size}`);
  });
  const shared0 = rows[0].cache?.sharedKV ?? null;
  const lockStep =
    shared0 !== null &&
    shared0.batch === B &&
    rows.every((r, i) => r.cache !== null && r.cache.sharedKV === shared0 && r.cache.row === i && r.cache.start + r.cache.length === shared0.length);
  if (lockStep) forwardCachedStats.lockStep++;
  else forwardCachedStats.general++;
  const Cmax = lockStep ? shared0.length : Math.max(...cs);
  const starts = rows.map((_, i) => Cmax - cs[i]);
  const Nmax = Math.max(...ns);
  const Ltot = Cmax + Nmax;
  const idxVals = new Int32Array(B * Nmax);
  const posVals = new Int32Array(B * Nmax);
  const maskVals = new Float32Array(B * Nmax * Ltot).fill(-1e9);
  for (let i = 0; i < B; i++) {
    for (let j = 0; j < Nmax; j++) {
      const o = (i * Nmax + j) * Ltot;
      if (j < ns[i]) {
        idxVals[i * Nmax + j] = rows[i].tokens[j];
        posVals[i * Nmax + j] = cs[i] + j;
        maskVals.fill(0, o + starts[i], o + Cmax);
        maskVals.fill(0, o + Cmax, o + Cmax + j + 1);
      } else {
        maskVals[o + Cmax] = 0; // padding query: attend somewhere harmless; output ignored
      }
    }
  }
  return { B, cs, ns, lockStep: lockStep ? shared0 : null, Cmax, Nmax, starts, idxVals, posVals, maskVals };
}

/** The past keys/values of the batch per layer, `[B, H, Cmax, hd]`, each row's cache left-padded. Inside tf.tidy. */
function stackPast(model: GPT, rows: CachedRow[], plan: BatchPlan): PastKV[] | null {
  const { n_head: H, n_embd, n_layer } = model.config;
  const hd = n_embd / H;
  const { B, cs, Cmax, lockStep } = plan;
  if (lockStep) return lockStep.k.map((k, l) => ({ k, v: lockStep.v[l] }));
  if (Cmax === 0) return null;
  const past: PastKV[] = [];
  const layersOf = rows.map((r) => (r.cache ? r.cache.layers() : null));
  for (let l = 0; l < n_layer; l++) {
    const pad = (i: number, which: 'k' | 'v') => {
      const c = layersOf[i];
      if (!c) return tf.zeros([H, Cmax, hd]);
      const t = c[l][which];
      return cs[i] === Cmax ? t : tf.pad(t, [[0, 0], [Cmax - cs[i], 0], [0, 0]]);
    };
    const stackRows = (which: 'k' | 'v') =>
      (B === 1 ? tf.expandDims(pad(0, which), 0) : tf.stack(rows.map((_, i) => pad(i, which)))) as tf.Tensor4D;
    past.push({ k: stackRows('k'), v: stackRows('v') });
  }
  return past;
}

/**
 * Batched forward of rows with their own KV caches of different lengths (serving path).
 * Row i's keys are laid out `[padding, cache_i (c_i), new tokens (Nmax, right-padded)]` with the
 * cache ending at column Cmax (left-padded, so its extended cache is one contiguous range); the
 * additive mask lets query j of row i attend to its cached keys and to new keys <= j only, and
 * positions are c_i + j, so every row's result equals its unbatched, uncached computation up to
 * float rounding.
 * Lock-step fast path: when the rows are exactly the rows of one previous forward, in order, each
 * cache ending at that forward's last column, the previous keys/values are the past as they are.
 * Input caches are not disposed (the caller owns them). Synchronous (downloads the logprobs).
 * @throws Error when a row has no tokens or would exceed block_size.
 */
export function forwardCached(model: GPT, rows: CachedRow[]): CachedRowResult[] {
  const { n_embd, vocab_size: V } = model.config;
  const plan = planBatch(model, rows);
  const { B, Nmax, Cmax, ns, cs, starts } = plan;
  const anyAll = rows.some((r) => r.allPositions);
  let presentKV: PastKV[] = [];
  const logpT = tf.tidy(() => {
    const idx = tf.tensor2d(plan.idxVals, [B, Nmax], 'int32');
    const pos = tf.tensor2d(plan.posVals, [B, Nmax], 'int32');
    const mask = tf.tensor4d(plan.maskVals, [B, 1, Nmax, Cmax + Nmax]);
    const { h, present } = forwardHidden(model, idx, pos, stackPast(model, rows, plan), mask);
    let hSel: tf.Tensor;
    if (anyAll) hSel = h;
    else {
      const lastIdx = tf.tensor1d(rows.map((_, i) => i * Nmax + ns[i] - 1), 'int32');
      hSel = tf.gather(tf.reshape(h, [B * Nmax, n_embd]), lastIdx);
    }
    if (rows.some((r) => r.keepCache)) {
      presentKV = present.map((pr) => ({ k: tf.keep(pr.k), v: tf.keep(pr.v) }));
    }
    return tf.logSoftmax(lmHead(model, hSel), -1);
  });
  let shared: SharedKV | null = null;
  if (presentKV.length > 0) {
    shared = new SharedKV(presentKV.map((p) => p.k), presentKV.map((p) => p.v));
    shared.retain(); // held while the views below are created
  }
  const vals = logpT.dataSync() as Float32Array;
  logpT.dispose();
  const results = rows.map((r, i) => {
    let logprobs: Float32Array;
    if (!anyAll) logprobs = vals.slice(i * V, (i + 1) * V);
    else if (r.allPositions) logprobs = vals.slice(i * Nmax * V, (i * Nmax + ns[i]) * V);
    else logprobs = vals.slice((i * Nmax + ns[i] - 1) * V, (i * Nmax + ns[i]) * V);
    const cache = r.keepCache && shared ? RowCache.view(shared, i, starts[i], cs[i] + ns[i]) : null;
    return { logprobs, cache };
  });
  shared?.release();
  return results;
}

/** Disposes a row cache (null-safe). */
export function disposeCache(cache: RowCache | null): void {
  cache?.dispose();
}

/** A cache of the first `len` positions (null for len <= 0); the input stays valid. */
export function truncateCache(cache: RowCache, len: number): RowCache | null {
  return cache.truncate(len);
}
