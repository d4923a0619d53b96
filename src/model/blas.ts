/**
 * The optional native matmul of the wasm backend: tfjs's `BatchMatMul` kernel computed by OpenBLAS
 * (`cblas_sgemm`) through the small N-API addon in native/blas (built at `npm install` when the
 * system has a C compiler and Debian's `libopenblas-dev`; see native/blas/build.mjs).
 *
 * The addon reads the operands and writes the product in place on the wasm heap (Float32Array
 * views from the backend's `typedArrayFromHeap`), so a product costs no copy, and transposed
 * operands are passed to BLAS as flags instead of being materialised. Everything else stays on the
 * wasm kernels. When the addon is missing (no compiler, no OpenBLAS, `npm install --ignore-scripts`)
 * the wasm matmul runs as before, with one log line saying why.
 *
 * Chosen by `LAMER_MATMUL` (read by `initBackend` in every process and worker thread, so a training
 * job's data thread and the serving workers follow the server's setting):
 * - `auto` (default): OpenBLAS when the addon loads, else the wasm matmul;
 * - `blas`: OpenBLAS, and `initBackend` throws when the addon does not load;
 * - `wasm`: the wasm matmul always (the reference for benchmarks).
 * `LAMER_BLAS_THREADS` (default 1): OpenBLAS threads per product. One keeps a product on the
 * calling thread, which is what the serving batcher and the training data thread expect (each
 * thread computes its own products; OpenBLAS's own pool would compete with them for the cores).
 */
import * as tf from '@tensorflow/tfjs';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { blasThreadsFromEnv } from '../config/values.js';

/** The functions of native/blas/blas.c. */
export interface BlasAddon {
  /**
   * For i in [0, batch): c_i `[m, n]` = op(a_i) @ op(b_i), row-major float32; a_i is `[m, k]`
   * (`[k, m]` when transA), b_i `[k, n]` (`[n, k]` when transB); an operand with its batched flag
   * false is one matrix shared by every i. Throws RangeError when an array is shorter than its shape.
   */
  sgemmBatched(a: Float32Array, b: Float32Array, c: Float32Array, batch: number, aBatched: boolean, bBatched: boolean,
    m: number, n: number, k: number, transA: boolean, transB: boolean): void;
  /** OpenBLAS threads per product (>= 1). */
  setThreads(n: number): void;
  /** The loaded OpenBLAS: build configuration, CPU kernel chosen, threads. */
  info(): { config: string; corename: string; threads: number };
}

/** Where the addon is built, relative to the project root. */
export const BLAS_ADDON_PATH = path.join('native', 'blas', 'build', 'Release', 'lamer_blas.node');

/** The addon, or null and why it did not load. */
export type BlasLoad = { addon: BlasAddon | null; reason: string | null };

const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const loaded = new Map<string, BlasLoad>();

/**
 * Loads the addon once per thread (from `root`/native/blas/build/Release; default: this project's
 * root) and sets its threads from `LAMER_BLAS_THREADS`. Never throws: `addon` is null and `reason`
 * says why when it cannot load (an invalid `LAMER_BLAS_THREADS` included).
 */
export function loadBlas(root: string = PROJECT_ROOT): BlasLoad {
  const file = path.join(root, BLAS_ADDON_PATH);
  const known = loaded.get(file);
  if (known) return known;
  let result: BlasLoad;
  if (!fs.existsSync(file)) {
    const why = 'it needs a C compiler and libopenblas-dev at npm install; then run npm run build:blas';
    result = { addon: null, reason: `${BLAS_ADDON_PATH} is not built (${why})` };
  } else {
    try {
      const addon = createRequire(import.meta.url)(file) as BlasAddon;
      addon.setThreads(blasThreadsFromEnv());
      result = { addon, reason: null };
    } catch (err) {
      result = { addon: null, reason: String(err instanceof Error ? err.message : err).split('\n')[0]!.slice(0, 300) };
    }
  }
  loaded.set(file, result);
  return result;
}

type KernelArgs = { inputs: Record<string, tf.TensorInfo | undefined>; backend: any; attrs?: Record<string, unknown> };
type KernelFn = (args: KernelArgs) => tf.TensorInfo | tf.TensorInfo[];

const product = (xs: readonly number[]): number => xs.reduce((p, x) => p * x, 1);

/**
 * A `BatchMatMul` kernel for the wasm backend that runs OpenBLAS: a `[...batchA, M, K]` (`[..., K, M]`
 * when transposeA) @ b `[...batchB, K, N]` (`[..., N, K]` when transposeB) -> `[...batch, M, N]`,
 * where the batch shapes broadcast. Cases it does not cover (a dtype other than float32, or batch
 * shapes whose sizes differ with neither of them 1) go to `fallback`.
 */
export function blasBatchMatMul(addon: BlasAddon, fallback: KernelFn): KernelFn {
  return (args) => {
    const a = args.inputs.a!;
    const b = args.inputs.b!;
    const { transposeA = false, transposeB = false } = (args.attrs ?? {}) as { transposeA?: boolean; transposeB?: boolean };
    if (a.dtype !== 'float32' || b.dtype !== 'float32' || a.shape.length < 2 || b.shape.length < 2) return fallback(args);
    const ra = a.shape.length;
    const rb = b.shape.length;
    const M = transposeA ? a.shape[ra - 1]! : a.shape[ra - 2]!;
    const K = transposeA ? a.shape[ra - 2]! : a.shape[ra - 1]!;
    const Kb = transposeB ? b.shape[rb - 1]! : b.shape[rb - 2]!;
    const N = transposeB ? b.shape[rb - 2]! : b.shape[rb - 1]!;
    const batchA = product(a.shape.slice(0, -2));
    const batchB = product(b.shape.slice(0, -2));
    if (K !== Kb || (batchA !== batchB && batchA !== 1 && batchB !== 1)) return fallback(args);
    const outer = tf.backend_util.assertAndGetBroadcastShape(a.shape.slice(0, -2), b.shape.slice(0, -2));
    const batch = Math.max(batchA, batchB);
    if (product(outer) !== batch) return fallback(args);
    const { backend } = args;
    const out = backend.makeOutput([...outer, M, N], 'float32') as tf.TensorInfo;
    // views after makeOutput: an allocation may grow (and move) the wasm heap
    addon.sgemmBatched(backend.typedArrayFromHeap(a), backend.typedArrayFromHeap(b), backend.typedArrayFromHeap(out),
      batch, batchA > 1, batchB > 1, M, N, K, transposeA, transposeB);
    return out;
  };
}

/**
 * Replaces the wasm backend's `BatchMatMul` with {@link blasBatchMatMul}, falling back to the kernel
 * registered before (call it after the transposed-operand fix, so the fallback keeps that fix).
 */
export function installBlasMatMul(addon: BlasAddon): void {
  const orig = tf.getKernel('BatchMatMul', 'wasm');
  if (!orig) throw new Error('the wasm backend has no BatchMatMul kernel to replace');
  const fn = blasBatchMatMul(addon, orig.kernelFunc as unknown as KernelFn);
  tf.unregisterKernel('BatchMatMul', 'wasm');
  const { setupFunc, disposeFunc } = orig;
  tf.registerKernel({ kernelName: 'BatchMatMul', backendName: 'wasm', kernelFunc: fn as unknown as tf.KernelFunc, setupFunc, disposeFunc });
}
