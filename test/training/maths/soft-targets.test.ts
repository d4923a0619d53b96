/** Cross-entropy against soft targets (src/training/maths/soft-targets.ts). */
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { disposeSoftBatch, makeSoftBatch, positionLogits, softTargetLoss, unlikelihoodLoss } from '../../../src/training/maths/soft-targets.js';
import { forward, initModel } from '../../../src/model/gpt.js';
import { EOS as EOS_ID, PAD } from '../../../src/model/tokenizer.js';

beforeAll(async () => { await tf.setBackend('cpu'); await tf.ready(); });
const num = (t: tf.Tensor) => t.dataSync()[0]!;

describe('softTargetLoss', () => {
  it('is ln V for uniform logits, whatever the targets', () => {
    const V = 7;
    const loss = tf.tidy(() => num(softTargetLoss(tf.zeros([2, V]) as tf.Tensor2D, tf.tensor2d([[0.5, 0.5, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 1]]))));
    expect(loss).toBeCloseTo(Math.log(V), 6);
  });

  it('averages -sum_v w log p over the positions (hand-computed)', () => {
    // row 1: logits [0, 0, ln 2] -> p = [1/4, 1/4, 1/2]; targets {0, 1} -> -(ln 1/4) = ln 4
    // row 2: logits [ln 3, 0, 0] -> p = [3/5, 1/5, 1/5]; target {0} -> ln 5/3
    const logits = tf.tensor2d([[0, 0, Math.log(2)], [Math.log(3), 0, 0]]);
    const w = tf.tensor2d([[0.5, 0.5, 0], [1, 0, 0]]);
    expect(num(softTargetLoss(logits, w))).toBeCloseTo((Math.log(4) + Math.log(5 / 3)) / 2, 6);
    // its gradient is (softmax - w) / N
    const g = tf.grad((x: tf.Tensor) => softTargetLoss(x as tf.Tensor2D, w))(logits);
    const want = [[0.25 - 0.5, 0.25 - 0.5, 0.5], [0.6 - 1, 0.2, 0.2]].map((r) => r.map((x) => x / 2));
    (g.arraySync() as number[][]).forEach((r, i) => r.forEach((x, j) => expect(x).toBeCloseTo(want[i]![j]!, 6)));
    tf.dispose([logits, w, g]);
  });
});

describe('makeSoftBatch', () => {
  it('pads with PAD and lays out flat positions b * T + t and uniform weights', () => {
    const b = makeSoftBatch([
      { ids: [256, 10, 11, 12], at: [2, 3], targets: [[1, 2], [257]] },
      { ids: [256, 5], at: [1], targets: [[3, 3, 4]] },
    ], 260, 8);
    expect(b.idx.arraySync()).toEqual([[256, 10, 11, 12], [256, 5, PAD, PAD]]);
    expect(b.rows.arraySync()).toEqual([2, 3, 5]);
    expect(b.positions).toBe(3);
    const w = b.weights.arraySync();
    expect(w.length).toBe(3);
    expect(w[0]![1]).toBe(0.5);
    expect(w[0]![2]).toBe(0.5);
    expect(w[1]![257]).toBe(1);
    // a repeated id counts once per occurrence, so the row still sums to 1
    expect(w[2]![3]).toBeCloseTo(2 / 3, 6);
    expect(w[2]![4]).toBeCloseTo(1 / 3, 6);
    for (const r of w) expect(r.reduce((s, x) => s + x, 0)).toBeCloseTo(1, 6);
    disposeSoftBatch(b);
    expect(b.idx.isDisposed && b.rows.isDisposed && b.weights.isDisposed).toBe(true);
  });

  it.each([
    ['a sequence longer than the block', [{ ids: [1, 2, 3], at: [0], targets: [[1]] }], /sequence of 3 tokens exceeds block_size 2/],
    ['a position outside its sequence', [{ ids: [1, 2], at: [2], targets: [[1]] }], /trained position 2 outside a sequence of 2/],
    ['a negative position', [{ ids: [1, 2], at: [-1], targets: [[1]] }], /trained position -1/],
    ['an empty target set', [{ ids: [1, 2], at: [0], targets: [[]] }], /bad target set \[\]/],
    ['a target id beyond the vocabulary', [{ ids: [1, 2], at: [0], targets: [[260]] }], /bad target set \[260\]/],
    ['a fractional target id', [{ ids: [1, 2], at: [0], targets: [[1.5]] }], /bad target set/],
    ['positions and targets of different lengths', [{ ids: [1, 2], at: [0, 1], targets: [[1]] }], /at and targets differ in length/],
  ])('refuses %s', (_, items, msg) => {
    const before = tf.memory().numTensors;
    expect(() => makeSoftBatch(items, 260, 2)).toThrow(RangeError);
    expect(() => makeSoftBatch(items, 260, 2)).toThrow(msg);
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('unlikelihoodLoss', () => {
  it('averages -sum_v a log(1 - p) over all positions; its gradient on an avoided logit is a p / N (hand-computed)', () => {
    // row 1: logits [0, ln 3] -> p = [1/4, 3/4]; token 1 avoided -> -ln(1/4) = ln 4
    // row 2: nothing avoided -> 0; mean over N = 2
    const logits = tf.tensor2d([[0, Math.log(3)], [0, 0]]);
    const a = tf.tensor2d([[0, 1], [0, 0]]);
    expect(num(unlikelihoodLoss(logits, a))).toBeCloseTo(Math.log(4) / 2, 6);
    // d/dz_1 = p_1 / N = 3/8, d/dz_0 = -p_0 p_1 / (1 - p_1) / N = -3/8; row 2 untouched
    const g = tf.grad((x: tf.Tensor) => unlikelihoodLoss(x as tf.Tensor2D, a))(logits);
    const want = [[-3 / 8, 3 / 8], [0, 0]];
    (g.arraySync() as number[][]).forEach((r, i) => r.forEach((x, j) => expect(x).toBeCloseTo(want[i]![j]!, 6)));
    tf.dispose([logits, a, g]);
    // a weight scales the term and its gradient
    const l2 = tf.tensor2d([[0, Math.log(3)]]);
    expect(tf.tidy(() => num(unlikelihoodLoss(l2, tf.tensor2d([[0, 4]]))))).toBeCloseTo(4 * Math.log(4), 5);
    l2.dispose();
  });

  it('stays finite for a token at probability 1 (1 - p floored at 1e-6)', () => {
    const v = tf.tidy(() => num(unlikelihoodLoss(tf.tensor2d([[0, 100]]), tf.tensor2d([[0, 1]]))));
    expect(v).toBeCloseTo(-Math.log(1e-6), 3);
  });
});

describe('makeSoftBatch avoid', () => {
  it('puts each item\'s avoided ids\' weights at their trained positions, and is null when none', () => {
    const b = makeSoftBatch([{ ids: [256, 1, 2], at: [1, 2], targets: [[2], [EOS_ID]], avoid: [[0, 5, 2], [0, 7, 0.5], [0, 5, 3], [1, 9, 1]] }, { ids: [256, 9], at: [1], targets: [[4]] }], 260, 16);
    const a = b.avoid!.arraySync() as number[][];
    // the weights at their ids (an id given twice keeps the larger)
    expect(a.map((r) => r.flatMap((x, v) => (x ? [[v, x]] : [])))).toEqual([[[5, 3], [7, 0.5]], [[9, 1]], []]);
    disposeSoftBatch(b);
    const c = makeSoftBatch([{ ids: [256, 9], at: [1], targets: [[4]] }], 260, 16);
    expect(c.avoid).toBeNull();
    disposeSoftBatch(c);
  });

  it('refuses an avoided id outside the vocabulary or in the same position\'s target set, and a weight not above 0', () => {
    expect(() => makeSoftBatch([{ ids: [256, 9], at: [1], targets: [[4]], avoid: [[0, 260, 1]] }], 260, 16)).toThrow('bad avoided id 260');
    expect(() => makeSoftBatch([{ ids: [256, 9], at: [1], targets: [[4]], avoid: [[0, 3, 0]] }], 260, 16)).toThrow('bad unlikelihood weight 0');
    expect(() => makeSoftBatch([{ ids: [256, 9], at: [1], targets: [[4, 5]], avoid: [[0, 5, 1]] }], 260, 16)).toThrow('in the target set');
    expect(() => makeSoftBatch([{ ids: [256, 9], at: [1], targets: [[4]], avoid: [[1, 5, 1]] }], 260, 16)).toThrow('outside the 1 trained positions');
  });
});

describe('positionLogits', () => {
  it('are the model\'s next-token logits at the chosen positions', () => {
    const model = initModel({ vocab_size: 260, block_size: 16, n_layer: 1, n_head: 2, n_embd: 16 }, 3);
    const b = makeSoftBatch([{ ids: [256, 1, 2, 3], at: [0, 3], targets: [[1], [2]] }, { ids: [256, 9], at: [1], targets: [[4]] }], 260, 16);
    const before = tf.memory().numTensors;
    const got = positionLogits(model, b.idx, b.rows);
    // one tensor more than before: the result (positionLogits keeps its intermediates in a tidy)
    expect(tf.memory().numTensors).toBe(before + 1);
    const diff = tf.tidy(() => num(tf.max(tf.abs(tf.sub(got, tf.gather(tf.reshape(forward(model, b.idx), [-1, 260]), b.rows))))));
    expect(diff).toBeLessThan(1e-4);
    expect(got.shape).toEqual([3, 260]);
    got.dispose();
    expect(tf.memory().numTensors).toBe(before);
    disposeSoftBatch(b);
    model.dispose();
  });
});
