/**
 * Cross-entropy against soft targets at chosen positions, for SFT on solver demonstrations whose
 * answer is a set of equally good tokens (src/training/data/compact-sft.ts):
 *   loss = -(1/N) sum_i sum_v w[i, v] log softmax(logits_i)_v,   w[i, .] uniform over targets_i
 * where i runs over the N trained positions of the batch. With one target per position this is
 * the ordinary next-token cross-entropy (src/training/losses.ts sftLoss).
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
  /** N. */
  positions: number;
}

/**
 * Lays out sequences and their trained positions as tensors (caller disposes with `disposeSoftBatch`).
 * @throws RangeError when a sequence exceeds `blockSize`, a position is outside its sequence, or a
 *   target set is empty or holds an id outside [0, vocabSize).
 */
export function makeSoftBatch(
  items: ReadonlyArray<{ ids: readonly number[]; at: readonly number[]; targets: readonly (readonly number[])[] }>,
  vocabSize: number, blockSize: number,
): SoftBatch {
  const T = Math.max(...items.map((x) => x.ids.length));
  if (T > blockSize) throw new RangeError(`sequence of ${T} tokens exceeds block_size ${blockSize}`);
  const B = items.length;
  const idx = new Int32Array(B * T).fill(PAD);
  const rows: number[] = [];
  const sets: (readonly number[])[] = [];
  items.forEach((x, b) => {
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
  return {
    idx: tf.tensor2d(idx, [B, T], 'int32'),
    rows: tf.tensor1d(rows, 'int32'),
    weights: tf.tensor2d(w, [sets.length, vocabSize]),
    positions: sets.length,
  };
}

export function disposeSoftBatch(b: SoftBatch): void {
  b.idx.dispose();
  b.rows.dispose();
  b.weights.dispose();
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
