/**
 * The builtin policy model: a GPT-style decoder-only transformer in TensorFlow.js, written the way
 * nanoGPT's `model.py` is (docs/architecture.md "The policy engine and the model"): explicit tf ops
 * on `tf.Variable`s, names that match the paper and nanoGPT (`wte`, `wpe`, `h.{i}.attn.c_attn`,
 * `n_embd`, `block_size`).
 *
 * Architecture (Radford et al. 2019, GPT-2; nanoGPT):
 *   x = wte[idx] + wpe[pos]                                   [B, T, C]
 *   (pos = 0..T-1 as served; training may start each row at an offset, see `forward`)
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
 * The block maths (LayerNorm, attention, MLP, block) are functions over typed per-layer
 * parameters in src/model/layers.ts; the parameters are bound by name once, when the model is made.
 *
 * Training API (used by src/training): `initModel`, `forward`, `tokenLogprobs`, `tokenEntropy`,
 * `model.trainableVariables`; checkpoints are in src/model/checkpoint.ts.
 * Serving API: `forwardCached` in src/model/gpt-cached.ts (per-row KV caches, batched).
 */
import * as tf from '@tensorflow/tfjs';
import { block, layerNorm, type Dims, type LayerNormParams, type LayerParams, type PastKV } from './layers.js';
import { entropyFromLogits, logprobsFromLogits } from './logprobs.js';
import { VOCAB_SIZE } from './tokenizer.js';

export interface GPTConfig {
  vocab_size: number;
  /** Maximum context length in tokens (learned positional embeddings have this many rows). */
  block_size: number;
  n_layer: number;
  n_head: number;
  n_embd: number;
}

/**
 * The model shapes the recipes start from, in one place:
 * - `BASE_SHAPE`: the shipped base, models/base (`npm run model:sft-base`, src/recipes/sft-base/,
 *   with the game vocabulary of 381 tokens): 4 layers x 128, 4 heads, block 384; 891,264 parameters.
 * - `DEFAULT_CONFIG`: a model of the byte vocabulary (260 tokens), 2 layers x 128, 4 heads, block
 *   1024 (~0.56M parameters, 2.2 MB of float32): what `npm run model:init` initialises and
 *   `npm run model:sft-chat` trains without shape options, and the model of the benches and tests.
 *   It is not the shipped base.
 */
export const BASE_SHAPE: Readonly<Omit<GPTConfig, 'vocab_size'>> = { n_layer: 4, n_embd: 128, n_head: 4, block_size: 384 };

/** The byte-vocabulary default config (see BASE_SHAPE above); not the shipped base. */
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
  /** Token embedding `[V, C]` (also the tied head). */
  readonly wte: tf.Variable;
  /** Position embedding `[block_size, C]`. */
  readonly wpe: tf.Variable;
  /** Per block, its parameters (the same variables as in `params`). */
  readonly layers: LayerParams[];
  /** Final LayerNorm. */
  readonly lnF: LayerNormParams;
  dispose(): void;
}

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
    ...bindParams(config, params),
    dispose() {
      for (const v of trainableVariables) v.dispose();
    },
  };
}

/** Binds the named parameters to the typed fields of `GPT` (once per model). */
function bindParams(config: GPTConfig, params: Map<string, tf.Variable>): Pick<GPT, 'wte' | 'wpe' | 'layers' | 'lnF'> {
  const p = (name: string): tf.Variable => {
    const v = params.get(name);
    if (!v) throw new Error(`missing parameter ${name}`);
    return v;
  };
  const layers: LayerParams[] = [];
  for (let i = 0; i < config.n_layer; i++) {
    const pre = `h.${i}.`;
    layers.push({
      ln1: { g: p(pre + 'ln_1.g'), b: p(pre + 'ln_1.b') },
      attn: { cAttnW: p(pre + 'attn.c_attn.w'), cAttnB: p(pre + 'attn.c_attn.b'), cProjW: p(pre + 'attn.c_proj.w'), cProjB: p(pre + 'attn.c_proj.b') },
      ln2: { g: p(pre + 'ln_2.g'), b: p(pre + 'ln_2.b') },
      mlp: { cFcW: p(pre + 'mlp.c_fc.w'), cFcB: p(pre + 'mlp.c_fc.b'), cProjW: p(pre + 'mlp.c_proj.w'), cProjB: p(pre + 'mlp.c_proj.b') },
    });
  }
  return { wte: p('wte'), wpe: p('wpe'), layers, lnF: { g: p('ln_f.g'), b: p('ln_f.b') } };
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

/**
 * Core forward shared by training and serving.
 * @param idx `[B, N]` int32 token ids (the new tokens).
 * @param pos `[B, N]` int32 positions, or null for 0..N-1 in every row (training at offset 0).
 * @param past per layer `[B, H, P, hd]` keys/values before the new tokens, or null (P = 0).
 * @param mask additive attention mask `[B or 1, 1, N, P + N]` (0 allowed, -1e9 masked).
 * @returns hidden states after ln_f `[B, N, C]` and per layer the keys/values of past and new
 *   tokens `[B, H, P + N, hd]`. Call inside tf.tidy.
 */
export function forwardHidden(
  model: GPT,
  idx: tf.Tensor2D,
  pos: tf.Tensor2D | null,
  past: PastKV[] | null,
  mask: tf.Tensor4D,
): { h: tf.Tensor3D; present: PastKV[] } {
  const { n_head, n_embd } = model.config;
  const [B, N] = idx.shape;
  const C = n_embd;
  const d: Dims = { B, N, H: n_head, hd: n_embd / n_head, C };
  const tokEmb = tf.reshape(tf.gather(model.wte, tf.reshape(idx, [-1])), [B, N, C]);
  const posEmb = pos
    ? tf.reshape(tf.gather(model.wpe, tf.reshape(pos, [-1])), [B, N, C])
    : tf.slice(model.wpe, [0, 0], [N, C]); // [N, C], broadcast over B
  let x = tf.reshape(tf.add(tokEmb, posEmb), [B * N, C]) as tf.Tensor2D;
  const present: PastKV[] = [];
  model.layers.forEach((layer, l) => {
    const out = block(x, layer, past ? past[l] : null, mask, d);
    x = out.x;
    present.push(out.present);
  });
  const h = tf.reshape(layerNorm(x, model.lnF), [B, N, C]) as tf.Tensor3D;
  return { h, present };
}

/** Weight-tied language-model head: h `[..., C]` -> logits `[..., V]` = h @ wte^T. */
export function lmHead(model: GPT, h: tf.Tensor): tf.Tensor {
  const C = model.config.n_embd;
  const lead = h.shape.slice(0, -1);
  const logits = tf.matMul(tf.reshape(h, [-1, C]) as tf.Tensor2D, model.wte as tf.Tensor2D, false, true);
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
 * Positions of a full-sequence forward with per-row offsets: pos[b, t] = min(offsets[b] + t,
 * block_size - 1), `[B, T]` int32. The clamp only reaches positions past a row's last token (its
 * right padding) when offsets[b] + (row length) <= block_size, as the training batches guarantee
 * (src/training/data/batch.ts makeBatch); under the causal mask those positions never change the
 * logits of the tokens before them. Call inside tf.tidy.
 */
function offsetPositions(offsets: tf.Tensor1D, T: number, blockSize: number): tf.Tensor2D {
  const pos = tf.add(tf.reshape(tf.cast(offsets, 'int32'), [-1, 1]), tf.reshape(tf.range(0, T, 1, 'int32'), [1, T]));
  return tf.maximum(tf.minimum(pos, tf.scalar(blockSize - 1, 'int32')), tf.scalar(0, 'int32')) as tf.Tensor2D;
}

/**
 * Full-sequence forward (training and reference).
 * @param idx `[B, T]` int32 token ids, T <= block_size.
 * @param positionOffsets `[B]` int32 start position of each row (training's random position
 *   offsets): row b's token t is at position offsets[b] + t (clamped to block_size - 1, see
 *   `offsetPositions`). null or absent: positions 0..T-1 in every row, as served
 *   (src/model/gpt-cached.ts); that path is the one this function always had.
 * @returns logits `[B, T, V]`; logits[b, t] predicts token t+1. Differentiable.
 * @throws Error when T > block_size, or positionOffsets is not `[B]`.
 */
export function forward(model: GPT, idx: tf.Tensor2D, positionOffsets: tf.Tensor1D | null = null): tf.Tensor3D {
  return tf.tidy(() => {
    const [B, T] = idx.shape;
    if (T > model.config.block_size) throw new Error(`sequence length ${T} exceeds block_size ${model.config.block_size}`);
    if (positionOffsets && (positionOffsets.rank !== 1 || positionOffsets.shape[0] !== B)) throw new Error(`positionOffsets must be [${B}], got [${positionOffsets.shape}]`);
    const mask = tf.tensor4d(causalMaskValues(T), [1, 1, T, T]);
    const pos = positionOffsets ? offsetPositions(positionOffsets, T, model.config.block_size) : null;
    const { h } = forwardHidden(model, idx, pos, null, mask);
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
    return logprobsFromLogits(logits, tf.slice(tokens, [0, 1], [B, T - 1]));
  });
}

/**
 * Entropy of the next-token distribution at each position: H[b, t] = -sum_v p log p, natural log,
 * of the distribution that predicts token t+1. tokens `[B, T]` -> `[B, T-1]`, differentiable.
 */
export function tokenEntropy(model: GPT, tokens: tf.Tensor2D): tf.Tensor2D {
  return tf.tidy(() => {
    const [B, T] = tokens.shape;
    return entropyFromLogits(forward(model, tf.slice(tokens, [0, 0], [B, T - 1])));
  });
}
