import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { WeightAverage } from '../../../src/training/maths/weight-average.js';

beforeAll(async () => { await tf.setBackend('cpu'); await tf.ready(); });
const values = (t: tf.Tensor) => Array.from(t.dataSync());

describe('WeightAverage (decay 0.5)', () => {
  it('decay ramps as (1 + t) / (10 + t) up to the decay', () => {
    const v = tf.variable(tf.zeros([1]));
    const avg = new WeightAverage([v], 0.5);
    expect(avg.decayAt(1)).toBeCloseTo(2 / 11, 12);
    expect(avg.decayAt(2)).toBeCloseTo(0.25, 12);
    expect(avg.decayAt(8)).toBeCloseTo(0.5, 12); // 9 / 18
    expect(avg.decayAt(1000)).toBe(0.5);
    avg.dispose();
    v.dispose();
  });

  it('averages by hand-computed values, and withAverage swaps them in and the trained weights back', async () => {
    // weights [0, 10] at t = 0, then the first entry is trained to 1, 2, 3:
    //   t=1: d=2/11 -> 2/11*0 + 9/11*1      = 0.818182
    //   t=2: d=1/4  -> 0.25*0.818182 + 0.75*2 = 1.704545
    //   t=3: d=4/13 -> 4/13*1.704545 + 9/13*3 = 2.601399
    // the second entry never moves, so its average stays 10
    const v = tf.variable(tf.tensor1d([0, 10]));
    const avg = new WeightAverage([v], 0.5);
    const expected = [0.818182, 1.704545, 2.601399];
    for (let t = 1; t <= 3; t++) {
      v.assign(tf.tensor1d([t, 10]));
      avg.update();
      const inside = await avg.withAverage(() => values(v));
      expect(inside[0]).toBeCloseTo(expected[t - 1]!, 5);
      expect(inside[1]).toBeCloseTo(10, 5);
      expect(values(v)).toEqual([t, 10]);
    }
    expect(avg.updates).toBe(3);
    avg.dispose();
    v.dispose();
  });

  it('puts the trained weights back when the function throws, and keeps the tensor count flat', async () => {
    const v = tf.variable(tf.tensor2d([[1, 2], [3, 4]]));
    const avg = new WeightAverage([v], 0.9);
    v.assign(tf.tensor2d([[5, 6], [7, 8]]));
    avg.update();
    const before = tf.memory().numTensors;
    for (let i = 0; i < 20; i++) {
      avg.update();
      await avg.withAverage(() => values(v));
    }
    await expect(avg.withAverage(() => { throw new Error('eval failed'); })).rejects.toThrow('eval failed');
    expect(values(v)).toEqual([5, 6, 7, 8]);
    expect(tf.memory().numTensors).toBe(before);
    avg.dispose();
    v.dispose();
  });

  it('refuses a decay outside (0, 1)', () => {
    const v = tf.variable(tf.zeros([1]));
    for (const d of [0, 1, -0.5, 1.5, NaN]) expect(() => new WeightAverage([v], d)).toThrow(RangeError);
    v.dispose();
  });
});
