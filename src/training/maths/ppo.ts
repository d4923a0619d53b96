/**
 * One optimiser step of policy training (docs/method.md#the-optimiser-step), the body of CleanRL ppo.py's
 * minibatch loop: the loss of each micro-batch, gradients accumulated over the minibatch, the
 * global grad-norm clip and an AdamW step, with the step's metrics by name.
 *
 * Metric definitions (token-means over the minibatch's output tokens):
 * - `clipFrac`: verl's `pg_clipfrac`, the fraction of tokens where the clipped branch of the
 *   surrogate is the larger loss, `-A clip(ratio, 1-eps, 1+eps) > -A ratio`, i.e. where clipping
 *   changed the loss. This differs from CleanRL's `((ratio - 1).abs() > clip_coef).float().mean()`,
 *   which also counts tokens whose ratio is outside the range on the side that is not clipped;
 * - `dualClipFrac`: verl's `pg_clipfrac_lower`, tokens with A < 0 whose loss the dual clip bounded;
 * - `approxKl`: CleanRL's k3 estimator `((ratio - 1) - log ratio).mean()` of KL(old || new).
 */
import * as tf from '@tensorflow/tfjs';
import { entropyFromLogits } from '../../model/logprobs.js';
import { behaviourLogits, type Batch } from '../data/batch.js';
import { type AdamW, clipByGlobalNorm, ppoObjective, reflectionSplit, sftLoss, tokenMean } from './losses.js';
import type { TrainableModel } from '../model-api.js';

/** The losses of one step by name (token-means; SFT: pgLoss = loss and no clip or KL: 0). */
export interface StepLosses {
  /** The minimised objective: pg_loss - ent_coef * entropy (RL), cross-entropy (SFT). */
  loss: number;
  /** The clipped surrogate (RL). */
  pgLoss: number;
  /** Entropy of the behaviour policy (RL) or of the plain softmax (SFT), nats. */
  entropy: number;
  clipFrac: number;
  dualClipFrac: number;
  approxKl: number;
  /** Share of the trained tokens that belong to reflection turns (token-mean of the reflection mask). */
  reflectionShare: number;
  /** Token-mean over all trained tokens of the entropy at reflection tokens (0 at action tokens):
   *  reflection entropy = this / reflectionShare, action entropy = (entropy - this) / (1 - reflectionShare). */
  reflectionEntropyShare: number;
}

/** The same losses as scalars of one micro-batch, inside the gradient tape. */
export type MicroLosses = { [K in keyof StepLosses]: tf.Scalar };

/** The loss of one micro-batch from the model's logits `[B, T, V]` (differentiable). */
export type Objective = (logits: tf.Tensor3D, batch: Batch) => MicroLosses;

/** PPO coefficients (defaults clip 0.2, dual clip 3.0, entropy 0.001; docs/method.md#the-ppo-loss). */
export interface PpoCoefficients {
  clipCoef: number;
  dualClip: number;
  entCoef: number;
}

/**
 * The PPO objective on the behaviour policy's logits (logits / temperature, restricted to the
 * sampler's support), against the batch's old logprobs and advantages (docs/method.md#the-behaviour-policy).
 */
export function ppoLoss(coef: PpoCoefficients): Objective {
  return (logits, batch) => {
    const o = ppoObjective(behaviourLogits(logits, batch), batch.targets, batch.oldLogprobs, batch.advantages, batch.mask, { ...coef, reflectionMask: batch.reflectionMask });
    return {
      loss: o.loss, pgLoss: o.pgLoss, entropy: o.entropy, clipFrac: o.clipFrac, dualClipFrac: o.dualClipFrac, approxKl: o.approxKl,
      reflectionShare: o.reflectionShare, reflectionEntropyShare: o.reflectionEntropyShare,
    };
  };
}

/** The SFT objective: token-mean cross-entropy of the output tokens under the plain softmax. */
export const sftObjective: Objective = (logits, batch) => {
  const loss = sftLoss(logits, batch.targets, batch.mask);
  const h = entropyFromLogits(logits);
  const entropy = tokenMean(h, batch.mask);
  return { loss, pgLoss: loss, entropy, clipFrac: tf.scalar(0), dualClipFrac: tf.scalar(0), approxKl: tf.scalar(0), ...reflectionSplit(h, batch.mask, batch.reflectionMask) };
};

const LOSS_NAMES = ['loss', 'pgLoss', 'entropy', 'clipFrac', 'dualClipFrac', 'approxKl', 'reflectionShare', 'reflectionEntropyShare'] as const;

/** Output tokens of a batch (the positions its mask trains; a packed SFT sample's context between
 *  its actions is not counted). */
export const outputTokens = (b: Batch): number => b.trainedTokens;

/**
 * Weighted gradient accumulation over micro-batches: g = sum_k weights[k] * grad(loss_k), and the
 * same weighted sums of the losses (each micro-batch's losses are token-means over its output
 * tokens). With weights[k] = outTokens_k / totalOut the result is the gradient of the minibatch's
 * token-mean loss; with weights[k] = outTokens_k it is the gradient of the token-sum loss (what a
 * data-parallel shard returns, src/training/run/data-parallel.ts). Disposes every tensor it makes
 * except the returned gradients (one per `vars[i]`, the caller disposes them).
 * @throws RangeError when the micro-batch and weight counts differ, or `micro` is empty.
 */
export function accumulateGradients(
  model: TrainableModel, vars: tf.Variable[], micro: readonly Batch[], weights: readonly number[], objective: Objective,
): { grads: tf.Tensor[]; losses: StepLosses } {
  if (micro.length === 0 || micro.length !== weights.length) throw new RangeError(`expected as many weights as micro-batches (>= 1), got ${weights.length} and ${micro.length}`);
  const losses: StepLosses = { loss: 0, pgLoss: 0, entropy: 0, clipFrac: 0, dualClipFrac: 0, approxKl: 0, reflectionShare: 0, reflectionEntropyShare: 0 };
  let acc: tf.Tensor[] | null = null;
  for (let k = 0; k < micro.length; k++) {
    const batch = micro[k];
    const w = weights[k];
    let stats: tf.Tensor1D | null = null;
    const { value, grads } = tf.variableGrads(() => {
      const l = objective(model.logits(batch.inputs, true, batch.positionOffsets), batch);
      stats = tf.keep(tf.stack(LOSS_NAMES.map((name) => l[name])) as tf.Tensor1D);
      return tf.mul(l.loss, w) as tf.Scalar;
    }, vars);
    const values = (stats as unknown as tf.Tensor1D).dataSync();
    LOSS_NAMES.forEach((name, j) => { losses[name] += w * values[j]; });
    const gradList = vars.map((v) => grads[v.name]);
    acc = acc === null ? gradList : accumulate(acc, gradList); // g = sum_k w_k grad(loss_k)
    tf.dispose([value, stats as unknown as tf.Tensor]);
  }
  return { grads: acc!, losses };
}

/**
 * The update of one step from the minibatch's gradient: the global grad-norm clip and one AdamW
 * step of `optimizer.variables`. Disposes the tensors it makes, not `grads`.
 * @returns the gradient's global L2 norm before clipping.
 */
export function applyUpdate(optimizer: AdamW, grads: tf.Tensor[], maxGradNorm: number): number {
  const clipped = clipByGlobalNorm(grads, maxGradNorm); // g <- g * min(1, max_grad_norm / ||g||)  (max_grad_norm 1.0)
  optimizer.applyGradients(clipped.grads); // AdamW, decoupled weight decay (wd 0.01; docs/method.md#the-optimiser-step)
  tf.dispose(clipped.grads);
  return clipped.norm;
}

/**
 * One optimiser step on one minibatch given as micro-batches (`makeBatch`; together they are the
 * minibatch): gradient accumulation, where each micro-batch's token-mean loss is weighted by its
 * share of the minibatch's output tokens, so the summed gradient is the gradient of the
 * minibatch's token-mean loss; then the global grad-norm clip and one AdamW update of
 * `optimizer.variables` (the model's trainable variables). Disposes every tensor it makes, not
 * the batches.
 * @returns the step's losses (the minibatch's token-means, from the weighted micro-batches) and the
 *   gradient's global L2 norm before clipping.
 */
export function ppoUpdate(model: TrainableModel, optimizer: AdamW, micro: readonly Batch[], objective: Objective, maxGradNorm: number): StepLosses & { gradNorm: number } {
  const outTokens = micro.map(outputTokens);
  const totalOut = outTokens.reduce((a, b) => a + b, 0);
  // micro-batch weight = its share of the output tokens
  const { grads, losses } = accumulateGradients(model, optimizer.variables, micro, outTokens.map((n) => n / totalOut), objective);
  const gradNorm = applyUpdate(optimizer, grads, maxGradNorm);
  tf.dispose(grads);
  return { ...losses, gradNorm };
}

/** `acc + grads` elementwise, disposing both inputs. */
function accumulate(acc: tf.Tensor[], grads: tf.Tensor[]): tf.Tensor[] {
  const sum = acc.map((a, i) => tf.add(a, grads[i]));
  tf.dispose([...acc, ...grads]);
  return sum;
}
