/** Minibatch orders and micro-batch splits: coverage, determinism per seed, the memory budget. */
import { describe, expect, it } from 'vitest';
import { lengthBucketedMinibatches, minibatchOrder, splitMicroBatches } from '../../src/training/minibatches.js';

describe('lengthBucketedMinibatches', () => {
  it('covers every sample once, ceil(n / mb) batches, similar lengths together', () => {
    const lengths = Array.from({ length: 37 }, (_, i) => (i * 7919) % 100);
    const batches = lengthBucketedMinibatches(lengths, 4, 3);
    expect(batches).toHaveLength(10);
    expect(batches.flat().sort((a, b) => a - b)).toEqual(Array.from({ length: 37 }, (_, i) => i));
    // within a window of 8 batches the lengths are sorted: a batch's spread is small
    const spread = (b: number[]) => Math.max(...b.map((i) => lengths[i])) - Math.min(...b.map((i) => lengths[i]));
    const mean = batches.reduce((a, b) => a + spread(b), 0) / batches.length;
    expect(mean).toBeLessThan(25);
    expect(lengthBucketedMinibatches(lengths, 4, 3)).toEqual(batches); // deterministic per seed
  });
});

describe('splitMicroBatches', () => {
  it('splitMicroBatches keeps count x longest within the budget, longest first', () => {
    const lengths = [10, 40, 25, 5, 40];
    expect(splitMicroBatches([0, 1, 2, 3, 4], lengths, 80)).toEqual([[1, 4], [2, 0, 3]]);
    expect(splitMicroBatches([0, 1], lengths, 10)).toEqual([[1], [0]]); // one sample even over budget
  });
});

describe('minibatchOrder', () => {
  const lengths = [900, 10, 900, 10, 900, 10, 900, 10];
  it('RL: shuffled chunks in order of a seeded permutation, lengths mixed', () => {
    const b = minibatchOrder(false, lengths, 4, 3);
    expect(b.length).toBe(2);
    expect(b.flat().sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(minibatchOrder(false, lengths, 4, 3)).toEqual(b);
    expect(b.map((x) => x.every((i) => lengths[i] === 900))).toEqual([false, false]);
    // what length buckets do: the four long samples form one minibatch
    expect(lengthBucketedMinibatches(lengths, 4, 3).map((x) => x.map((i) => lengths[i]).sort().join())).toContain('900,900,900,900');
    expect(minibatchOrder(true, lengths, 4, 3)).toEqual(lengthBucketedMinibatches(lengths, 4, 3));
  });
});
