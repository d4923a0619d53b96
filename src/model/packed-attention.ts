/**
 * Causal self-attention of packed rows (the serving path, src/model/gpt-cached.ts): the new tokens
 * of every row of a batch are stacked into one `[T, 3C]` qkv matrix (no padding), and each row's
 * keys and values before them are read from its KV buffer (src/model/kv-cache.ts `HeapKV`,
 * `[n_layer, 2, capacity, C]`) where they lie, on the backend's own memory (the wasm heap, or the
 * cpu backend's arrays): nothing is padded, stacked, concatenated or copied per row.
 *
 * For new token j of row i (position c_i + j), head h: softmax over keys t = 0 .. c_i + j of
 * (q · k_t) / sqrt(hd), then the weighted sum of the values; keys t < c_i come from the buffer,
 * the others from the row's own new tokens. This is the masked attention of src/model/layers.ts
 * `attention` row by row (same keys, same scale); the sums are accumulated in float64, so results
 * equal the padded path's up to float32 rounding.
 *
 * It is a tfjs kernel (`PACKED_ATTENTION`, registered for the `wasm` and `cpu` backends by
 * `installPackedAttention`), so its output is a tensor that tf.tidy tracks; other backends (native,
 * WebGPU) keep the padded path.
 */
import * as tf from '@tensorflow/tfjs';
import { wasmAttention, type WasmAttention } from './wasm-attention.js';

/** Kernel name of the packed attention. */
export const PACKED_ATTENTION = 'LamerPackedAttention';

/** Layout of one packed forward, shared by every layer's attention call. */
export interface PackedLayout {
  /** New tokens per row (n_i >= 1); row i's are rows `offsets[i] .. offsets[i] + n_i` of qkv. */
  ns: number[];
  offsets: number[];
  /** Cached positions per row (c_i >= 0), read from buffer `bufferOf[i]` (-1 when c_i = 0). */
  cs: number[];
  bufferOf: number[];
  /** Capacity (positions) of each buffer. */
  capacities: number[];
  nLayer: number;
  nHead: number;
}

interface Attrs extends PackedLayout {
  layer: number;
}

/** Scratch for one query's scores (grown on demand). */
let scores = new Float64Array(1024);

/**
 * Scores of query `q[qb .. qb+hd)` against `count` keys starting at `kb` (stride `ks` floats),
 * written to `scores[from ..]`, times `scale`; returns their max and `prevMax`'s larger.
 * Four keys per pass: each query value is loaded once for four products.
 */
function scoreKeys(
  q: Float32Array, qb: number, k: Float32Array, kb: number, ks: number, count: number,
  hd: number, scale: number, from: number, prevMax: number,
): number {
  let max = prevMax;
  let t = 0;
  for (; t + 4 <= count; t += 4) {
    const k0 = kb + t * ks;
    const k1 = k0 + ks;
    const k2 = k1 + ks;
    const k3 = k2 + ks;
    let s0 = 0;
    let s1 = 0;
    let s2 = 0;
    let s3 = 0;
    for (let d = 0; d < hd; d++) {
      const x = q[qb + d];
      s0 += x * k[k0 + d];
      s1 += x * k[k1 + d];
      s2 += x * k[k2 + d];
      s3 += x * k[k3 + d];
    }
    s0 *= scale;
    s1 *= scale;
    s2 *= scale;
    s3 *= scale;
    scores[from + t] = s0;
    scores[from + t + 1] = s1;
    scores[from + t + 2] = s2;
    scores[from + t + 3] = s3;
    max = Math.max(max, s0, s1, s2, s3);
  }
  for (; t < count; t++) {
    const k0 = kb + t * ks;
    let s = 0;
    for (let d = 0; d < hd; d++) s += q[qb + d] * k[k0 + d];
    s *= scale;
    scores[from + t] = s;
    if (s > max) max = s;
  }
  return max;
}

/** acc[0 .. hd) += sum over `count` values from `vb` (stride `vs`) of weight scores[from + t] times value t. */
function addValues(acc: Float64Array, v: Float32Array, vb: number, vs: number, count: number, hd: number, from: number): void {
  let t = 0;
  for (; t + 4 <= count; t += 4) {
    const p0 = scores[from + t];
    const p1 = scores[from + t + 1];
    const p2 = scores[from + t + 2];
    const p3 = scores[from + t + 3];
    const v0 = vb + t * vs;
    const v1 = v0 + vs;
    const v2 = v1 + vs;
    const v3 = v2 + vs;
    for (let d = 0; d < hd; d++) acc[d] += p0 * v[v0 + d] + p1 * v[v1 + d] + p2 * v[v2 + d] + p3 * v[v3 + d];
  }
  for (; t < count; t++) {
    const p = scores[from + t];
    const v0 = vb + t * vs;
    for (let d = 0; d < hd; d++) acc[d] += p * v[v0 + d];
  }
}

/**
 * The attention of layer `layer` for every packed row: reads `qkv` `[T, 3C]` and the buffers
 * (`[n_layer, 2, capacity, C]` each), writes `out` `[T, C]`. Pure function over arrays (the
 * kernels below hand it the backend's memory).
 */
export function attendPacked(qkv: Float32Array, buffers: Float32Array[], out: Float32Array, a: Attrs): void {
  const T = out.length === 0 ? 0 : a.offsets[a.ns.length - 1]! + a.ns[a.ns.length - 1]!;
  const C = T > 0 ? out.length / T : 0;
  const H = a.nHead;
  const hd = C / H;
  const C3 = 3 * C;
  const scale = 1 / Math.sqrt(hd);
  const acc = new Float64Array(hd);
  const longest = Math.max(0, ...a.cs.map((c, i) => c + a.ns[i]!));
  if (scores.length < longest) scores = new Float64Array(2 * longest);
  for (let i = 0; i < a.ns.length; i++) {
    const n = a.ns[i]!;
    const c = a.cs[i]!;
    const o = a.offsets[i]!;
    const buf = c > 0 ? buffers[a.bufferOf[i]!]! : null;
    const cap = c > 0 ? a.capacities[a.bufferOf[i]!]! : 0;
    const kBase = (a.layer * 2) * cap * C; // keys of this layer in the buffer
    const vBase = (a.layer * 2 + 1) * cap * C;
    for (let j = 0; j < n; j++) {
      const row = (o + j) * C3;
      for (let h = 0; h < H; h++) {
        const qb = row + h * hd;
        const ho = h * hd;
        let max = buf ? scoreKeys(qkv, qb, buf, kBase + ho, C, c, hd, scale, 0, -Infinity) : -Infinity;
        max = scoreKeys(qkv, qb, qkv, o * C3 + C + ho, C3, j + 1, hd, scale, c, max);
        const L = c + j + 1;
        let sum = 0;
        for (let t = 0; t < L; t++) {
          const e = Math.exp(scores[t]! - max);
          scores[t] = e;
          sum += e;
        }
        acc.fill(0);
        if (buf) addValues(acc, buf, vBase + ho, C, c, hd, 0);
        addValues(acc, qkv, o * C3 + 2 * C + ho, C3, j + 1, hd, c);
        const y = (o + j) * C + ho;
        for (let d = 0; d < hd; d++) out[y + d] = acc[d]! / sum;
      }
    }
  }
}

/**
 * `attendPacked` in WebAssembly SIMD on the wasm heap (src/model/wasm-attention.ts), one (row,
 * head) at a time: scores, their softmax, the weighted sum of the values.
 * Addresses are the tensors' heap offsets; `scratch` holds one (row, head)'s scores.
 */
function attendOnHeap(k: WasmAttention, backend: any, qkv: tf.TensorInfo, buffers: tf.TensorInfo[], out: tf.TensorInfo, a: Attrs): void {
  const at = (t: tf.TensorInfo) => backend.dataIdMap.get(t.dataId).memoryOffset as number;
  const C = out.shape[1]!;
  const hd = C / a.nHead;
  const C3 = 3 * C;
  const scale = 1 / Math.sqrt(hd);
  const most = Math.max(4, ...a.ns.map((n, i) => n * ((a.cs[i]! + n + 3) & ~3))); // rows of whole f32x4
  const scratch = backend.makeOutput([most], 'float32') as tf.TensorInfo;
  try {
    const [q0, o0, s0] = [at(qkv), at(out), at(scratch)];
    for (let i = 0; i < a.ns.length; i++) {
      const [n, c, o] = [a.ns[i]!, a.cs[i]!, a.offsets[i]!];
      const b0 = c > 0 ? at(buffers[a.bufferOf[i]!]!) : 0;
      const cap = c > 0 ? a.capacities[a.bufferOf[i]!]! : 0;
      for (let h = 0; h < a.nHead; h++) {
        const col = h * hd;
        const kc = b0 + (a.layer * 2 * cap * C + col) * 4;
        k.scores(q0 + (o * C3 + col) * 4, C3 * 4, n, kc, C * 4, c, q0 + (o * C3 + C + col) * 4, C3 * 4, hd * 4, scale, s0);
        k.softmax(s0, n, c);
        const vc = b0 + ((a.layer * 2 + 1) * cap * C + col) * 4;
        k.values(s0, n, c, vc, C * 4, q0 + (o * C3 + 2 * C + col) * 4, C3 * 4, hd * 4, o0 + (o * C + col) * 4, C * 4);
      }
    }
  } finally {
    backend.disposeData(scratch.dataId);
  }
}

/** The SIMD kernels on a wasm backend's memory, or null (another backend, or no SIMD here). */
function simdOf(backend: any): WasmAttention | null {
  const memory = backend?.wasm?.asm?.memory;
  return memory instanceof WebAssembly.Memory ? wasmAttention(memory) : null;
}

/**
 * Whether the active backend runs the packed attention in WebAssembly SIMD (wasm, for head sizes
 * that are multiples of 4); else it runs the JavaScript loops of `attendPacked`.
 */
export function simdAttentionAvailable(): boolean {
  return tf.getBackend() === 'wasm' && simdOf(tf.backend()) !== null;
}

type KernelArgs = { inputs: Record<string, tf.TensorInfo | undefined>; backend: any; attrs?: Record<string, unknown> };

/** The float32 storage of a tensor on the wasm or cpu backend, as a view (writes go to the tensor). */
export function storageOf(backend: any, t: tf.TensorInfo): Float32Array {
  if (typeof backend.typedArrayFromHeap === 'function') return backend.typedArrayFromHeap(t) as Float32Array;
  return backend.data.get(t.dataId).values as Float32Array;
}

/** Inputs: `qkv` `[T, 3C]` and `b0`, `b1`, ... the buffers; attrs: `PackedLayout` and `layer`. Output `[T, C]`. */
function kernelFunc({ inputs, backend, attrs }: KernelArgs): tf.TensorInfo {
  const a = attrs as unknown as Attrs;
  const qkv = inputs.qkv!;
  const [T, C3] = qkv.shape;
  const shape = [T!, C3! / 3];
  // allocate first: on wasm an allocation may grow (and move) the heap, so views come after
  const onHeap = typeof backend.typedArrayFromHeap === 'function'; // wasm; else the cpu backend
  const out: tf.TensorInfo = onHeap
    ? backend.makeOutput(shape, 'float32')
    : backend.makeTensorInfo(shape, 'float32', new Float32Array(T! * (C3! / 3)));
  const bufferInfos = a.capacities.map((_, b) => inputs[`b${b}`]!);
  const simdKernels = onHeap && (C3! / 3 / a.nHead) % 4 === 0 ? simdOf(backend) : null;
  if (simdKernels) attendOnHeap(simdKernels, backend, qkv, bufferInfos, out, a);
  else attendPacked(storageOf(backend, qkv), bufferInfos.map((b) => storageOf(backend, b)), storageOf(backend, out), a);
  return out;
}

/** Registers the packed attention for the wasm and cpu backends (idempotent). */
export function installPackedAttention(): void {
  for (const backendName of ['wasm', 'cpu']) {
    if (tf.getKernel(PACKED_ATTENTION, backendName)) continue;
    tf.registerKernel({ kernelName: PACKED_ATTENTION, backendName, kernelFunc: kernelFunc as unknown as tf.KernelFunc });
  }
}

/** Whether the active backend runs the packed attention (wasm, cpu). */
export function packedAttentionAvailable(): boolean {
  return tf.getKernel(PACKED_ATTENTION, tf.getBackend()) !== undefined;
}

/**
 * Layer `layer`'s attention of packed rows: qkv `[T, 3C]` -> `[T, C]` (heads concatenated, as
 * `causalSelfAttention` lays them out before its output projection). Call inside tf.tidy.
 */
export function packedAttention(qkv: tf.Tensor2D, buffers: tf.Tensor[], layout: PackedLayout, layer: number): tf.Tensor2D {
  const inputs: Record<string, tf.Tensor> = { qkv };
  buffers.forEach((b, i) => (inputs[`b${i}`] = b));
  const attrs = { ...layout, layer } as unknown as tf.NamedAttrMap;
  return tf.engine().runKernel(PACKED_ATTENTION, inputs as tf.NamedTensorMap, attrs) as tf.Tensor2D;
}

installPackedAttention();
