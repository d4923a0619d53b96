/**
 * Kernel-level fixes for the tfjs wasm backend, installed once by
 * `initBackend` when wasm is chosen:
 *
 * 1. `BatchMatMul` / `_FusedMatMul` with `transposeA` or `transposeB`: the wasm kernel is 12-15x
 *    slower on transposed operands. The wrapped kernels materialise the transposed operand with
 *    the plain `Transpose` kernel (swap of the last two axes) and call the original kernel with
 *    `transposeA = transposeB = false`. Every caller benefits, including the matmul gradients
 *    (dA = dC B^T, dB = A^T dC), which always use the transposed forms.
 * 2. `UnsortedSegmentSum` (the gradient of `gather`) is missing on wasm: registered here as a
 *    JS loop over the heap views (float32 / int32), which is fast for embedding gradients
 *    ([tokens, n_embd] rows summed into [vocab, n_embd]).
 * 3. `Slice`, `Unpack` (unstack) and `SplitV` (split): the wasm `Slice` kernel reads its input
 *    with `readSync`, which copies the *whole* input tensor out of the heap on every call, so
 *    unstacking a [128, ...] tensor copies it 128 times (measured: 520 ms for a 4 MB tensor).
 *    The replacements copy only the selected runs from a heap view.
 * 4. `Sum` over the leading axes of a float32 tensor (bias and LayerNorm-gain gradients:
 *    [tokens, C] -> [C]): the wasm kernel transposes the reduced axes last first, which is slow;
 *    it is computed as ones[1, M] @ x[M, R] with the (fast, 2-D) matMul kernel instead.
 */
import * as tf from '@tensorflow/tfjs';
import { type BlasAddon, installBlasMatMul } from './blas.js';

type KernelArgs = {
  inputs: Record<string, tf.TensorInfo | undefined>;
  backend: any;
  attrs?: Record<string, unknown>;
};
type KernelFn = (args: KernelArgs) => tf.TensorInfo | tf.TensorInfo[];

let installed = false;

function swapLastTwo(rank: number): number[] {
  const perm = Array.from({ length: rank }, (_, i) => i);
  perm[rank - 2] = rank - 1;
  perm[rank - 1] = rank - 2;
  return perm;
}

function wrapTransposedMatMul(kernelName: string): void {
  const orig = tf.getKernel(kernelName, 'wasm');
  const transposeKernel = tf.getKernel('Transpose', 'wasm');
  if (!orig || !transposeKernel) return;
  const origFn = orig.kernelFunc as unknown as KernelFn;
  const transposeFn = transposeKernel.kernelFunc as unknown as KernelFn;
  const wrapped: KernelFn = (args) => {
    const attrs = (args.attrs ?? {}) as { transposeA?: boolean; transposeB?: boolean };
    if (!attrs.transposeA && !attrs.transposeB) return origFn(args);
    const { backend } = args;
    const temps: tf.TensorInfo[] = [];
    const inputs = { ...args.inputs };
    for (const [key, flag] of [['a', attrs.transposeA], ['b', attrs.transposeB]] as const) {
      const x = inputs[key];
      if (!flag || !x) continue;
      const t = transposeFn({ inputs: { x }, backend, attrs: { perm: swapLastTwo(x.shape.length) } }) as tf.TensorInfo;
      temps.push(t);
      inputs[key] = t;
    }
    const out = origFn({ inputs, backend, attrs: { ...args.attrs, transposeA: false, transposeB: false } });
    for (const t of temps) backend.disposeData(t.dataId);
    return out;
  };
  tf.unregisterKernel(kernelName, 'wasm');
  tf.registerKernel({ kernelName, backendName: 'wasm', kernelFunc: wrapped as unknown as tf.KernelFunc, setupFunc: orig.setupFunc, disposeFunc: orig.disposeFunc });
}

/**
 * UnsortedSegmentSum for wasm. Inputs: x `[S..., R...]`, segmentIds `[S...]` int32;
 * attr numSegments. Output `[numSegments, R...]`: out[s] = sum over i with segmentIds[i] = s of x[i].
 * Ids outside [0, numSegments) are ignored (TensorFlow semantics).
 */
const unsortedSegmentSumWasm: KernelFn = ({ inputs, backend, attrs }) => {
  const x = inputs.x!;
  const ids = inputs.segmentIds!;
  const numSegments = (attrs as { numSegments: number }).numSegments;
  const idsVals = backend.typedArrayFromHeap(ids) as Int32Array | Float32Array;
  const n = idsVals.length;
  const rowShape = x.shape.slice(ids.shape.length);
  const rowSize = rowShape.reduce((a, b) => a * b, 1);
  const out = backend.makeOutput([numSegments, ...rowShape], x.dtype) as tf.TensorInfo;
  // Views are taken after makeOutput: allocation may grow (and move) the wasm heap.
  const xVals = backend.typedArrayFromHeap(x) as Float32Array | Int32Array;
  const outVals = backend.typedArrayFromHeap(out) as Float32Array | Int32Array;
  outVals.fill(0);
  for (let i = 0; i < n; i++) {
    const s = idsVals[i];
    if (s < 0 || s >= numSegments) continue;
    const src = i * rowSize;
    const dst = s * rowSize;
    for (let j = 0; j < rowSize; j++) outVals[dst + j] += xVals[src + j];
  }
  return out;
};

/**
 * Copies the slice `begin`/`size` of `x` into a new output, reading the heap in place.
 * Runs: the trailing dims taken whole are merged into one contiguous run per outer index.
 */
function sliceFromHeap(backend: any, x: tf.TensorInfo, begin: number[], size: number[]): tf.TensorInfo {
  const rank = x.shape.length;
  const out = backend.makeOutput(size.slice(), x.dtype) as tf.TensorInfo;
  if (size.some((n) => n === 0)) return out;
  const xv = backend.typedArrayFromHeap(x) as Float32Array;
  const ov = backend.typedArrayFromHeap(out) as Float32Array;
  if (rank === 0) {
    ov.set(xv);
    return out;
  }
  const strides = new Array<number>(rank);
  strides[rank - 1] = 1;
  for (let d = rank - 2; d >= 0; d--) strides[d] = strides[d + 1] * x.shape[d + 1];
  // k: last dim that is not taken whole; all dims after k are whole, so a run is size[k]*strides[k].
  let k = rank - 1;
  while (k > 0 && begin[k] === 0 && size[k] === x.shape[k]) k--;
  const run = size[k] * strides[k];
  const base = begin[k] * strides[k];
  const idx = new Array<number>(k).fill(0);
  let o = 0;
  for (;;) {
    let off = base;
    for (let d = 0; d < k; d++) off += (begin[d] + idx[d]) * strides[d];
    ov.set(xv.subarray(off, off + run), o);
    o += run;
    let d = k - 1;
    while (d >= 0) {
      idx[d]++;
      if (idx[d] < size[d]) break;
      idx[d] = 0;
      d--;
    }
    if (d < 0) break;
  }
  return out;
}

const sliceWasm: KernelFn = ({ inputs, backend, attrs }) => {
  const x = inputs.x!;
  const a = attrs as { begin: number | number[]; size?: number | number[] };
  const [begin, size] = tf.slice_util.parseSliceParams(x as tf.Tensor, a.begin, a.size);
  return sliceFromHeap(backend, x, begin, size);
};

const unpackWasm: KernelFn = ({ inputs, backend, attrs }) => {
  const x = inputs.value!;
  let axis = (attrs as { axis: number }).axis;
  if (axis < 0) axis += x.shape.length;
  const outShape = x.shape.filter((_, i) => i !== axis);
  const begin = new Array<number>(x.shape.length).fill(0);
  const size = x.shape.slice();
  size[axis] = 1;
  const outs: tf.TensorInfo[] = [];
  for (let i = 0; i < x.shape[axis]; i++) {
    begin[axis] = i;
    const o = sliceFromHeap(backend, x, begin, size);
    outs.push({ dataId: o.dataId, dtype: o.dtype, shape: outShape } as tf.TensorInfo);
  }
  return outs;
};

const splitVWasm: KernelFn = ({ inputs, backend, attrs }) => {
  const x = inputs.x!;
  const a = attrs as { numOrSizeSplits: number | number[]; axis: number | number[] };
  const axis = tf.util.parseAxisParam(a.axis, x.shape)[0];
  const sizes = tf.backend_util.prepareSplitSize(x as tf.Tensor, a.numOrSizeSplits, axis);
  const begin = new Array<number>(x.shape.length).fill(0);
  return sizes.map((s) => {
    const size = x.shape.slice();
    size[axis] = s;
    const o = sliceFromHeap(backend, x, begin.slice(), size);
    begin[axis] += s;
    return o;
  });
};

function wrapLeadingAxesSum(): void {
  const orig = tf.getKernel('Sum', 'wasm');
  const mm = tf.getKernel('BatchMatMul', 'wasm');
  if (!orig || !mm) return;
  const origFn = orig.kernelFunc as unknown as KernelFn;
  const mmFn = mm.kernelFunc as unknown as KernelFn;
  const fn: KernelFn = (args) => {
    const x = args.inputs.x!;
    const { axis, keepDims } = args.attrs as { axis: number | number[]; keepDims: boolean };
    const rank = x.shape.length;
    const axes = tf.util.parseAxisParam(axis, x.shape).sort((a, b) => a - b);
    const leading = axes.length > 0 && axes.length < rank && axes.every((a, i) => a === i);
    const M = x.shape.slice(0, axes.length).reduce((a, b) => a * b, 1);
    const R = x.shape.slice(axes.length).reduce((a, b) => a * b, 1);
    if (x.dtype !== 'float32' || !leading || M < 16 || R < 4) return origFn(args);
    const { backend } = args;
    const ones = backend.makeOutput([1, M], 'float32') as tf.TensorInfo;
    (backend.typedArrayFromHeap(ones) as Float32Array).fill(1);
    const x2 = { dataId: x.dataId, shape: [M, R], dtype: x.dtype } as tf.TensorInfo;
    const out = mmFn({ inputs: { a: ones, b: x2 }, backend, attrs: { transposeA: false, transposeB: false } }) as tf.TensorInfo;
    backend.disposeData(ones.dataId);
    const rest = x.shape.slice(axes.length);
    (out as { shape: number[] }).shape = keepDims ? [...axes.map(() => 1), ...rest] : rest;
    return out;
  };
  tf.unregisterKernel('Sum', 'wasm');
  tf.registerKernel({ kernelName: 'Sum', backendName: 'wasm', kernelFunc: fn as unknown as tf.KernelFunc, setupFunc: orig.setupFunc, disposeFunc: orig.disposeFunc });
}

function wrapRowGather(): void {
  const orig = tf.getKernel('GatherV2', 'wasm');
  if (!orig) return;
  const origFn = orig.kernelFunc as unknown as KernelFn;
  const fn: KernelFn = (args) => {
    const { x, indices } = args.inputs as { x: tf.TensorInfo; indices: tf.TensorInfo };
    const { axis, batchDims } = args.attrs as { axis: number; batchDims: number };
    const ax = tf.util.parseAxisParam(axis, x.shape)[0];
    if (ax !== 0 || (batchDims ?? 0) !== 0 || x.dtype === 'string' || indices.dtype !== 'int32' || x.shape.length < 1) return origFn(args);
    const { backend } = args;
    const rows = x.shape[0];
    const rowSize = x.shape.slice(1).reduce((a, b) => a * b, 1);
    const out = backend.makeOutput([...indices.shape, ...x.shape.slice(1)], x.dtype) as tf.TensorInfo;
    const idx = backend.typedArrayFromHeap(indices) as Int32Array;
    const xv = backend.typedArrayFromHeap(x) as Float32Array;
    const ov = backend.typedArrayFromHeap(out) as Float32Array;
    for (let i = 0; i < idx.length; i++) {
      const r = idx[i];
      if (r < 0 || r >= rows) throw new Error(`GatherV2: index ${r} is not in [0, ${rows})`);
      ov.set(xv.subarray(r * rowSize, (r + 1) * rowSize), i * rowSize);
    }
    return out;
  };
  tf.unregisterKernel('GatherV2', 'wasm');
  tf.registerKernel({ kernelName: 'GatherV2', backendName: 'wasm', kernelFunc: fn as unknown as tf.KernelFunc, setupFunc: orig.setupFunc, disposeFunc: orig.disposeFunc });
}

function replaceKernel(kernelName: string, kernelFunc: KernelFn): void {
  const orig = tf.getKernel(kernelName, 'wasm');
  if (!orig) return;
  const origFn = orig.kernelFunc as unknown as KernelFn;
  // string tensors keep the original implementation
  const fn: KernelFn = (args) => (Object.values(args.inputs).some((t) => t?.dtype === 'string') ? origFn(args) : kernelFunc(args));
  tf.unregisterKernel(kernelName, 'wasm');
  tf.registerKernel({ kernelName, backendName: 'wasm', kernelFunc: fn as unknown as tf.KernelFunc, setupFunc: orig.setupFunc, disposeFunc: orig.disposeFunc });
}

/**
 * Installs the wasm kernel fixes (idempotent). Call after `tf.setBackend('wasm')`. With `blas`, the
 * `BatchMatMul` kernel (and the leading-axes `Sum`, which calls it) runs OpenBLAS
 * (src/model/blas.ts), keeping the fixed wasm kernel for the cases it does not cover.
 */
export function installWasmPatches(blas: BlasAddon | null = null): void {
  if (installed) return;
  installed = true;
  wrapTransposedMatMul('BatchMatMul');
  if (blas) installBlasMatMul(blas);
  wrapTransposedMatMul('_FusedMatMul');
  replaceKernel('Slice', sliceWasm);
  replaceKernel('Unpack', unpackWasm);
  replaceKernel('SplitV', splitVWasm);
  wrapLeadingAxesSum();
  wrapRowGather();
  if (!tf.getKernel('UnsortedSegmentSum', 'wasm')) {
    tf.registerKernel({ kernelName: 'UnsortedSegmentSum', backendName: 'wasm', kernelFunc: unsortedSegmentSumWasm as unknown as tf.KernelFunc });
  }
}
