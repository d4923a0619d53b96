import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { activeMatmul } from '../../src/model/backend.js';
import { blasThreadsFromEnv, matmulFromEnv } from '../../src/config/values.js';
import { blasBatchMatMul, loadBlas } from '../../src/model/blas.js';
import { useWasm } from './setup.js';

// The addon is built at npm install when the machine has cc and libopenblas-dev (.ci/run installs
// it); without it the kernel tests cannot run, and say so.
const { addon, reason } = loadBlas();

beforeAll(async () => {
  expect(await useWasm()).toBe('wasm');
});

/** Row-major product of `a` `[..., M, K]` and `b` `[..., K, N]` in float64, batch shapes equal or one of them 1. */
function reference(a: tf.Tensor, b: tf.Tensor, ta: boolean, tb: boolean): number[] {
  const A = ta ? tf.transpose(a, [...a.shape.keys()].map((i, _, all) => (i < all.length - 2 ? i : all.length * 2 - 3 - i))) : a;
  const B = tb ? tf.transpose(b, [...b.shape.keys()].map((i, _, all) => (i < all.length - 2 ? i : all.length * 2 - 3 - i))) : b;
  const [M, K] = A.shape.slice(-2) as [number, number];
  const N = B.shape[B.shape.length - 1]!;
  const av = A.dataSync();
  const bv = B.dataSync();
  const batchA = av.length / (M * K);
  const batchB = bv.length / (K * N);
  const out: number[] = [];
  for (let i = 0; i < Math.max(batchA, batchB); i++) {
    const oa = batchA > 1 ? i * M * K : 0;
    const ob = batchB > 1 ? i * K * N : 0;
    for (let r = 0; r < M; r++) for (let c = 0; c < N; c++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += av[oa + r * K + k]! * bv[ob + k * N + c]!;
      out.push(s);
    }
  }
  return out;
}

const seeded = (shape: number[], seed: number) => tf.randomUniform(shape, -1, 1, 'float32', seed);

describe('LAMER_MATMUL and LAMER_BLAS_THREADS', () => {
  it('accept the documented values and refuse others with the variable named', () => {
    expect(matmulFromEnv({})).toBe('auto');
    expect(matmulFromEnv({ LAMER_MATMUL: '' })).toBe('auto');
    for (const v of ['auto', 'blas', 'wasm'] as const) expect(matmulFromEnv({ LAMER_MATMUL: v })).toBe(v);
    expect(() => matmulFromEnv({ LAMER_MATMUL: 'mkl' })).toThrow('LAMER_MATMUL="mkl": expected one of auto, blas, wasm');
    expect(blasThreadsFromEnv({})).toBe(1);
    expect(blasThreadsFromEnv({ LAMER_BLAS_THREADS: '2' })).toBe(2);
    for (const bad of ['0', '1.5', 'two', '65']) expect(() => blasThreadsFromEnv({ LAMER_BLAS_THREADS: bad })).toThrow(/^LAMER_BLAS_THREADS=.*: expected an integer in \[1, 64\]$/);
  });

  it('a project without the built addon gets a reason, not an error', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lamer-blas-'));
    try {
      const r = loadBlas(dir);
      expect(r.addon).toBeNull();
      expect(r.reason).toMatch(/native\/blas\/build\/Release\/lamer_blas.node is not built .*libopenblas-dev.*npm run build:blas/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe.skipIf(!addon)(`the OpenBLAS BatchMatMul kernel${addon ? '' : ` (skipped: ${reason})`}`, () => {
  it('is the active matmul when LAMER_MATMUL is unset and the addon loads', () => {
    expect(activeMatmul()).toBe('blas');
    expect(addon!.info().threads).toBe(1);
  });

  const cases: Array<[string, number[], number[], boolean, boolean]> = [
    ['2-D', [7, 5], [5, 3], false, false],
    ['2-D, a transposed', [5, 7], [5, 3], true, false],
    ['2-D, b transposed', [7, 5], [3, 5], false, true],
    ['2-D, both transposed', [5, 7], [3, 5], true, true],
    ['3-D batches', [4, 6, 8], [4, 8, 2], false, false],
    ['3-D, b transposed (attention scores)', [4, 6, 8], [4, 9, 8], false, true],
    ['a broadcast over the batch', [1, 6, 8], [3, 8, 2], false, false],
    ['b broadcast over the batch, a transposed', [3, 8, 6], [1, 8, 2], true, false],
    ['4-D', [2, 3, 4, 5], [2, 3, 5, 6], false, false],
    ['a single row (a decode step)', [1, 128], [128, 384], false, false],
  ];
  it.each(cases)('%s equals the float64 reference', (_name, sa, sb, ta, tb) => {
    const a = seeded(sa, 1);
    const b = seeded(sb, 2);
    const got = tf.matMul(a, b, ta, tb);
    const want = reference(a, b, ta, tb);
    const gv = got.dataSync();
    expect(gv.length).toBe(want.length);
    for (let i = 0; i < want.length; i++) expect(gv[i]).toBeCloseTo(want[i]!, 4);
    tf.dispose([a, b, got]);
  });

  it('gives the output shape of the broadcast batch, and zeros when the inner size is 0', () => {
    expect(tf.matMul(tf.ones([1, 2, 3]), tf.ones([4, 3, 5])).shape).toEqual([4, 2, 5]);
    expect(tf.matMul(tf.ones([2, 0]), tf.ones([0, 3])).arraySync()).toEqual([[0, 0, 0], [0, 0, 0]]);
  });

  it('leaves int32 and non-broadcastable batches to the kernel it replaced', () => {
    let fell = 0;
    const fallback = () => {
      fell++;
      return { dataId: {}, shape: [], dtype: 'float32' } as tf.TensorInfo;
    };
    const k = blasBatchMatMul(addon!, fallback);
    const info = (shape: number[], dtype: tf.DataType = 'float32') => ({ dataId: {}, shape, dtype }) as tf.TensorInfo;
    k({ inputs: { a: info([2, 2], 'int32'), b: info([2, 2], 'int32') }, backend: null, attrs: {} });
    k({ inputs: { a: info([2, 2, 3]), b: info([3, 3, 2]) }, backend: null, attrs: {} });
    expect(fell).toBe(2);
  });

  it('gradients through the kernel equal those of the float64 reference', () => {
    const a = seeded([3, 4], 3);
    const b = seeded([4, 2], 4);
    const g = tf.grads((x: tf.Tensor, y: tf.Tensor) => tf.sum(tf.matMul(x, y)))([a, b]);
    // d sum(ab) / da = 1 b^T, d / db = a^T 1
    const ones = tf.ones([3, 2]);
    const da = reference(ones, b, false, true);
    const db = reference(a, ones, true, false);
    g[0]!.dataSync().forEach((v, i) => expect(v).toBeCloseTo(da[i]!, 5));
    g[1]!.dataSync().forEach((v, i) => expect(v).toBeCloseTo(db[i]!, 5));
    tf.dispose([a, b, ones, ...g]);
  });

  it('keeps tensors flat over many products', () => {
    const a = seeded([16, 32], 5);
    const b = seeded([32, 8], 6);
    const before = tf.memory().numTensors;
    for (let i = 0; i < 200; i++) tf.tidy(() => tf.matMul(a, b).sum().dataSync());
    expect(tf.memory().numTensors).toBe(before);
    tf.dispose([a, b]);
  });

  it('the addon refuses arrays shorter than their shapes, and wrong types', () => {
    const small = new Float32Array(3);
    expect(() => addon!.sgemmBatched(small, small, small, 1, false, false, 2, 2, 2, false, false)).toThrow(RangeError);
    expect(() => addon!.sgemmBatched(new Float64Array(4) as unknown as Float32Array, small, small, 1, false, false, 1, 1, 1, false, false)).toThrow(TypeError);
    expect(() => addon!.setThreads(0)).toThrow(TypeError);
  });
});
