/**
 * The GPT's serving path: a batched forward of rows that each carry their own KV cache
 * (src/model/kv-cache.ts) of a different length. Used by src/policy/builtin (through
 * src/model/batcher.ts); the maths are those of `forwardHidden` in src/model/gpt.ts.
 *
 * Two layouts, one result (`forwardCached` picks):
 * - packed (wasm and cpu backends, `forwardPacked`): the rows' new tokens are stacked into one
 *   `[T, C]` matrix, T the sum of their counts, so every matmul and elementwise op runs on real
 *   tokens only, whatever the mix of lengths; attention reads each row's keys/values from its heap
 *   buffer where they lie (src/model/packed-attention.ts), and the new positions are appended to
 *   the buffer in place. A forward is a fixed ~15 ops per layer, not a few per row.
 * - padded (other backends, `forwardPadded`): rows right-padded to the longest, caches left-padded
 *   and stacked, an additive mask; kernels that cannot read the heap need it.
 */
import * as tf from '@tensorflow/tfjs';
import { forwardHidden, lmHead, type GPT } from './gpt.js';
import { HeapKV, RowCache, SharedKV } from './kv-cache.js';
import { layerNorm, linear, mlp, type PastKV } from './layers.js';
import { packedAttention, packedAttentionAvailable, storageOf, type PackedLayout } from './packed-attention.js';

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
export const forwardCachedStats = { packed: 0, lockStep: 0, general: 0 };

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

/** Cached and new tokens per row. @throws Error when a row has no tokens or would exceed block_size. */
function rowSizes(model: GPT, rows: CachedRow[]): { cs: number[]; ns: number[] } {
  const { block_size } = model.config;
  const cs = rows.map((r) => cacheLength(r.cache));
  const ns = rows.map((r) => r.tokens.length);
  rows.forEach((_, i) => {
    if (ns[i] < 1) throw new Error('forwardCached: a row needs at least one new token');
    if (cs[i] + ns[i] > block_size) throw new Error(`forwardCached: ${cs[i] + ns[i]} positions exceed block_size ${block_size}`);
  });
  return { cs, ns };
}

/**
 * Checks the rows and lays them out: row i's keys are `[padding, cache_i (c_i), new tokens (Nmax,
 * right-padded)]` with the cache ending at column Cmax; query j of row i attends to its cached keys
 * and to new keys <= j, at position c_i + j.
 * @throws Error when a row has no tokens or would exceed block_size.
 */
function planBatch(model: GPT, rows: CachedRow[]): BatchPlan {
  const B = rows.length;
  const { cs, ns } = rowSizes(model, rows);
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
 * Batched forward of rows with their own KV caches of different lengths (serving path): the
 * packed layout where the backend runs the packed attention (wasm, cpu), else the padded one.
 * Every row's logprobs equal its unbatched, uncached computation up to float rounding, in either
 * layout. Input caches are not disposed (the caller owns them); a returned cache is the caller's
 * to dispose. Synchronous (downloads the logprobs).
 * @throws Error when a row has no tokens or would exceed block_size.
 */
export function forwardCached(model: GPT, rows: CachedRow[]): CachedRowResult[] {
  return packedAttentionAvailable() ? forwardPacked(model, rows) : forwardPadded(model, rows);
}

/**
 * Batched forward in the padded layout (any backend).
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
export function forwardPadded(model: GPT, rows: CachedRow[]): CachedRowResult[] {
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

/** Positions a new heap buffer gets for `need`: the next power of two from 32, at most block_size. */
function capacityFor(need: number, blockSize: number): number {
  let cap = 32;
  while (cap < need) cap *= 2;
  return Math.min(cap, blockSize);
}

/**
 * A heap cache holding what `cache` holds: itself when it is one, else a copy in a new buffer (a
 * cache made by the padded path; the caller disposes the copy).
 */
function onHeap(model: GPT, cache: RowCache): { cache: RowCache; copied: boolean } {
  if (cache.heapKV) return { cache, copied: false };
  const { n_layer, n_head: H, n_embd: C, block_size } = model.config;
  const len = cache.length;
  const cap = capacityFor(len, block_size);
  const init = tf.tidy(() => {
    const flat = (t: tf.Tensor3D) => tf.reshape(tf.transpose(t, [1, 0, 2]), [len, C]); // [H, len, hd] -> [len, C]
    const all = tf.stack(cache.layers().map((l) => tf.stack([flat(l.k), flat(l.v)])));
    return tf.pad(all, [[0, 0], [0, 0], [0, cap - len], [0, 0]]) as tf.Tensor4D;
  });
  const buf = new HeapKV(n_layer, H, C, cap, init); // takes `init` over
  return { cache: RowCache.onHeap(buf, len), copied: true };
}

/** The rows' heap buffers (each once) and the layout of the packed forward. */
function packedLayout(model: GPT, rows: CachedRow[], cs: number[], ns: number[], heaps: Array<RowCache | null>) {
  const buffers: HeapKV[] = [];
  const bufferOf = heaps.map((c) => {
    if (!c) return -1;
    const b = c.heapKV!;
    const k = buffers.indexOf(b);
    return k >= 0 ? k : buffers.push(b) - 1;
  });
  const offsets: number[] = [];
  let T = 0;
  for (const n of ns) {
    offsets.push(T);
    T += n;
  }
  const layout: PackedLayout = {
    ns, offsets, cs, bufferOf, capacities: buffers.map((b) => b.capacity), nLayer: model.config.n_layer, nHead: model.config.n_head,
  };
  return { buffers, layout, T };
}

/**
 * Writes row `i`'s new keys/values (rows `offsets[i] ..` of every layer's qkv) after its cached
 * positions: into its own buffer when nothing else over it holds positions from there on and
 * they fit, else into a new buffer after a copy of the cached prefix. @returns the extended cache.
 */
function appendRow(model: GPT, heap: RowCache | null, c: number, n: number, o: number, qkvs: tf.Tensor2D[]): RowCache {
  const { n_layer, n_head: H, n_embd: C, block_size } = model.config;
  const old = heap?.heapKV ?? null;
  let buf = old;
  if (!old || !old.writableFrom(c) || c + n > old.capacity) buf = new HeapKV(n_layer, H, C, capacityFor(c + n, block_size));
  const backend = tf.backend();
  const dst = storageOf(backend, buf!.tensor); // views after the allocation (it may move the wasm heap)
  const cap = buf!.capacity;
  for (let l = 0; l < n_layer; l++) {
    const src = storageOf(backend, qkvs[l]);
    for (let kv = 0; kv < 2; kv++) {
      const base = (l * 2 + kv) * cap * C;
      if (old && buf !== old && c > 0) {
        const from = (l * 2 + kv) * old.capacity * C;
        dst.set(storageOf(backend, old.tensor).subarray(from, from + c * C), base);
      }
      for (let j = 0; j < n; j++) {
        const s = (o + j) * 3 * C + (kv + 1) * C;
        dst.set(src.subarray(s, s + C), base + (c + j) * C);
      }
    }
  }
  return RowCache.onHeap(buf!, c + n);
}

/**
 * Batched forward in the packed layout (wasm and cpu backends; see the module comment): the
 * rows' new tokens stacked into `[T, C]`, attention over each row's heap buffer, new positions
 * appended in place. Results as `forwardCached`.
 * @throws Error when a row has no tokens or would exceed block_size.
 */
export function forwardPacked(model: GPT, rows: CachedRow[]): CachedRowResult[] {
  const { vocab_size: V } = model.config;
  const { cs, ns } = rowSizes(model, rows);
  forwardCachedStats.packed++;
  const converted = rows.map((r) => (r.cache ? onHeap(model, r.cache) : null));
  const heaps = converted.map((h) => h?.cache ?? null);
  const qkvs: tf.Tensor2D[] = [];
  try {
    const { buffers, layout, T } = packedLayout(model, rows, cs, ns, heaps);
    // logits rows: every new position of rows that want them all, else each row's last
    const sel: number[] = [];
    const selStart: number[] = [];
    rows.forEach((r, i) => {
      selStart.push(sel.length);
      if (r.allPositions) for (let j = 0; j < ns[i]; j++) sel.push(layout.offsets[i] + j);
      else sel.push(layout.offsets[i] + ns[i] - 1);
    });
    const idxVals = new Int32Array(T);
    const posVals = new Int32Array(T);
    rows.forEach((r, i) => {
      for (let j = 0; j < ns[i]; j++) {
        idxVals[layout.offsets[i] + j] = r.tokens[j];
        posVals[layout.offsets[i] + j] = cs[i] + j;
      }
    });
    const logpT = tf.tidy(() => {
      const tok = tf.gather(model.wte, tf.tensor1d(idxVals, 'int32'));
      let x = tf.add(tok, tf.gather(model.wpe, tf.tensor1d(posVals, 'int32'))) as tf.Tensor2D; // [T, C]
      model.layers.forEach((p, l) => {
        const qkv = linear(layerNorm(x, p.ln1) as tf.Tensor2D, p.attn.cAttnW, p.attn.cAttnB); // [T, 3C]
        qkvs.push(tf.keep(qkv)); // read again when the new positions are appended
        const y = packedAttention(qkv, buffers.map((b) => b.tensor), layout, l); // [T, C]
        x = tf.add(x, linear(y, p.attn.cProjW, p.attn.cProjB)) as tf.Tensor2D;
        x = tf.add(x, mlp(layerNorm(x, p.ln2) as tf.Tensor2D, p.mlp)) as tf.Tensor2D;
      });
      let h = layerNorm(x, model.lnF);
      if (sel.length < T) h = tf.gather(h, tf.tensor1d(sel, 'int32'));
      return tf.logSoftmax(lmHead(model, h), -1);
    });
    let vals: Float32Array;
    try {
      vals = logpT.dataSync() as Float32Array;
    } finally {
      logpT.dispose();
    }
    const results: CachedRowResult[] = [];
    try {
      rows.forEach((r, i) => {
        const at = selStart[i];
        const logprobs = vals.slice(at * V, (at + (r.allPositions ? ns[i] : 1)) * V);
        const cache = r.keepCache ? appendRow(model, heaps[i], cs[i], ns[i], layout.offsets[i], qkvs) : null;
        results.push({ logprobs, cache });
      });
    } catch (err) {
      for (const res of results) disposeCache(res.cache);
      throw err;
    }
    return results;
  } finally {
    for (const t of qkvs) t.dispose();
    converted.forEach((h) => h?.copied && h.cache.dispose());
  }
}

/** Disposes a row cache (null-safe). */
export function disposeCache(cache: RowCache | null): void {
  cache?.dispose();
}

/** A cache of the first `len` positions (null for len <= 0); the input stays valid. */
export function truncateCache(cache: RowCache, len: number): RowCache | null {
  return cache.truncate(len);
}

/**
 * Runs the serving path once at each shape a session's steps use, so that the first forward a
 * client waits for does not pay the one-time costs: the wasm kernels' and the JIT's first calls and
 * the heap growth that comes with them (measured: the first forward after a start held the event
 * loop about 3x as long as the same forward later; docs/performance.md "Health checks under a
 * burst"). Rows: `rows` prefills of `promptTokens` tokens (kept), a decode token on each cache, a
 * prompt delta of `deltaTokens` on each, and one row scored at every position (candidate scoring).
 * Token ids are arbitrary ids of the vocabulary; every result and cache is disposed, so the
 * number of tensors is the same before and after.
 * @returns the milliseconds it took.
 */
export function warmUpForward(model: GPT, rows = 8, promptTokens = 48, deltaTokens = 27): number {
  const t0 = performance.now();
  const V = model.config.vocab_size;
  const n = Math.max(1, Math.min(promptTokens, Math.floor(model.config.block_size / 2)));
  const d = Math.max(1, Math.min(deltaTokens, model.config.block_size - n - 5)); // n + 1 + d + 4 positions at most
  const ids = (i: number, len: number) => Array.from({ length: len }, (_, j) => 1 + ((i * 31 + j * 7) % (V - 1)));
  let caches: Array<RowCache | null> = forwardCached(
    model,
    Array.from({ length: rows }, (_, i) => ({ cache: null, tokens: ids(i, n), allPositions: false, keepCache: true })),
  ).map((r) => r.cache);
  try {
    for (const len of [1, d]) {
      const out = forwardCached(model, caches.map((cache, i) => ({ cache, tokens: ids(i + len, len), allPositions: false, keepCache: true })));
      for (const c of caches) disposeCache(c);
      caches = out.map((r) => r.cache);
    }
    const [scored] = forwardCached(model, [{ cache: caches[0] ?? null, tokens: ids(1, 4), allPositions: true, keepCache: false }]);
    disposeCache(scored?.cache ?? null);
  } finally {
    for (const c of caches) disposeCache(c);
  }
  return performance.now() - t0;
}
