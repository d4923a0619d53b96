/**
 * Held-out loss of a checkpoint: the mean negative log-likelihood of the tokens SFT trains, on
 * samples it never trained on (demonstrations of the held-out eval tasks). It moves smoothly with
 * training even while pass@k is still near 0, and it says separately how well the model predicts
 * the acting text and the reflection text.
 *
 * Units: natural log (nats) per trained target token; with the builtin byte tokenizer a token is a
 * byte of text or the EOS that ends an output. The distribution is the plain softmax of the logits
 * (temperature 1, whole vocabulary) with every row at position 0, as served.
 */
import * as tf from '@tensorflow/tfjs';
import { logprobsFromLogits } from '../../model/logprobs.js';
import type { HeldOutLoss, KindLoss } from '../../shared/heldout-loss.js';
import { disposeBatch, makeBatch } from '../data/batch.js';
import { unpackSample, type TrainingSample } from '../data/data.js';
import { splitMicroBatches } from '../data/minibatches.js';
import { fitMicroBatchTokens, fitPacked } from './job.js';
import type { TrainableModel } from '../model-api.js';

export type { HeldOutLoss, KindLoss } from '../../shared/heldout-loss.js';

/** Default micro-batch size, padded `[B, T]` positions per forward pass (the training job's). */
export const HELD_OUT_MICRO_BATCH_TOKENS = 4096;

/**
 * The mean negative log-likelihood of the trained target tokens of `samples`, per sample kind.
 *
 * The layout is the SFT job's: packed samples that do not fit the model's block are unpacked as
 * the job does (training/run/job.ts fitPacked), and so are packed RL samples that hold a reflection
 * turn (so each token counts under its own turn's kind); `makeBatch` lays the samples out (inputs
 * `[B, T]` int32, targets `[B, T]`, mask `[B, T]` of the trained targets; sequences longer than
 * blockSize + 1 lose their first tokens). Samples are cut into micro-batches of at most
 * `microBatchTokens` padded positions (`splitMicroBatches`, lowered for attention maps like the
 * job's, `fitMicroBatchTokens`); each runs one forward pass `[B, T]` -> logits `[B, T, V]`
 * without dropout at position offsets null (position 0), and -log_softmax(logits)[target] is
 * summed in float64 per kind over the mask. Tensors are freed as it goes: tf.memory().numTensors
 * is the same before and after.
 *
 * @param opts.microBatchTokens padded positions per forward pass (default 4096; one sequence
 *   always fits, whatever its length).
 * @returns per kind the nats per trained token (null without tokens) and the token count.
 * @throws RangeError for microBatchTokens that is not a positive integer, and what makeBatch
 *   throws (a sample without output tokens, a token id outside [0, V)).
 */
export async function heldOutLoss(model: TrainableModel, samples: readonly TrainingSample[], opts: { microBatchTokens?: number } = {}): Promise<HeldOutLoss> {
  const requested = opts.microBatchTokens ?? HELD_OUT_MICRO_BATCH_TOKENS;
  if (!(Number.isInteger(requested) && requested >= 1)) throw new RangeError(`microBatchTokens must be a positive integer, got ${requested}`);
  const rows = fitPacked(samples, model.blockSize, true).flatMap((s) => (s.packedTurns?.some((t) => t.kind === 'reflection') ? unpackSample(s) : [s]));
  const sums = { action: { nats: 0, tokens: 0 }, reflection: { nats: 0, tokens: 0 } };
  if (rows.length > 0) {
    // input positions of each row after makeBatch's left cut
    const lengths = rows.map((s) => Math.min(s.promptTokenIds.length + s.outputTokenIds.length - 1, model.blockSize));
    const budget = fitMicroBatchTokens(requested, model.attentionMaps, Math.max(...lengths));
    for (const idx of splitMicroBatches(rows.map((_, i) => i), lengths, budget)) {
      const batch = makeBatch(idx.map((i) => rows[i]!), model);
      let nll: tf.Tensor2D | null = null;
      try {
        // -ln p(target) at trained positions, 0 elsewhere: [B, T]
        nll = tf.tidy(() => {
          const logits = model.logits(batch.inputs, false, null);
          return tf.mul(tf.neg(logprobsFromLogits(logits, batch.targets)), batch.mask) as tf.Tensor2D;
        });
        const [values, mask] = await Promise.all([nll.data(), batch.mask.data()]);
        const T = batch.inputs.shape[1];
        idx.forEach((i, b) => {
          const sum = sums[rows[i]!.kind];
          for (let t = 0; t < T; t++) {
            if (mask[b * T + t]! === 0) continue;
            sum.nats += values[b * T + t]!;
            sum.tokens++;
          }
        });
      } finally {
        nll?.dispose();
        disposeBatch(batch);
      }
    }
  }
  const kindLoss = (x: { nats: number; tokens: number }): KindLoss => ({ natsPerToken: x.tokens > 0 ? x.nats / x.tokens : null, tokens: x.tokens });
  return { action: kindLoss(sums.action), reflection: kindLoss(sums.reflection) };
}
