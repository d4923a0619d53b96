/**
 * The GPT's building blocks as functions over typed parameters (nanoGPT `model.py`:
 * `LayerNorm`, `CausalSelfAttention`, `MLP`, `Block`). Used by src/model/gpt.ts.
 *
 * Shapes: B batch, N new tokens, P past tokens, L = P + N keys, C n_embd, H n_head, hd = C / H.
 * Activations are flattened to `[B*N, C]` between blocks. Call inside tf.tidy.
 */
import * as tf from '@tensorflow/tfjs';
import { batchMatMul } from './backend.js';

/** LayerNorm gain and bias, `[C]` each. */
export interface LayerNormParams {
  g: tf.Variable;
  b: tf.Variable;
}

/** Causal self-attention: fused qkv projection `[C, 3C]` + `[3C]`, output projection `[C, C]` + `[C]`. */
export interface AttentionParams {
  cAttnW: tf.Variable;
  cAttnB: tf.Variable;
  cProjW: tf.Variable;
  cProjB: tf.Variable;
}

/** MLP: `[C, 4C]` + `[4C]` up, `[4C, C]` + `[C]` down. */
export interface MlpParams {
  cFcW: tf.Variable;
  cFcB: tf.Variable;
  cProjW: tf.Variable;
  cProjB: tf.Variable;
}

/** One transformer block's parameters (checkpoint names `h.{i}.ln_1.g`, `h.{i}.attn.c_attn.w`, ...). */
export interface LayerParams {
  ln1: LayerNormParams;
  attn: AttentionParams;
  ln2: LayerNormParams;
  mlp: MlpParams;
}

/** Keys and values of one layer: `[B, H, L, hd]` each. */
export interface PastKV {
  k: tf.Tensor4D;
  v: tf.Tensor4D;
}

/** Sizes of one forward: batch B, new tokens N, heads H, head size hd, width C. */
export interface Dims {
  B: number;
  N: number;
  H: number;
  hd: number;
  C: number;
}

/** LayerNorm over the last axis, eps 1e-5. x `[..., C]`. */
export function layerNorm(x: tf.Tensor, p: LayerNormParams): tf.Tensor {
  const { mean, variance } = tf.moments(x, -1, true);
  return tf.add(tf.mul(tf.mul(tf.sub(x, mean), tf.rsqrt(tf.add(variance, 1e-5))), p.g), p.b);
}

/**
 * GELU, tanh approximation (GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), computed with
 * the identity 0.5 (1 + tanh(z)) = sigmoid(2 z), i.e. x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)):
 * the same function, but wasm's Sigmoid is ~10x faster than its Tanh, and x*x*x than Pow.
 */
export function gelu(x: tf.Tensor): tf.Tensor {
  const x3 = tf.mul(tf.mul(x, x), x);
  const z = tf.mul(tf.add(x, tf.mul(x3, 0.044715)), 2 * Math.sqrt(2 / Math.PI));
  return tf.mul(x, tf.sigmoid(z));
}

/** x `[N, in]` @ w `[in, out]` + b `[out]`. */
export function linear(x: tf.Tensor2D, w: tf.Tensor, b: tf.Tensor): tf.Tensor2D {
  return tf.add(tf.matMul(x, w as tf.Tensor2D), b) as tf.Tensor2D;
}

/**
 * Scaled dot-product attention over B*H independent (batch, head) pairs.
 * q `[B*H, N, hd]`, k and v `[B*H, L, hd]`, additive mask `[B or 1, 1, N, L]` -> `[B*H, N, hd]`:
 * softmax(q k^T * scale + mask) v.
 * N = 1 (a decode step): scores by multiply + sum over hd, then one batched matMul with v;
 * N > 1: `batchMatMul` (src/model/backend.ts picks the fastest formulation for the backend).
 */
export function attention(q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D, mask: tf.Tensor4D, B: number, H: number, scale: number): tf.Tensor3D {
  const [BH, N] = q.shape;
  const L = k.shape[1];
  const softmaxMasked = (scores: tf.Tensor) =>
    tf.reshape(tf.softmax(tf.add(tf.reshape(tf.mul(scores, scale), [B, H, N, L]), mask), -1), [BH, N, L]) as tf.Tensor3D;
  if (N === 1) {
    const att = softmaxMasked(tf.sum(tf.mul(q, k), -1)); // [BH, L] -> [BH, 1, L]
    return tf.matMul(att, v);
  }
  const att = softmaxMasked(batchMatMul(q, k, true));
  return batchMatMul(att, v, false);
}

/**
 * Causal multi-head self-attention of `[B*N, C]` (already LayerNormed) with the layer's past
 * keys/values (or none): returns the projected output `[B*N, C]` and the keys/values of past and
 * new tokens `[B, H, P + N, hd]` (`present`).
 */
export function causalSelfAttention(a: tf.Tensor2D, p: AttentionParams, past: PastKV | null, mask: tf.Tensor4D, d: Dims): { y: tf.Tensor2D; present: PastKV } {
  const { B, N, H, hd, C } = d;
  // [B*N, C] -> [B, H, N, hd]
  const heads = (t: tf.Tensor) => tf.transpose(tf.reshape(t, [B, N, H, hd]), [0, 2, 1, 3]) as tf.Tensor4D;
  const qkv = linear(a, p.cAttnW, p.cAttnB); // [B*N, 3C]
  const [q2, k2, v2] = tf.split(qkv, 3, 1);
  const q = heads(q2);
  const kNew = heads(k2);
  const vNew = heads(v2);
  const k = past ? (tf.concat([past.k, kNew], 2) as tf.Tensor4D) : kNew; // [B, H, L, hd]
  const v = past ? (tf.concat([past.v, vNew], 2) as tf.Tensor4D) : vNew;
  const L = k.shape[2];
  const y = attention(tf.reshape(q, [B * H, N, hd]) as tf.Tensor3D, tf.reshape(k, [B * H, L, hd]) as tf.Tensor3D,
    tf.reshape(v, [B * H, L, hd]) as tf.Tensor3D, mask, B, H, 1 / Math.sqrt(hd)); // [B*H, N, hd]
  const yc = tf.reshape(tf.transpose(tf.reshape(y, [B, H, N, hd]), [0, 2, 1, 3]), [B * N, C]) as tf.Tensor2D;
  return { y: linear(yc, p.cProjW, p.cProjB), present: { k, v } };
}

/** MLP: gelu(x W_fc + b_fc) W_proj + b_proj, `[M, C]` -> `[M, C]`. */
export function mlp(x: tf.Tensor2D, p: MlpParams): tf.Tensor2D {
  const hid = gelu(linear(x, p.cFcW, p.cFcB)) as tf.Tensor2D;
  return linear(hid, p.cProjW, p.cProjB);
}

/** Pre-LayerNorm block: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)). x `[B*N, C]`. */
export function block(x: tf.Tensor2D, p: LayerParams, past: PastKV | null, mask: tf.Tensor4D, d: Dims): { x: tf.Tensor2D; present: PastKV } {
  const { y, present } = causalSelfAttention(layerNorm(x, p.ln1) as tf.Tensor2D, p.attn, past, mask, d);
  const x1 = tf.add(x, y) as tf.Tensor2D;
  const x2 = tf.add(x1, mlp(layerNorm(x1, p.ln2) as tf.Tensor2D, p.mlp)) as tf.Tensor2D;
  return { x: x2, present };
}
