import { beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { entropyFromLogits, logprobsFromLogits } from '../../src/model/logprobs.js';
import { useWasm } from './setup.js';

beforeAll(useWasm);

describe('logprobs from logits', () => {
  it('gives log softmax at the target and the entropy in nats, per position', () => {
    // row 0: uniform over 4 -> log(1/4), entropy log 4; row 1: logits [ln 1, ln 3, -inf-ish, ...]
    const logits = tf.tensor3d([[[0, 0, 0, 0], [0, Math.log(3), -100, -100]]], [1, 2, 4]);
    const targets = tf.tensor2d([[2, 1]], [1, 2], 'int32');
    const lp = logprobsFromLogits(logits, targets).arraySync() as number[][];
    const h = entropyFromLogits(logits).arraySync() as number[][];
    expect(lp[0][0]).toBeCloseTo(Math.log(1 / 4), 6);
    expect(lp[0][1]).toBeCloseTo(Math.log(3 / 4), 5);
    expect(h[0][0]).toBeCloseTo(Math.log(4), 6);
    expect(h[0][1]).toBeCloseTo(-(0.25 * Math.log(0.25) + 0.75 * Math.log(0.75)), 5);
    tf.dispose([logits, targets]);
  });
});
