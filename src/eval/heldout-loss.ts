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
import type { EnvKind } from '../domain.js';
import { generateDemos } from '../envs/demos.js';
import type { EnvParams } from '../envs/index.js';
import { logprobsFromLogits } from '../model/logprobs.js';
import { disposeBatch, makeBatch } from '../training/data/batch.js';
import { unpackSample, type TrainingSample } from '../training/data/data.js';
import { fitMicroBatchTokens, fitPacked } from '../training/run/job.js';
import { splitMicroBatches } from '../training/data/minibatches.js';
import type { TrainableModel } from '../training/run/model-api.js';
import { buildSftSamples } from '../training/data/sft-data.js';

/** The loss of one kind of output. */
export interface KindLoss {
  /** Mean -ln p(target) over the trained target tokens, nats per token; null when there are none. */
  natsPerToken: number | null;
  /** Trained target tokens of this kind (makeBatch's mask: all output tokens, or a packed
   *  sample's `lossTargets` >= 0). */
  tokens: number;
}

/** Held-out loss per sample kind: acting turns ('action') and reflections ('reflection'). */
export interface HeldOutLoss {
  action: KindLoss;
  reflection: KindLoss;
}

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

/** Options of `heldOutDemoLoss`. */
export interface HeldOutDemoOptions {
  env: EnvKind;
  params?: EnvParams;
  /** Demonstration sessions: the held-out tasks evalSeed(seed, 0..sessions-1). */
  sessions: number;
  /** Eval seed offset (eval:base's --seed: the same tasks its rows play). */
  seed: number;
  /** Context the prompts are fitted to (buildSftSamples); default and at most the model's blockSize. */
  blockSize?: number;
  microBatchTokens?: number;
}

/** `heldOutLoss` on held-out demonstrations, with what it was measured on. */
export interface HeldOutDemoLoss extends HeldOutLoss {
  sessions: number;
  seed: number;
  /** Samples per kind (a packed acting sample holds several turns). */
  samples: { action: number; reflection: number };
}

/**
 * The held-out loss on solver demonstrations of the held-out eval tasks (src/envs/demos.ts
 * generateDemos with seedRange 'eval' and failRate 1: every session whose board the solver does
 * not clear before the sabotage step starts with a failed attempt and a reflection), made into the
 * samples SFT trains on (src/training/data/sft-data.ts buildSftSamples: the served prompts, packed
 * acting steps, one sample per reflection) and scored by `heldOutLoss`.
 * @throws RangeError for a bad session count or blockSize (outside [1, model.blockSize], or too
 *   small for a prompt), and what heldOutLoss throws.
 */
export async function heldOutDemoLoss(model: TrainableModel, opts: HeldOutDemoOptions): Promise<HeldOutDemoLoss> {
  const blockSize = opts.blockSize ?? model.blockSize;
  if (!(Number.isInteger(blockSize) && blockSize >= 1 && blockSize <= model.blockSize)) throw new RangeError(`blockSize must be an integer in [1, ${model.blockSize}], got ${blockSize}`);
  const demos = generateDemos({ env: opts.env, params: opts.params, tasks: opts.sessions, seed: opts.seed, failRate: 1, seedRange: 'eval' });
  const { samples } = buildSftSamples(demos, { blockSize });
  const loss = await heldOutLoss(model, samples, { microBatchTokens: opts.microBatchTokens });
  const count = (kind: string) => samples.filter((s) => s.kind === kind).length;
  return { sessions: opts.sessions, seed: opts.seed, samples: { action: count('action'), reflection: count('reflection') }, ...loss };
}
