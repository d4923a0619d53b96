/**
 * TensorFlow.js backend choice at start (docs/architecture.md "The policy engine and the model").
 *
 * Order for `auto`: `@tensorflow/tfjs-node-gpu` (CUDA) -> `@tensorflow/tfjs-node` (native CPU) ->
 * `wasm` (@tensorflow/tfjs-backend-wasm, single-threaded under Node) -> `cpu` (pure JS).
 * The native packages are optional: they are imported dynamically inside try/catch, so their
 * absence (their install downloads libtensorflow and fails offline) only moves on to wasm.
 * `tensorflow` forces a native backend (throws when none loads); `wasm` / `cpu` force those.
 * `webgpu` is optional and fails soft: it tries `@tensorflow/tfjs-backend-webgpu` on Dawn for Node
 * (the `webgpu` npm package), both imported dynamically and not dependencies of this project
 * (install them with `npm install --no-save webgpu @tensorflow/tfjs-backend-webgpu@<tfjs version>`;
 * see bench/gpu-check.sh); when either is missing or no GPU adapter exists it logs one line and
 * goes on with wasm, then cpu.
 *
 * On wasm, `installWasmPatches` (src/model/wasm-kernels.ts) is applied: transposed matmuls are
 * materialised first, and an `UnsortedSegmentSum` kernel (gradient of `gather`) is registered;
 * per `LAMER_MATMUL`, `BatchMatMul` then runs OpenBLAS through the optional addon (src/model/blas.ts).
 * Kernel choices that depend on the backend (`batchMatMul`) are made here, not in the model maths.
 */
import * as tf from '@tensorflow/tfjs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { matmulFromEnv } from '../config/values.js';
import { type BlasAddon, type BlasLoad, loadBlas } from './blas.js';
import { installWasmPatches } from './wasm-kernels.js';
import type { MatmulKind, TfjsBackend } from '../domain.js';

/** A backend to ask for (src/domain.ts TFJS_BACKENDS). */
export type BackendPreference = TfjsBackend;

export interface BackendLogger {
  info(o: object, msg?: string): void;
  warn(o: object, msg?: string): void;
}

/**
 * Turns off the pure-JS `cpu` backend's one-time console banner ("Hi, looks like you are running
 * TensorFlow.js in Node.js. To speed things up dramatically, install our node backend..."), which
 * it prints on its first tensor write in each process and worker thread. The native backend is an
 * optional dependency left out on purpose (its install downloads libtensorflow), and
 * {@link initBackend} logs one structured line saying which backend runs and why, so the banner
 * only repeats that, once per thread (dozens of times in a test run). The banner is gated by the
 * backend instance's `firstUse` flag; this clears it on the registered instance (creating the
 * instance if needed, which allocates nothing but its tensor map). Idempotent; does nothing when
 * no `cpu` backend is registered.
 */
export function quietCpuBanner(): void {
  try {
    const cpu = tf.findBackend('cpu') as unknown as { firstUse?: boolean } | null;
    if (cpu && typeof cpu.firstUse === 'boolean') cpu.firstUse = false;
  } catch {
    /* no cpu backend: nothing prints the banner */
  }
}

quietCpuBanner();

let chosen: string | null = null;
let matmul: 'blas' | 'wasm' | null = null;
let pending: Promise<string> | null = null;
/** Incremented by every re-initialisation (`reinitBackend`): tensors of an earlier generation are gone. */
let generation = 0;
let reiniting: Promise<string> | null = null;

/** The backend instance's generation: 0 after `initBackend`, +1 per `reinitBackend`. */
export function backendGeneration(): number {
  return generation;
}

/** The wasm backend's matmul (`blas`: OpenBLAS, src/model/blas.ts; `wasm`), or null on other backends and before `initBackend`. */
export function activeMatmul(): 'blas' | 'wasm' | null {
  return matmul;
}

/** Name of the backend chosen by `initBackend` ('tensorflow' | 'webgpu' | 'wasm' | 'cpu'), or null before. */
export function chosenBackend(): string | null {
  return chosen;
}

/**
 * Batched matMul a `[K, M, I]` @ b `[K, I, N]` (or b^T when `transposeB`, b `[K, N, I]`) -> `[K, M, N]`,
 * formulated for the active backend: on wasm the batched matMul kernel runs a naive loop
 * (~1 GFLOP/s), so the K pairs are unstacked and multiplied as 2-D matMuls (XNNPACK path), 3-7x
 * faster at attention sizes (bench/model-attn-micro.ts); with the OpenBLAS matmul
 * (src/model/blas.ts) and on other backends, one batched matMul. Same values either way up to float rounding of the kernels.
 */
export function batchMatMul(a: tf.Tensor3D, b: tf.Tensor3D, transposeB: boolean): tf.Tensor3D {
  if (tf.getBackend() === 'wasm' && matmul !== 'blas') {
    const as = tf.unstack(a) as tf.Tensor2D[];
    const bs = tf.unstack(b) as tf.Tensor2D[];
    return tf.stack(as.map((ai, i) => tf.matMul(ai, bs[i], false, transposeB))) as tf.Tensor3D;
  }
  return tf.matMul(a, b, false, transposeB);
}

/** Tries the native packages in order; when none loads, logs one line with each one's reason. */
async function tryNative(logger?: BackendLogger): Promise<boolean> {
  const reasons: Record<string, string> = {};
  for (const pkg of ['@tensorflow/tfjs-node-gpu', '@tensorflow/tfjs-node']) {
    try {
      // A variable specifier keeps TypeScript and bundlers from requiring the optional package.
      const spec: string = pkg;
      await import(spec);
      if (await tf.setBackend('tensorflow')) {
        logger?.info({ backend: 'tensorflow', package: pkg }, 'tfjs native backend loaded');
        return true;
      }
      reasons[pkg] = 'backend "tensorflow" did not initialise';
    } catch (err) {
      reasons[pkg] = String(err).split('\n')[0]!.slice(0, 200);
    }
  }
  logger?.info({ reasons }, 'tfjs native backend unavailable (optional @tensorflow/tfjs-node[-gpu] not installed or libtensorflow missing); trying wasm');
  return false;
}

/**
 * Tries the WebGPU backend on Dawn for Node: imports `webgpu` (Dawn bindings), exposes its globals
 * and `navigator.gpu`, checks that an adapter exists, then imports `@tensorflow/tfjs-backend-webgpu`
 * and selects it. Any failure (package missing, native binding not loading, no adapter) logs one
 * line and returns false, so the caller moves on to wasm.
 */
async function tryWebgpu(logger?: BackendLogger): Promise<boolean> {
  try {
    // Variable specifiers keep TypeScript from requiring the optional packages.
    const dawnSpec: string = 'webgpu';
    const dawn = (await import(dawnSpec)) as { create(flags: string[]): { requestAdapter(): Promise<unknown> }; globals: object };
    const gpu = dawn.create([]);
    const adapter = await gpu.requestAdapter();
    if (!adapter) throw new Error('no WebGPU adapter (no GPU, or no Vulkan driver for it)');
    Object.assign(globalThis, dawn.globals);
    const nav = (globalThis as { navigator?: object }).navigator;
    if (nav) Object.defineProperty(nav, 'gpu', { value: gpu, configurable: true });
    else Object.defineProperty(globalThis, 'navigator', { value: { gpu }, configurable: true, writable: true });
    const tfSpec: string = '@tensorflow/tfjs-backend-webgpu';
    await import(tfSpec);
    if (await tf.setBackend('webgpu')) {
      logger?.info({ backend: 'webgpu' }, 'tfjs webgpu backend loaded');
      return true;
    }
    throw new Error('backend "webgpu" did not initialise');
  } catch (err) {
    logger?.info({ reason: String(err).split('\n')[0]!.slice(0, 200) }, 'tfjs webgpu backend unavailable (optional webgpu + @tensorflow/tfjs-backend-webgpu not installed, or no GPU adapter); trying wasm');
    return false;
  }
}

/**
 * The OpenBLAS addon to install on the wasm backend per `want` (default: `LAMER_MATMUL`;
 * src/model/blas.ts), or null for the wasm matmul; records the choice for `activeMatmul` and logs it.
 * `load` finds the addon (default `loadBlas`).
 * @throws Error when `LAMER_MATMUL` is invalid, or `want` is `blas` and the addon does not load
 *   (then nothing is recorded).
 */
export function chooseMatmul(
  logger?: BackendLogger,
  want: MatmulKind = matmulFromEnv(),
  load: () => BlasLoad = loadBlas,
): BlasAddon | null {
  if (want === 'wasm') {
    matmul = 'wasm';
    logger?.info({ matmul }, 'matmul: the wasm kernel (LAMER_MATMUL=wasm)');
    return null;
  }
  const { addon, reason } = load();
  if (!addon) {
    if (want === 'blas') throw new Error(`LAMER_MATMUL=blas but the OpenBLAS addon did not load: ${reason}`);
    matmul = 'wasm';
    logger?.info({ matmul, reason }, 'matmul: the wasm kernel (the optional OpenBLAS addon is not available)');
    return null;
  }
  matmul = 'blas';
  logger?.info({ matmul, openblas: addon.info() }, 'matmul: OpenBLAS');
  return addon;
}

async function tryWasm(logger?: BackendLogger): Promise<boolean> {
  let ok = false;
  try {
    const wasm = await import('@tensorflow/tfjs-backend-wasm');
    // Under Node the .wasm binaries are read from the package's dist/ folder.
    const require = createRequire(import.meta.url);
    const dist = path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm'));
    wasm.setWasmPaths(dist + path.sep);
    ok = await tf.setBackend('wasm');
  } catch (err) {
    logger?.warn({ err: String(err).slice(0, 300) }, 'tfjs wasm backend unavailable');
  }
  if (!ok) return false;
  // outside the try: LAMER_MATMUL=blas without the addon stops the start instead of moving on to cpu
  installWasmPatches(chooseMatmul(logger));
  return true;
}

/**
 * Selects and initialises the tfjs backend once per process; later calls return the first choice
 * (a process has one global tfjs engine).
 * @returns the backend name now active.
 * @throws Error when a forced backend cannot be initialised.
 */
export async function initBackend(pref: BackendPreference = 'auto', logger?: BackendLogger): Promise<string> {
  if (chosen) return chosen;
  if (!pending) {
    pending = (async () => {
      let ok = false;
      if (pref === 'auto' || pref === 'tensorflow') ok = await tryNative(logger);
      if (pref === 'webgpu') ok = await tryWebgpu(logger);
      if (!ok && pref === 'tensorflow') throw new Error('tfjs backend "tensorflow" forced but @tensorflow/tfjs-node(-gpu) did not load');
      if (!ok && (pref === 'auto' || pref === 'webgpu' || pref === 'wasm')) ok = await tryWasm(logger);
      if (!ok && pref === 'wasm') throw new Error('tfjs backend "wasm" forced but it did not initialise');
      if (!ok) {
        await tf.setBackend('cpu');
        ok = true;
      }
      await tf.ready();
      chosen = tf.getBackend();
      logger?.info({ backend: chosen }, 'tfjs backend selected');
      return chosen;
    })();
    pending.catch(() => {
      pending = null;
    });
  }
  return pending;
}

/**
 * Replaces the active tfjs backend with a fresh instance of the same kind, after a fault left it
 * unusable (a WebAssembly trap such as "memory access out of bounds" poisons the wasm module's
 * heap: every later op fails). Every tensor of the old instance is lost (its holders reload; see
 * `backendGeneration`). The old instance's `dispose` may itself fault, so it is then unregistered
 * by hand. Concurrent calls for the same faulted generation share one re-initialisation, and a
 * call for a generation already replaced does nothing.
 * @param faulted the generation that faulted (default: the current one).
 * @returns the backend name, active again.
 * @throws Error when no backend was initialised or the new instance does not initialise.
 */
export async function reinitBackend(logger?: BackendLogger, faulted: number = generation): Promise<string> {
  if (reiniting) return reiniting;
  if (faulted !== generation) return chosen ?? tf.getBackend();
  reiniting = doReinit(logger).finally(() => {
    reiniting = null;
  });
  return reiniting;
}

async function doReinit(logger?: BackendLogger): Promise<string> {
  const name = chosen ?? tf.getBackend();
  if (!name) throw new Error('no tfjs backend to re-initialise');
  const factory = tf.findBackendFactory(name);
  if (!factory) throw new Error(`tfjs backend "${name}" has no registered factory`);
  try {
    tf.removeBackend(name);
  } catch (err) {
    logger?.warn({ backend: name, err: String(err).slice(0, 200) }, 'disposing the faulted tfjs backend failed; dropping it');
    const engine = tf.engine() as unknown as {
      registry: Record<string, unknown>;
      registryFactory: Record<string, unknown>;
      backendName: string | null;
      backendInstance: unknown;
      pendingBackendInit: unknown;
    };
    delete engine.registry[name];
    delete engine.registryFactory[name];
    if (engine.backendName === name) {
      engine.backendName = null;
      engine.backendInstance = null;
      engine.pendingBackendInit = null;
    }
  }
  generation++;
  tf.registerBackend(name, factory, name === 'wasm' ? 2 : 1);
  if (!(await tf.setBackend(name))) throw new Error(`tfjs backend "${name}" did not initialise again`);
  if (name === 'wasm') installWasmPatches();
  if (name === 'cpu') quietCpuBanner();
  await tf.ready();
  logger?.info({ backend: name }, 'tfjs backend re-initialised');
  return name;
}
