/**
 * Cross-entropy against soft targets at chosen positions, for SFT on solver demonstrations whose
 * answer is a set of equally good tokens (src/training/data/compact-sft.ts):
 *   loss = -(1/N) sum_i sum_v w[i, v] log softmax(logits_i)_v,   w[i, .] uniform over targets_i
 * where i runs over the N trained positions of the batch. With one target per position this is
 * the ordinary next-token cross-entropy (src/training/maths/losses.ts sftLoss).
 *
 * An optional unlikelihood term (Welleck et al. 2020, "Neural text generation with unlikelihood
 * training", token-level form) pushes named tokens' probabilities down at a position:
 *   ul = -(1/N) sum_i sum_v a[i, v] log(1 - softmax(logits_i)_v),   a[i, v] >= 0 weights
 * With a[i, v] = lambda its gradient on that token's logit is lambda times the token's probability,
 * lambda times what the cross-entropy gives a token with no target weight, so the token is pushed
 * down lambda + 1 times as hard; used for the cells a MineSweeper memory names as mines, for
 * invalid answers, for the cells a MineSweeper board proves to be mines and for the Sokoban moves
 * that would make a push the memory names as a dead end
 * (`CompactExample.namedMines`, `.invalid`, `.invalidMoves`, `.provableMines`, `.deadMoves`).
 */
import * as tf from '@tensorflow/tfjs';
import { forwardHidden, lmHead, type GPT } from '../../model/gpt.js';
import { PAD } from '../../model/tokenizer.js';

/** A batch laid out for `softTargetLoss`. */
export interface SoftBatch {
  /** `[B, T]` int32 token ids, right-padded with PAD. */
  idx: tf.Tensor2D;
  /** `[N]` int32 flat positions b * T + t whose logits are trained. */
  rows: tf.Tensor1D;
  /** `[N, V]` float32 target weights, each row summing to 1 (uniform over a set; an id listed k times gets k shares). */
  weights: tf.Tensor2D;
  /** `[N, V]` float32: the weight of the unlikelihood of token v at position i (`avoid`), else 0; null when no item avoids anything. */
  avoid: tf.Tensor2D | null;
  /** N. */
  positions: number;
}

/**
 * Lays out sequences and their trained positions as tensors (caller disposes with `disposeSoftBatch`).
 * An item's `avoid` triples `[k, token id, weight > 0]` apply to its trained position `at[k]`; an
 * id given twice at one position keeps the larger weight.
 * @throws RangeError when a sequence exceeds `blockSize`, a position is outside its sequence, a
 *   target set is empty or holds an id outside [0, vocabSize), or an avoided id is outside
 *   [0, vocabSize), its weight not a finite number > 0, its k not an index of `at`, or the id in
 *   that position's target set.
 */
export function makeSoftBatch(
  items: ReadonlyArray<{ ids: readonly number[]; at: readonly number[]; targets: readonly (readonly number[])[]; avoid?: ReadonlyArray<readonly [number, number, number]> }>,
  vocabSize: number, blockSize: number,
): SoftBatch {
  const T = Math.max(...items.map((x) => x.ids.length));
  if (T > blockSize) throw new RangeError(`sequence of ${T} tokens exceeds block_size ${blockSize}`);
  const B = items.length;
  const idx = new Int32Array(B * T).fill(PAD);
  const rows: number[] = [];
  const sets: (readonly number[])[] = [];
  const avoided: Array<[number, number, number]> = []; // [position index in the batch, token id, weight]
  items.forEach((x, b) => {
    for (const [k, v, wt] of x.avoid ?? []) {
      if (!Number.isInteger(k) || k < 0 || k >= x.at.length) throw new RangeError(`avoided id ${v} at position index ${k}, outside the ${x.at.length} trained positions`);
      if (!Number.isInteger(v) || v < 0 || v >= vocabSize) throw new RangeError(`bad avoided id ${v}`);
      if (!Number.isFinite(wt) || wt <= 0) throw new RangeError(`bad unlikelihood weight ${wt} for id ${v}`);
      if (x.targets[k]?.includes(v)) throw new RangeError(`avoided id ${v} is in the target set of the same position`);
      avoided.push([sets.length + k, v, wt]);
    }
    idx.set(x.ids, b * T);
    if (x.at.length !== x.targets.length) throw new RangeError('at and targets differ in length');
    x.at.forEach((t, k) => {
      if (t < 0 || t >= x.ids.length) throw new RangeError(`trained position ${t} outside a sequence of ${x.ids.length}`);
      const set = x.targets[k]!;
      if (set.length === 0 || set.some((v) => !Number.isInteger(v) || v < 0 || v >= vocabSize)) throw new RangeError(`bad target set ${JSON.stringify(set)}`);
      rows.push(b * T + t);
      sets.push(set);
    });
  });
  const w = new Float32Array(sets.length * vocabSize);
  // accumulated, so that a set naming an id twice still gives a row summing to 1 (that id twice the weight)
  sets.forEach((set, i) => { for (const v of set) w[i * vocabSize + v]! += 1 / set.length; });
  let avoid: tf.Tensor2D | null = null;
  if (avoided.length > 0) {
    const a = new Float32Array(sets.length * vocabSize);
    for (const [i, v, wt] of avoided) a[i * vocabSize + v] = Math.max(a[i * vocabSize + v]!, wt);
    avoid = tf.tensor2d(a, [sets.length, vocabSize]);
  }
  return {
    idx: tf.tensor2d(idx, [B, T], 'int32'),
    rows: tf.tensor1d(rows, 'int32'),
    weights: tf.tensor2d(w, [sets.length, vocabSize]),
    avoid,
    positions: sets.length,
  };
}

export function disposeSoftBatch(b: SoftBatch): void {
  b.idx.dispose();
  b.rows.dispose();
  b.weights.dispose();
  b.avoid?.dispose();
}

/** Logits `[N, V]` of the trained positions (positions 0..T-1 of every row). Differentiable. */
export function positionLogits(model: GPT, idx: tf.Tensor2D, rows: tf.Tensor1D): tf.Tensor2D {
  return tf.tidy(() => {
    const [, T] = idx.shape;
    const mask = tf.linalg.bandPart(tf.ones([T, T]), -1, 0).sub(1).mul(1e9).reshape([1, 1, T, T]) as tf.Tensor4D;
    const { h } = forwardHidden(model, idx, null, null, mask);
    const flat = tf.reshape(h, [-1, model.config.n_embd]);
    return lmHead(model, tf.gather(flat, rows)) as tf.Tensor2D;
  });
}

/** The loss above, a scalar in nats per trained position. Differentiable. */
export function softTargetLoss(logits: tf.Tensor2D, weights: tf.Tensor2D): tf.Scalar {
  return tf.tidy(() => tf.neg(tf.mean(tf.sum(tf.mul(weights, tf.logSoftmax(logits)), -1))) as tf.Scalar);
}

/**
 * The unlikelihood term above, a scalar in nats per trained position (positions without avoided
 * tokens count in N with 0). `1 - p` is floored at 1e-6, so a token already at probability 1 costs
 * at most 13.8 nats and the gradient stays finite. Differentiable.
 * @param logits `[N, V]`; `avoid` `[N, V]` weights >= 0 (SoftBatch.avoid).
 */
export function unlikelihoodLoss(logits: tf.Tensor2D, avoid: tf.Tensor2D): tf.Scalar {
  return tf.tidy(() => {
    const notP = tf.maximum(tf.sub(1, tf.softmax(logits)), 1e-6);
    return tf.neg(tf.mean(tf.sum(tf.mul(avoid, tf.log(notP)), -1))) as tf.Scalar;
  });
}
