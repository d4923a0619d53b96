/** Held-out loss (heldOutLoss): exact values on stub models, token counts of makeBatch's mask, micro-batches, memory. */
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { disposeBatch, makeBatch } from '../../../src/training/data/batch.js';
import type { TrainingSample } from '../../../src/training/data/data.js';
import type { TrainableModel } from '../../../src/training/model-api.js';
import { trainedTokens } from '../../../src/training/data/samples.js';
import { heldOutLoss } from '../../../src/training/run/heldout-loss.js';

beforeAll(async () => { await tf.setBackend('cpu'); });

const V = 8;

/**
 * A stub model of vocabulary V: logits[b, t] = L on token `hot(input)` and 0 elsewhere (all 0 when
 * hot is null). Records the [B, T] shape and position offsets of each forward pass.
 */
class StubModel implements TrainableModel {
  readonly vocabSize = V;
  readonly blockSize = 16;
  readonly padId = 0;
  readonly calls: Array<{ shape: number[]; offsets: unknown }> = [];
  constructor(private readonly L: number, private readonly hot: ((input: tf.Tensor2D) => tf.Tensor2D) | null) {}
  logits(tokens: tf.Tensor2D, _training: boolean, positionOffsets?: tf.Tensor1D | null): tf.Tensor3D {
    this.calls.push({ shape: tokens.shape, offsets: positionOffsets });
    return tf.tidy(() => {
      const [B, T] = tokens.shape;
      if (!this.hot) return tf.zeros([B, T, V]) as tf.Tensor3D;
      return tf.mul(tf.cast(tf.oneHot(tf.cast(this.hot(tokens), 'int32'), V), 'float32'), this.L) as tf.Tensor3D;
    });
  }
  trainableVariables(): tf.Variable[] { return []; }
  dispose(): void {}
}

const sample = (kind: TrainingSample['kind'], prompt: number[], output: number[], lossTargets?: number[]): TrainingSample =>
  ({ sessionId: 's', taskId: 't', attempt: 0, step: 0, kind, promptTokenIds: prompt, outputTokenIds: output, ...(lossTargets ? { lossTargets } : {}), oldLogprobs: null, advantage: 0, return: 0 });

// action: seq 1 2 3 3, trained targets 3 (after input 2) and 3 (after input 3)
// packed action: seq 1 3 5 6 3, lossTargets [3, -1, -1, 7]: trains 3 (after input 1) and 7 (after input 6)
// reflection: seq 4 4 4 4 5 5, trained targets 4 (after 4), 5 (after 4), 5 (after 5)
const SAMPLES = [
  sample('action', [1, 2], [3, 3]),
  sample('reflection', [4, 4, 4], [4, 5, 5]),
  sample('action', [1], [3, 5, 6, 3], [3, -1, -1, 7]),
];

describe('heldOutLoss on stub models', () => {
  it('all logits 0: ln(V) nats per token for both kinds; token counts are makeBatch trainedTokens by kind', async () => {
    const m = new StubModel(0, null);
    const r = await heldOutLoss(m, SAMPLES);
    expect(r.action.natsPerToken).toBeCloseTo(Math.log(V), 6);
    expect(r.reflection.natsPerToken).toBeCloseTo(Math.log(V), 6);
    expect([r.action.tokens, r.reflection.tokens]).toEqual([4, 3]);
    for (const kind of ['action', 'reflection'] as const) {
      const b = makeBatch(SAMPLES.filter((s) => s.kind === kind), m);
      expect(r[kind].tokens).toBe(b.trainedTokens);
      disposeBatch(b);
    }
    expect(r.action.tokens).toBe(trainedTokens(SAMPLES[0]!) + trainedTokens(SAMPLES[2]!));
    // one forward pass of the 3 rows (padded to 5 positions), position offsets null (as served)
    expect(m.calls).toEqual([{ shape: [3, 5], offsets: null }]);
  });

  it('logit L on a fixed token: ln Z - L per hit, ln Z per miss (Z = e^L + V - 1)', async () => {
    const L = 2;
    const lnZ = Math.log(Math.exp(L) + V - 1);
    const r = await heldOutLoss(new StubModel(L, (x) => tf.fill(x.shape, 3, 'int32') as tf.Tensor2D), SAMPLES);
    // action targets 3, 3, 3, 7: three hits; reflection targets 4, 5, 5: no hit
    expect(r.action.natsPerToken).toBeCloseTo(lnZ - (3 * L) / 4, 6);
    expect(r.reflection.natsPerToken).toBeCloseTo(lnZ, 6);
  });

  it('logit L on the input token (copy): hits where the target repeats its input; micro-batches give the same sums', async () => {
    const L = 3;
    const lnZ = Math.log(Math.exp(L) + V - 1);
    const copy = () => new StubModel(L, (x) => x);
    const whole = await heldOutLoss(copy(), SAMPLES);
    // action: 3 after 3 is the one hit of 4; reflection: 4 after 4 and 5 after 5, two hits of 3
    expect(whole.action.natsPerToken).toBeCloseTo(lnZ - L / 4, 6);
    expect(whole.reflection.natsPerToken).toBeCloseTo(lnZ - (2 * L) / 3, 6);
    const m = copy();
    const split = await heldOutLoss(m, SAMPLES, { microBatchTokens: 5 });
    expect(m.calls.map((c) => c.shape)).toEqual([[1, 5], [1, 4], [1, 3]]); // within 5 padded positions, longest first
    expect(split.action.natsPerToken).toBeCloseTo(whole.action.natsPerToken!, 12);
    expect(split.reflection.natsPerToken).toBeCloseTo(whole.reflection.natsPerToken!, 12);
    expect(split.action.tokens + split.reflection.tokens).toBe(7);
  });

  it('a packed RL sample with a reflection turn counts each turn under its own kind', async () => {
    const L = 3;
    const lnZ = Math.log(Math.exp(L) + V - 1);
    // seq 1 | 2 2 6 5 5: the acting turn trains 2, 2 (positions 0-1), the reflection 5, 5 (positions 3-4)
    const packed: TrainingSample = {
      ...sample('action', [1], [2, 2, 6, 5, 5], [2, 2, -1, 5, 5]),
      packedTurns: [{ step: 0, start: 0, length: 2, advantage: 0, return: 0 }, { step: 1, kind: 'reflection', start: 3, length: 2, advantage: 0, return: 0 }],
    };
    const r = await heldOutLoss(new StubModel(L, (x) => x), [packed]);
    // action: 2 after 1 (miss), 2 after 2 (hit); reflection: 5 after 6 (miss), 5 after 5 (hit)
    expect([r.action.tokens, r.reflection.tokens]).toEqual([2, 2]);
    expect(r.action.natsPerToken).toBeCloseTo(lnZ - L / 2, 6);
    expect(r.reflection.natsPerToken).toBeCloseTo(lnZ - L / 2, 6);
  });

  it('no samples of a kind: null nats, 0 tokens; bad micro-batch sizes and samples are refused', async () => {
    const m = new StubModel(0, null);
    expect(await heldOutLoss(m, [])).toEqual({ action: { natsPerToken: null, tokens: 0 }, reflection: { natsPerToken: null, tokens: 0 } });
    const r = await heldOutLoss(m, [SAMPLES[1]!]);
    expect(r.action).toEqual({ natsPerToken: null, tokens: 0 });
    await expect(heldOutLoss(m, SAMPLES, { microBatchTokens: 0 })).rejects.toThrow('microBatchTokens must be a positive integer, got 0');
    await expect(heldOutLoss(m, [sample('action', [1], [9])])).rejects.toThrow('token id 9 outside [0, 8)');
  });

  it('frees its tensors: tf.memory().numTensors does not grow over repeated calls', async () => {
    const m = new StubModel(2, (x) => x);
    await heldOutLoss(m, SAMPLES, { microBatchTokens: 5 });
    const before = tf.memory().numTensors;
    for (let k = 0; k < 3; k++) await heldOutLoss(m, SAMPLES, { microBatchTokens: k === 0 ? 5 : 100 });
    expect(tf.memory().numTensors).toBe(before);
  });
});
