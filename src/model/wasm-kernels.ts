/**
 * Kernel-level fixes for the tfjs wasm backend (shared/PERF-NOTES.md), installed once by
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
 */
import * as tf from '@tensorflow/tfjs';

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

/** Installs the wasm kernel fixes (idempotent). Call after `tf.setBackend('wasm')`. */
export function installWasmPatches(): void {
  if (installed) return;
  installed = true;
  wrapTransposedMatMul('BatchMatMul');
  wrapTransposedMatMul('_FusedMatMul');
  if (!tf.getKernel('UnsortedSegmentSum', 'wasm')) {
    tf.registerKernel({ kernelName: 'UnsortedSegmentSum', backendName: 'wasm', kernelFunc: unsortedSegmentSumWasm as unknown as tf.KernelFunc });
  }
}
