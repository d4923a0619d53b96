/**
 * The builtin policy model: a GPT-style decoder-only transformer in TensorFlow.js, written the
 * way nanoGPT's `model.py` is (shared/DESIGN.md §6): explicit tf ops on `tf.Variable`s, names
 * that match the paper and nanoGPT (`wte`, `wpe`, `h.{i}.attn.c_attn`, `n_embd`, `block_size`).
 *
 * Architecture (Radford et al. 2019, GPT-2; nanoGPT):
 *   x = wte[idx] + wpe[pos]                                   [B, T, C]
 *   for each block: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))   (pre-LayerNorm)
 *   logits = ln_f(x) @ wte^T                                  [B, T, V]  (weight-tied head)
 * attn: causal multi-head self-attention, fused qkv projection, scale 1/sqrt(head_size).
 * mlp: C -> 4C -> C with GELU (tanh approximation, computed via sigmoid; wasm has no Erf kernel).
 * Init: N(0, 0.02) weights, zero biases, LayerNorm gain 1; residual projections (`c_proj`)
 * N(0, 0.02/sqrt(2 n_layer)) as in GPT-2.
 *
 * Shapes: B batch, T sequence (<= block_size), C n_embd, H n_head, hd = C/H, V vocab_size.
 * Token ids are int32 of the byte tokenizer (src/model/tokenizer.ts). Logprobs are natural logs.
 *
 * Training API (used by src/training): `initModel`, `forward`, `tokenLogprobs`, `tokenEntropy`,
 * `model.trainableVariables`; checkpoints are in src/model/checkpoint.ts.
 * Serving API: `forwardCached` (per-row KV caches of src/model/kv-cache.ts, batched; used by
 * src/policy/builtin-engine.ts through src/model/batcher.ts).
 */
import * as tf from '@tensorflow/tfjs';
import { RowCache, SharedKV } from './kv-cache.js';
import { VOCAB_SIZE } from './tokenizer.js';

export interface GPTConfig {
  vocab_size: number;
  /** Maximum context length in tokens (learned positional embeddings have this many rows). */
  block_size: number;
  n_layer: number;
  n_head: number;
  n_embd: number;
}

/** Default config of the shipped base checkpoint: ~0.56M parameters, 2.2 MB of float32. */
export const DEFAULT_CONFIG: GPTConfig = {
  vocab_size: VOCAB_SIZE,
  block_size: 1024,
  n_layer: 2,
  n_head: 4,
  n_embd: 128,
};

/** A model instance: its config and its named parameters (tf.Variables). */
export interface GPT {
  readonly config: GPTConfig;
  /** Parameters by nanoGPT-style name, e.g. `h.0.attn.c_attn.w`. */
  readonly params: Map<string, tf.Variable>;
  /** All parameters, in a fixed order (for optimizers and `tf.variableGrads`). */
  readonly trainableVariables: tf.Variable[];
  dispose(): void;
}

export { RowCache, type LayerKV } from './kv-cache.js';

/** Shape of every parameter of a config, in canonical order. */
export function paramShapes(cfg: GPTConfig): Array<[string, number[]]> {
  const C = cfg.n_embd;
  const shapes: Array<[string, number[]]> = [
    ['wte', [cfg.vocab_size, C]],
    ['wpe', [cfg.block_size, C]],
  ];
  for (let i = 0; i < cfg.n_layer; i++) {
    shapes.push(
      [`h.${i}.ln_1.g`, [C]],
      [`h.${i}.ln_1.b`, [C]],
      [`h.${i}.attn.c_attn.w`, [C, 3 * C]],
      [`h.${i}.attn.c_attn.b`, [3 * C]],
      [`h.${i}.attn.c_proj.w`, [C, C]],
      [`h.${i}.attn.c_proj.b`, [C]],
      [`h.${i}.ln_2.g`, [C]],
      [`h.${i}.ln_2.b`, [C]],
      [`h.${i}.mlp.c_fc.w`, [C, 4 * C]],
      [`h.${i}.mlp.c_fc.b`, [4 * C]],
      [`h.${i}.mlp.c_proj.w`, [4 * C, C]],
      [`h.${i}.mlp.c_proj.b`, [C]],
    );
  }
  shapes.push(['ln_f.g', [C]], ['ln_f.b', [C]]);
  return shapes;
}

/** Number of parameters of a config (wte counted once: the head is tied). */
export function countParams(cfg: GPTConfig): number {
  return paramShapes(cfg).reduce((s, [, shape]) => s + shape.reduce((a, b) => a * b, 1), 0);
}

/** @throws Error for inconsistent configs (n_embd not divisible by n_head, non-positive sizes). */
export function validateConfig(cfg: GPTConfig): void {
  for (const k of ['vocab_size', 'block_size', 'n_layer', 'n_head', 'n_embd'] as const) {
    if (!Number.isInteger(cfg[k]) || cfg[k] <= 0) throw new Error(`GPTConfig.${k} must be a positive integer, got ${cfg[k]}`);
  }
  if (cfg.n_embd % cfg.n_head !== 0) throw new Error(`n_embd (${cfg.n_embd}) must be divisible by n_head (${cfg.n_head})`);
}

let modelCounter = 0;

/** Wraps existing tensors (taken over, not copied) as a model. Used by `initModel` and checkpoints. */
export function modelFromTensors(config: GPTConfig, tensors: Map<string, tf.Tensor>): GPT {
  validateConfig(config);
  const params = new Map<string, tf.Variable>();
  const prefix = `gpt${++modelCounter}/`;
  for (const [name, shape] of paramShapes(config)) {
    const t = tensors.get(name);
    if (!t) throw new Error(`missing parameter ${name}`);
    if (t.shape.join(',') !== shape.join(',')) throw new Error(`parameter ${name} has shape [${t.shape}], expected [${shape}]`);
    params.set(name, tf.variable(t, true, prefix + name));
    t.dispose();
  }
  const trainableVariables = [...params.values()];
  return {
    config,
    params,
    trainableVariables,
    dispose() {
      for (const v of trainableVariables) v.dispose();
    },
  };
}

/**
 * New model with GPT-2 initialisation, reproducible for a fixed `seed` (tf.randomNormal's seeded
 * generator; parameter i uses seed + i).
 */
export function initModel(config: GPTConfig, seed = 1337): GPT {
  validateConfig(config);
  const tensors = new Map<string, tf.Tensor>();
  const residStd = 0.02 / Math.sqrt(2 * config.n_layer);
  paramShapes(config).forEach(([name, shape], i) => {
    let t: tf.Tensor;
    if (name.endsWith('.g')) t = tf.ones(shape);
    else if (name.endsWith('.b')) t = tf.zeros(shape);
    else t = tf.randomNormal(shape, 0, name.endsWith('c_proj.w') ? residStd : 0.02, 'float32', seed + i);
    tensors.set(name, t);
  });
  return modelFromTensors(config, tensors);
}

function p(model: GPT, name: string): tf.Variable {
  const v = model.params.get(name);
  if (!v) throw new Error(`missing parameter ${name}`);
  return v;
}

/** LayerNorm over the last axis, eps 1e-5. x `[..., C]`. */
function layerNorm(x: tf.Tensor, g: tf.Tensor, b: tf.Tensor): tf.Tensor {
  const { mean, variance } = tf.moments(x, -1, true);
  return tf.add(tf.mul(tf.mul(tf.sub(x, mean), tf.rsqrt(tf.add(variance, 1e-5))), g), b);
}

/**
 * GELU, tanh approximation (GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), computed with
 * the identity 0.5 (1 + tanh(z)) = sigmoid(2 z), i.e. x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)):
 * the same function, but wasm's Sigmoid is ~10x faster than its Tanh, and x*x*x than Pow.
 */
function gelu(x: tf.Tensor): tf.Tensor {
  const x3 = tf.mul(tf.mul(x, x), x);
  const z = tf.mul(tf.add(x, tf.mul(x3, 0.044715)), 2 * Math.sqrt(2 / Math.PI));
  return tf.mul(x, tf.sigmoid(z));
}

/**
 * Scaled dot-product attention over B*H independent (batch, head) pairs.
 * q `[B*H, N, hd]`, k and v `[B*H, L, hd]`, additive mask `[B or 1, 1, N, L]` -> `[B*H, N, hd]`:
 * softmax(q k^T * scale + mask) v.
 * Formulation by case, for speed on wasm (bench/model-attn-micro.ts; shared/PERF-NOTES.md):
 * - N = 1 (a decode step): scores by multiply + sum over hd, then one batched matMul with v.
 * - wasm, N > 1: the wasm batched matMul runs a naive loop (~1 GFLOP/s), so the pairs are
 *   unstacked and multiplied as 2-D matMuls (XNNPACK path), 3-7x faster at these sizes.
 * - other backends: plain batched matMuls.
 */
function attention(q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D, mask: tf.Tensor4D, B: number, H: number, scale: number): tf.Tensor3D {
  const [BH, N] = q.shape;
  const L = k.shape[1];
  const softmaxMasked = (scores: tf.Tensor) =>
    tf.reshape(tf.softmax(tf.add(tf.reshape(tf.mul(scores, scale), [B, H, N, L]), mask), -1), [BH, N, L]) as tf.Tensor3D;
  if (N === 1) {
    const att = softmaxMasked(tf.sum(tf.mul(q, k), -1)); // [BH, L] -> [BH, 1, L]
    return tf.matMul(att, v);
  }
  if (tf.getBackend() === 'wasm') {
    const qs = tf.unstack(q) as tf.Tensor2D[];
    const ks = tf.unstack(k) as tf.Tensor2D[];
    const vs = tf.unstack(v) as tf.Tensor2D[];
    const att = softmaxMasked(tf.stack(qs.map((qi, i) => tf.matMul(qi, ks[i], false, true))));
    const atts = tf.unstack(att) as tf.Tensor2D[];
    return tf.stack(atts.map((ai, i) => tf.matMul(ai, vs[i]))) as tf.Tensor3D;
  }
  const att = softmaxMasked(tf.matMul(q, k, false, true));
  return tf.matMul(att, v);
}

/** x `[N, in]` @ w `[in, out]` + b `[out]`. */
function linear(x: tf.Tensor2D, w: tf.Tensor, b: tf.Tensor): tf.Tensor2D {
  return tf.add(tf.matMul(x, w as tf.Tensor2D), b) as tf.Tensor2D;
}

/** Past keys/values of a batch for one layer: `[B, H, P, hd]` each. */
interface PastKV {
  k: tf.Tensor4D;
  v: tf.Tensor4D;
}

/**
 * Core forward shared by training and serving.
 * @param idx `[B, N]` int32 token ids (the new tokens).
 * @param pos `[B, N]` int32 positions, or null for 0..N-1 in every row (training).
 * @param past per layer `[B, H, P, hd]` keys/values before the new tokens, or null (P = 0).
 * @param mask additive attention mask `[B or 1, 1, N, P + N]` (0 allowed, -1e9 masked).
 * @returns hidden states after ln_f `[B, N, C]` and per layer the keys/values of past and new
 *   tokens `[B, H, P + N, hd]`.
 */
function forwardHidden(
  model: GPT,
  idx: tf.Tensor2D,
  pos: tf.Tensor2D | null,
  past: PastKV[] | null,
  mask: tf.Tensor4D,
): { h: tf.Tensor3D; present: PastKV[] } {
  const { n_layer, n_head, n_embd } = model.config;
  const [B, N] = idx.shape;
  const H = n_head;
  const hd = n_embd / n_head;
  const C = n_embd;
  const tokEmb = tf.reshape(tf.gather(p(model, 'wte'), tf.reshape(idx, [-1])), [B, N, C]);
  const posEmb = pos
    ? tf.reshape(tf.gather(p(model, 'wpe'), tf.reshape(pos, [-1])), [B, N, C])
    : tf.slice(p(model, 'wpe'), [0, 0], [N, C]); // [N, C], broadcast over B
  let x = tf.reshape(tf.add(tokEmb, posEmb), [B * N, C]) as tf.Tensor2D;
  const scale = 1 / Math.sqrt(hd);
  const present: PastKV[] = [];
  // [B*N, C] -> [B, H, N, hd]
  const heads = (t: tf.Tensor) => tf.transpose(tf.reshape(t, [B, N, H, hd]), [0, 2, 1, 3]) as tf.Tensor4D;
  for (let l = 0; l < n_layer; l++) {
    const pre = `h.${l}.`;
    // --- causal self-attention ---
    const a = layerNorm(x, p(model, pre + 'ln_1.g'), p(model, pre + 'ln_1.b')) as tf.Tensor2D;
    const qkv = linear(a, p(model, pre + 'attn.c_attn.w'), p(model, pre + 'attn.c_attn.b')); // [B*N, 3C]
    const [q2, k2, v2] = tf.split(qkv, 3, 1);
    const q = heads(q2);
    const kNew = heads(k2);
    const vNew = heads(v2);
    const k = past ? (tf.concat([past[l].k, kNew], 2) as tf.Tensor4D) : kNew; // [B, H, L, hd]
    const v = past ? (tf.concat([past[l].v, vNew], 2) as tf.Tensor4D) : vNew;
    present.push({ k, v });
    const L = k.shape[2];
    const y = attention(tf.reshape(q, [B * H, N, hd]) as tf.Tensor3D, tf.reshape(k, [B * H, L, hd]) as tf.Tensor3D,
      tf.reshape(v, [B * H, L, hd]) as tf.Tensor3D, mask, B, H, scale); // [B*H, N, hd]
    const yc = tf.reshape(tf.transpose(tf.reshape(y, [B, H, N, hd]), [0, 2, 1, 3]), [B * N, C]) as tf.Tensor2D;
    x = tf.add(x, linear(yc, p(model, pre + 'attn.c_proj.w'), p(model, pre + 'attn.c_proj.b'))) as tf.Tensor2D;
    // --- MLP ---
    const m = layerNorm(x, p(model, pre + 'ln_2.g'), p(model, pre + 'ln_2.b')) as tf.Tensor2D;
    const hid = gelu(linear(m, p(model, pre + 'mlp.c_fc.w'), p(model, pre + 'mlp.c_fc.b'))) as tf.Tensor2D;
    x = tf.add(x, linear(hid, p(model, pre + 'mlp.c_proj.w'), p(model, pre + 'mlp.c_proj.b'))) as tf.Tensor2D;
  }
  const h = tf.reshape(layerNorm(x, p(model, 'ln_f.g'), p(model, 'ln_f.b')), [B, N, C]) as tf.Tensor3D;
  return { h, present };
}

/** Weight-tied language-model head: h `[..., C]` -> logits `[..., V]` = h @ wte^T. */
function lmHead(model: GPT, h: tf.Tensor): tf.Tensor {
  const C = model.config.n_embd;
  const lead = h.shape.slice(0, -1);
  const logits = tf.matMul(tf.reshape(h, [-1, C]) as tf.Tensor2D, p(model, 'wte') as tf.Tensor2D, false, true);
  return tf.reshape(logits, [...lead, model.config.vocab_size]);
}

const maskCache = new Map<number, Float32Array>();
/** Causal additive mask values for T tokens, `[T, T]` row-major (0 on/below diagonal, -1e9 above). */
function causalMaskValues(T: number): Float32Array {
  let m = maskCache.get(T);
  if (!m) {
    m = new Float32Array(T * T);
    for (let i = 0; i < T; i++) for (let j = i + 1; j < T; j++) m[i * T + j] = -1e9;
    if (maskCache.size > 16) maskCache.clear();
    maskCache.set(T, m);
  }
  return m;
}

/**
 * Full-sequence forward (training and reference).
 * @param idx `[B, T]` int32 token ids, T <= block_size.
 * @returns logits `[B, T, V]`; logits[b, t] predicts token t+1. Differentiable.
 * @throws Error when T > block_size.
 */
export function forward(model: GPT, idx: tf.Tensor2D): tf.Tensor3D {
  return tf.tidy(() => {
    const T = idx.shape[1];
    if (T > model.config.block_size) throw new Error(`sequence length ${T} exceeds block_size ${model.config.block_size}`);
    const mask = tf.tensor4d(causalMaskValues(T), [1, 1, T, T]);
    const { h } = forwardHidden(model, idx, null, null, mask);
    return lmHead(model, h) as tf.Tensor3D;
  });
}

/**
 * Log-probability of each next token: out[b, t] = log p(tokens[b, t+1] | tokens[b, <= t]).
 * @param tokens `[B, T]` int32.
 * @returns `[B, T-1]` float32 natural-log probabilities under the plain softmax; differentiable
 *   w.r.t. `model.trainableVariables` (use inside `tf.variableGrads` / `optimizer.minimize`).
 */
export function tokenLogprobs(model: GPT, tokens: tf.Tensor2D): tf.Tensor2D {
  return tf.tidy(() => {
    const [B, T] = tokens.shape;
    const logits = forward(model, tf.slice(tokens, [0, 0], [B, T - 1]));
    const logp = tf.logSoftmax(logits, -1);
    const targets = tf.slice(tokens, [0, 1], [B, T - 1]);
    // oneHot in int32 then cast: the wasm OneHot kernel writes int32 bits when asked for float32.
    const onehot = tf.cast(tf.oneHot(tf.cast(targets, 'int32'), model.config.vocab_size), 'float32');
    return tf.sum(tf.mul(logp, onehot), -1) as tf.Tensor2D;
  });
}

/**
 * Entropy of the next-token distribution at each position: H[b, t] = -sum_v p log p, natural log,
 * of the distribution that predicts token t+1. tokens `[B, T]` -> `[B, T-1]`, differentiable.
 */
export function tokenEntropy(model: GPT, tokens: tf.Tensor2D): tf.Tensor2D {
  return tf.tidy(() => {
    const [B, T] = tokens.shape;
    const logp = tf.logSoftmax(forward(model, tf.slice(tokens, [0, 0], [B, T - 1])), -1);
    return tf.neg(tf.sum(tf.mul(tf.exp(logp), logp), -1)) as tf.Tensor2D;
  });
}

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
  const { block_size, n_head: H, n_embd, vocab_size: V, n_layer } = model.config;
  const hd = n_embd / H;
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
  // first cached column of each row
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
  const anyAll = rows.some((r) => r.allPositions);
  let presentKV: PastKV[] = [];
  const logpT = tf.tidy(() => {
    const idx = tf.tensor2d(idxVals, [B, Nmax], 'int32');
    const pos = tf.tensor2d(posVals, [B, Nmax], 'int32');
    const mask = tf.tensor4d(maskVals, [B, 1, Nmax, Ltot]);
    let past: PastKV[] | null = null;
    if (lockStep) {
      past = shared0.k.map((k, l) => ({ k, v: shared0.v[l] }));
    } else if (Cmax > 0) {
      past = [];
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
    }
    const { h, present } = forwardHidden(model, idx, pos, past, mask);
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
