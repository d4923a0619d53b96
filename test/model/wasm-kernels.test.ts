import { beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { useWasm } from './setup.js';

beforeAll(async () => {
  expect(await useWasm()).toBe('wasm');
});

const range = (shape: number[]) => tf.tensor(Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => i), shape);

describe('wasm kernel fixes', () => {
  it('Slice copies exactly the selected elements (contiguous, strided, 4-D)', () => {
    const x = range([2, 3, 4]);
    expect(tf.slice(x, [1, 0, 0], [1, 3, 4]).arraySync()).toEqual([[[12, 13, 14, 15], [16, 17, 18, 19], [20, 21, 22, 23]]]);
    expect(tf.slice(x, [0, 1, 1], [2, 2, 2]).arraySync()).toEqual([[[5, 6], [9, 10]], [[17, 18], [21, 22]]]);
    const y = range([2, 2, 3, 2]);
    expect(tf.slice(y, [1, 0, 1, 0], [1, 2, 2, 2]).arraySync()).toEqual([[[[14, 15], [16, 17]], [[20, 21], [22, 23]]]]);
    expect(tf.slice(tf.tensor1d([1, 2, 3], 'int32'), [1], [2]).arraySync()).toEqual([2, 3]);
  });

  it('Unpack and SplitV give the same parts as on cpu', () => {
    const x = range([3, 2, 2]);
    expect(tf.unstack(x).map((t) => t.arraySync())).toEqual([[[0, 1], [2, 3]], [[4, 5], [6, 7]], [[8, 9], [10, 11]]]);
    expect(tf.unstack(x, 2).map((t) => t.arraySync())).toEqual([[[0, 2], [4, 6], [8, 10]], [[1, 3], [5, 7], [9, 11]]]);
    expect(tf.split(range([2, 6]), [1, 2, 3], 1).map((t) => t.arraySync())).toEqual([[[0], [6]], [[1, 2], [7, 8]], [[3, 4, 5], [9, 10, 11]]]);
  });

  it('transposed matMul equals the plain product of explicit transposes', () => {
    const a = range([2, 3, 4]);
    const b = range([2, 5, 4]);
    expect(tf.matMul(a, b, false, true).arraySync()).toEqual(tf.matMul(a, tf.transpose(b, [0, 2, 1])).arraySync());
    expect(tf.matMul(tf.transpose(a, [0, 2, 1]), tf.transpose(b, [0, 2, 1]), true, false).arraySync()).toEqual(tf.matMul(a, tf.transpose(b, [0, 2, 1])).arraySync());
    expect(tf.matMul([[1, 2], [3, 4]], [[5, 6], [7, 8]], true, true).arraySync()).toEqual([[23, 31], [34, 46]]);
  });

  it('UnsortedSegmentSum (gather gradient) sums rows per segment', () => {
    const out = tf.unsortedSegmentSum(tf.tensor2d([[1, 2], [3, 4], [5, 6]]), tf.tensor1d([2, 0, 2], 'int32'), 3);
    expect(out.arraySync()).toEqual([[3, 4], [0, 0], [6, 8]]);
  });
});

describe('wasm Sum over leading axes', () => {
  it('equals the row-by-row sum (2-D, 3-D, keepDims) and leaves other reductions alone', () => {
    const x = range([40, 6]);
    const expected = Array.from({ length: 6 }, (_, j) => Array.from({ length: 40 }, (_, i) => i * 6 + j).reduce((a, b) => a + b, 0));
    expect(tf.sum(x, 0).arraySync()).toEqual(expected);
    expect(tf.sum(x, 0, true).shape).toEqual([1, 6]);
    expect(tf.sum(tf.reshape(x, [4, 10, 6]), [0, 1]).arraySync()).toEqual(expected);
    expect(tf.sum(x, 1).arraySync()).toEqual(Array.from({ length: 40 }, (_, i) => 6 * 6 * i + 15));
    expect(tf.sum(x).arraySync()).toBe((240 * 239) / 2);
  });
});

describe('wasm GatherV2 along axis 0', () => {
  it('gathers rows for 1-D and 2-D indices, and other axes still work', () => {
    const x = range([4, 2, 3]);
    expect(tf.gather(x, tf.tensor1d([3, 0, 3], 'int32')).arraySync()).toEqual([
      [[18, 19, 20], [21, 22, 23]], [[0, 1, 2], [3, 4, 5]], [[18, 19, 20], [21, 22, 23]],
    ]);
    expect(tf.gather(range([5, 2]), tf.tensor2d([[1, 4], [0, 0]], [2, 2], 'int32')).arraySync()).toEqual([[[2, 3], [8, 9]], [[0, 1], [0, 1]]]);
    expect(tf.gather(range([2, 3]), tf.tensor1d([2, 0], 'int32'), 1).arraySync()).toEqual([[2, 0], [5, 3]]);
    expect(tf.gather(tf.tensor1d([7, 8, 9], 'int32'), tf.tensor1d([2, 1], 'int32')).arraySync()).toEqual([9, 8]);
  });
});
