/**
 * One optimiser step: named metrics equal to the PPO objective's (one micro-batch) and to the
 * token-weighted mean of the micro-batches' (split), the same update either way, SFT's zeros, and
 * no tensors left behind.
 */
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { disposeBatch, makeBatch } from '../../../src/training/data/batch.js';
import type { TrainingSample } from '../../../src/training/data/data.js';
import { AdamW, ppoObjective } from '../../../src/training/maths/losses.js';
import { ppoLoss, ppoUpdate, sftObjective } from '../../../src/training/maths/ppo.js';
import { TinyModel } from '../tiny-model.js';

beforeAll(async () => { await tf.setBackend('cpu'); });

const sample = (prompt: number[], output: number[], advantage: number, oldLogprobs: number[]): TrainingSample =>
  ({ sessionId: 's', taskId: 't', attempt: 0, step: 0, kind: 'action', promptTokenIds: prompt, outputTokenIds: output, oldLogprobs, advantage, return: 0 });
// old logprobs far from the tiny model's (about -log 8): ratios well outside [0.8, 1.2], so clipping shows
const samples = [sample([1, 2], [3], 1, [-2.5]), sample([1], [4, 5], -0.5, [-1.5, -2.5]), sample([2, 6], [7], 2, [-1.2]), sample([5, 5], [1, 2, 3], -1, [-3, -1.5, -2])];
const coef = { clipCoef: 0.2, dualClip: 3, entCoef: 0.01 };
const names = ['loss', 'pgLoss', 'entropy', 'clipFrac', 'dualClipFrac', 'approxKl', 'reflectionShare', 'reflectionEntropyShare'] as const;

describe('ppoUpdate', () => {
  it('one micro-batch: the metrics by name are the PPO objective\'s, gradNorm before the clip', () => {
    const model = new TinyModel(TinyModel.init(8, 8, 16));
    const batch = makeBatch(samples, model);
    const expected = tf.tidy(() => {
      const o = ppoObjective(model.logits(batch.inputs), batch.targets, batch.oldLogprobs, batch.advantages, batch.mask, coef);
      return names.map((n) => o[n].dataSync()[0]);
    });
    const optimizer = new AdamW(model.trainableVariables(), { lr: 0.01 });
    const before = tf.memory().numTensors;
    const m = ppoUpdate(model, optimizer, [batch], ppoLoss(coef), 1e-3);
    expect(tf.memory().numTensors).toBe(before);
    expect(Object.keys(m).sort()).toEqual([...names, 'gradNorm'].sort());
    names.forEach((n, j) => expect(m[n]).toBeCloseTo(expected[j], 6));
    expect(m.clipFrac).toBeGreaterThan(0);
    expect(m.gradNorm).toBeGreaterThan(1e-3); // norm before clipping to 1e-3
    expect(optimizer.step).toBe(1);
    disposeBatch(batch);
    optimizer.dispose();
    model.dispose();
  });

  it('split into micro-batches: the same metrics (token-weighted) and the same update', () => {
    const run = (split: boolean) => {
      const model = new TinyModel(TinyModel.init(8, 8, 16));
      const micro = split ? [makeBatch(samples.slice(0, 1), model), makeBatch(samples.slice(1), model)] : [makeBatch(samples, model)];
      const optimizer = new AdamW(model.trainableVariables(), { lr: 0.01 });
      const m = ppoUpdate(model, optimizer, micro, ppoLoss(coef), 1.0);
      const w = model.weights();
      micro.forEach(disposeBatch);
      optimizer.dispose();
      model.dispose();
      return { m, w: [...w.E.flat(), ...w.W.flat(), ...w.c] };
    };
    const whole = run(false);
    const split = run(true);
    for (const n of [...names, 'gradNorm'] as const) expect(split.m[n]).toBeCloseTo(whole.m[n], 5);
    expect(Math.max(...whole.w.map((x, i) => Math.abs(x - split.w[i])))).toBeLessThan(1e-6);
  });

  it('SFT: loss = pgLoss = the cross-entropy; no clip or KL', () => {
    const model = new TinyModel(TinyModel.init(8, 8, 16));
    const batch = makeBatch(samples, model);
    const optimizer = new AdamW(model.trainableVariables(), { lr: 0.01 });
    const m = ppoUpdate(model, optimizer, [batch], sftObjective, 1.0);
    expect(m.loss).toBeGreaterThan(1.5); // about log 8 for a near-uniform tiny model
    expect(m.pgLoss).toBe(m.loss);
    expect([m.clipFrac, m.dualClipFrac, m.approxKl]).toEqual([0, 0, 0]);
    disposeBatch(batch);
    optimizer.dispose();
    model.dispose();
  });
});
