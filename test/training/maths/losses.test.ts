import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { entropyFromLogits, logprobsFromLogits } from '../../../src/model/logprobs.js';
import { AdamW, clipByGlobalNorm, ppoClipLoss, ppoObjective, sftLoss, tokenMean } from '../../../src/training/maths/losses.js';

beforeAll(async () => { await tf.setBackend('cpu'); await tf.ready(); });
const num = (t: tf.Tensor) => t.dataSync()[0];

describe('ppoClipLoss (clip 0.2, dual clip 3.0, token-mean)', () => {
  // ratios and advantages per token; the 5th token is masked out with a huge ratio
  //   r=1.1, A=+1: inside          -> -1.1
  //   r=1.5, A=+1: clipped at 1.2  -> -1.2   (clip counted)
  //   r=0.5, A=-1: clipped at 0.8  ->  0.8   (clip counted)
  //   r=5.0, A=-1: max(5, 1.2)=5, dual clip min(5, 3) -> 3 (dual counted)
  // token-mean = (-1.1 - 1.2 + 0.8 + 3) / 4 = 0.375
  const ratios = [1.1, 1.5, 0.5, 5, 100];
  const adv = [1, 1, -1, -1, 1];
  const mask = [1, 1, 1, 1, 0];
  const run = () => {
    const old = tf.tensor2d([[-1, -2, -0.5, -3, -4]]);
    const logprobs = tf.add(old, tf.tensor2d([ratios.map(Math.log)])) as tf.Tensor2D;
    return { old, logprobs };
  };
  it('loss, clip fractions and approx KL', () => {
    tf.tidy(() => {
      const { old, logprobs } = run();
      const out = ppoClipLoss({ logprobs, oldLogprobs: old, advantages: tf.tensor2d([adv]), mask: tf.tensor2d([mask]) });
      expect(num(out.pgLoss)).toBeCloseTo(0.375, 5);
      expect(num(out.clipFrac)).toBeCloseTo(0.5, 6);
      expect(num(out.dualClipFrac)).toBeCloseTo(0.25, 6);
      expect(num(out.approxKl)).toBeCloseTo(0.6707335, 4); // mean((r-1) - log r) over the 4 tokens
    });
  });
  it('gradient flows only through the unclipped token: d/dlogp = -A r / N', () => {
    tf.tidy(() => {
      const { old, logprobs } = run();
      const g = tf.grad((lp: tf.Tensor) => ppoClipLoss({ logprobs: lp as tf.Tensor2D, oldLogprobs: old, advantages: tf.tensor2d([adv]), mask: tf.tensor2d([mask]) }).pgLoss)(logprobs);
      const got = Array.from(g.dataSync());
      [-1.1 / 4, 0, 0, 0, 0].forEach((w, i) => expect(got[i]).toBeCloseTo(w, 5));
    });
  });
  it('per-turn advantages [B] broadcast over tokens; a ratio of 1 gives -mean(A)', () => {
    tf.tidy(() => {
      const lp = tf.tensor2d([[-1, -1], [-2, -2]]);
      const out = ppoClipLoss({ logprobs: lp, oldLogprobs: lp, advantages: tf.tensor1d([2, -1]), mask: tf.tensor2d([[1, 1], [1, 0]]) });
      expect(num(out.pgLoss)).toBeCloseTo((-2 - 2 + 1) / 3, 6);
      expect(num(out.clipFrac)).toBe(0);
      expect(num(out.approxKl)).toBeCloseTo(0, 7);
    });
  });
  it('rejects a dual clip <= 1', () => {
    const t = tf.zeros([1, 1]) as tf.Tensor2D;
    expect(() => ppoClipLoss({ logprobs: t, oldLogprobs: t, advantages: t, mask: t, dualClip: 1 })).toThrow(RangeError);
    t.dispose();
  });
});

describe('logprobs, entropy, SFT loss from logits', () => {
  it('values on a 2-token vocabulary', () => {
    tf.tidy(() => {
      // position 0: uniform; position 1: p = [0.75, 0.25]; position 2: masked
      const logits = tf.tensor3d([[[0, 0], [Math.log(3), 0], [10, -10]]]);
      const targets = tf.tensor2d([[0, 0, 1]], undefined, 'int32');
      const mask = tf.tensor2d([[1, 1, 0]]);
      const lp = Array.from(logprobsFromLogits(logits, targets).dataSync());
      expect(lp[0]).toBeCloseTo(Math.log(0.5), 5);
      expect(lp[1]).toBeCloseTo(Math.log(0.75), 5);
      const h = Array.from(entropyFromLogits(logits).dataSync());
      expect(h[0]).toBeCloseTo(Math.LN2, 5);
      expect(h[1]).toBeCloseTo(0.5623351, 5);
      expect(num(sftLoss(logits, targets, mask))).toBeCloseTo(0.4904146, 5); // (ln 2 - ln 0.75) / 2
      expect(num(tokenMean(tf.tensor2d([[1, 2, 30]]), mask))).toBeCloseTo(1.5, 6);
      expect(num(tokenMean(tf.tensor2d([[1, 2, 30]]), tf.zeros([1, 3])))).toBe(0);
    });
  });
  it('ppoObjective = pg_loss - 0.001 * entropy', () => {
    tf.tidy(() => {
      const logits = tf.tensor3d([[[0, 0, 0, 0]]]); // uniform over 4: entropy ln 4, logp ln 0.25
      const targets = tf.tensor2d([[2]], undefined, 'int32');
      const old = tf.tensor2d([[Math.log(0.25)]]);
      const out = ppoObjective(logits, targets, old, tf.tensor1d([0.5]), tf.tensor2d([[1]]));
      expect(num(out.pgLoss)).toBeCloseTo(-0.5, 5);
      expect(num(out.entropy)).toBeCloseTo(Math.log(4), 5);
      expect(num(out.loss)).toBeCloseTo(-0.5 - 0.001 * Math.log(4), 5);
    });
  });
});

describe('clipByGlobalNorm (max norm 1.0)', () => {
  it('scales [3] and [4] (norm 5) to norm 1', () => {
    const a = tf.tensor1d([3]); const b = tf.tensor1d([4]);
    const { grads, norm } = clipByGlobalNorm([a, b], 1.0);
    expect(norm).toBeCloseTo(5, 5);
    expect(grads[0].dataSync()[0]).toBeCloseTo(0.6, 5);
    expect(grads[1].dataSync()[0]).toBeCloseTo(0.8, 5);
    tf.dispose([a, b, ...grads]);
  });
  it('leaves gradients below the max norm unchanged', () => {
    const a = tf.tensor1d([0.3, -0.4]);
    const { grads, norm } = clipByGlobalNorm([a], 1.0);
    expect(norm).toBeCloseTo(0.5, 6);
    expect(Array.from(grads[0].dataSync())).toEqual(Array.from(a.dataSync()));
    tf.dispose([a, ...grads]);
  });
});

describe('AdamW (lr 0.1, betas 0.9/0.999, eps 1e-8, weight decay 0.01)', () => {
  it('two steps on a scalar match the hand computation', () => {
    const theta = tf.variable(tf.scalar(1));
    const opt = new AdamW([theta], { lr: 0.1, weightDecay: 0.01 });
    // step 1, g = 0.5: theta = 1*(1-0.001) - 0.1 * 0.5/(0.5 + 1e-8) = 0.899
    const g1 = tf.scalar(0.5);
    opt.applyGradients([g1]);
    expect(theta.dataSync()[0]).toBeCloseTo(0.899, 6);
    // step 2, g = -0.25: m = 0.02, v = 3.1225e-4, m_hat = 0.02/0.19, v_hat = 3.1225e-4/0.001999
    // theta = 0.899*0.999 - 0.1 * 0.1052632 / 0.3952254 = 0.8714673
    const g2 = tf.scalar(-0.25);
    opt.applyGradients([g2]);
    expect(theta.dataSync()[0]).toBeCloseTo(0.8714673, 5);
    expect(opt.step).toBe(2);
    const before = tf.memory().numTensors;
    opt.applyGradients([g2]);
    expect(tf.memory().numTensors).toBe(before);
    opt.dispose(); tf.dispose([theta, g1, g2]);
  });
  it('with zero gradient only the decoupled weight decay acts', () => {
    const theta = tf.variable(tf.tensor1d([2, -4]));
    const opt = new AdamW([theta], { lr: 0.5, weightDecay: 0.1 });
    const g = tf.zeros([2]);
    opt.applyGradients([g]);
    const got = Array.from(theta.dataSync());
    expect(got[0]).toBeCloseTo(1.9, 6); // 2 * (1 - 0.05)
    expect(got[1]).toBeCloseTo(-3.8, 6);
    opt.dispose(); tf.dispose([theta, g]);
  });
  it('throws on a gradient count mismatch', () => {
    const theta = tf.variable(tf.scalar(1));
    const opt = new AdamW([theta], { lr: 0.1 });
    expect(() => opt.applyGradients([])).toThrow(/expected 1 gradients/);
    opt.dispose(); theta.dispose();
  });
});
