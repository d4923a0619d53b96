/** Minibatch orders and micro-batch splits: coverage, determinism per seed, the memory budget. */
import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../../../src/shared/rng.js';
import { lengthBucketedMinibatches, minibatchOrder, randomPositionOffsets, splitMicroBatches } from '../../../src/training/data/minibatches.js';

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

describe('randomPositionOffsets', () => {
  it('one integer offset per sample in [0, blockSize - length], deterministic for a seed, uniform over the range', () => {
    const lengths = Array.from({ length: 4000 }, (_, i) => [1, 10, 61, 64][i % 4]);
    const offsets = randomPositionOffsets(lengths, 64, 7);
    expect(offsets).toHaveLength(4000);
    offsets.forEach((o, i) => expect(Number.isInteger(o) && o >= 0 && o <= 64 - lengths[i], `sample ${i}: ${o}`).toBe(true));
    expect(randomPositionOffsets(lengths, 64, 7)).toEqual(offsets);
    expect(randomPositionOffsets(lengths, 64, 8)).not.toEqual(offsets);
    // a sample as long as the block has offset 0; one of 61 tokens each of 0..3 about equally often
    expect(offsets.filter((_, i) => lengths[i] === 64).every((o) => o === 0)).toBe(true);
    const counts = [0, 0, 0, 0];
    offsets.forEach((o, i) => { if (lengths[i] === 61) counts[o]++; });
    for (const c of counts) expect(Math.abs(c - 250)).toBeLessThan(60);
    // length 1: every offset 0..63 is drawn, mean about 31.5
    const ones = offsets.filter((_, i) => lengths[i] === 1);
    expect(new Set(ones).size).toBe(64);
    expect(Math.abs(ones.reduce((a, b) => a + b, 0) / ones.length - 31.5)).toBeLessThan(2);
    // exactly floor(u * (blockSize - length + 1)) of the documented stream
    const rand = mulberry32(7 ^ 0x85ebca6b);
    expect(randomPositionOffsets([1, 10, 61], 64, 7)).toEqual([64, 55, 4].map((n) => Math.floor(rand() * n)));
  });
  it('refuses a length outside [1, blockSize]', () => {
    expect(() => randomPositionOffsets([65], 64, 0)).toThrow(/sample length 65 outside \[1, 64\]/);
    expect(() => randomPositionOffsets([0], 64, 0)).toThrow(RangeError);
  });
});
