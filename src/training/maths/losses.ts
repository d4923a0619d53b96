/**
 * Losses and the optimiser for policy training, in TensorFlow.js (docs/method.md#the-ppo-loss):
 * PPO clipped surrogate with dual clip, token-mean aggregation under a mask, entropy bonus, SFT
 * cross-entropy (token logprobs and entropies from src/model/logprobs.ts), global grad-norm clipping and AdamW (tfjs has none; decoupled weight decay as in
 * Loshchilov & Hutter 2019 / torch.optim.AdamW).
 *
 * Shapes: B = batch of turns, T = sequence positions, V = vocabulary.
 * - logits `[B, T, V]` float32; targets `[B, T]` int32 (token ids); mask `[B, T]` float32 (1 where
 *   the target token is an output token being trained, 0 for prompt and padding).
 * - logprobs `[B, T]`: natural-log probability of each target token.
 * - advantages `[B]` (one per turn, the same for every token of the turn) or `[B, T]`.
 * Functions that return tensors do not dispose their inputs; call them inside tf.tidy.
 */
import * as tf from '@tensorflow/tfjs';
import { entropyFromLogits, logprobsFromLogits } from '../../model/logprobs.js';

/** Token-mean: sum(x * mask) / max(sum(mask), 1); a scalar. */
export function tokenMean(x: tf.Tensor, mask: tf.Tensor): tf.Scalar {
  return tf.tidy(() => tf.div(tf.sum(tf.mul(x, mask)), tf.maximum(tf.sum(mask), 1)) as tf.Scalar);
}

/**
 * Defaults of the PPO coefficients (the LaMer reference code; docs/method.md#defaults): clip epsilon 0.2, dual-clip
 * constant c 3.0, entropy bonus 0.001. Written once: the losses below and the job's
 * hyperparameters (../run/job.ts) take them from here.
 */
export const PPO_DEFAULTS = { clipCoef: 0.2, dualClip: 3.0, entCoef: 0.001 } as const;

export interface PpoLossInput {
  /** New logprobs (differentiable), `[B, T]`. */
  logprobs: tf.Tensor2D;
  /** Logprobs under the policy that sampled the data, `[B, T]`. */
  oldLogprobs: tf.Tensor2D;
  /** `[B]` or `[B, T]`. */
  advantages: tf.Tensor1D | tf.Tensor2D;
  mask: tf.Tensor2D;
  /** PPO clip epsilon (LaMer CODE: 0.2). */
  clipCoef?: number;
  /** Dual-clip constant c > 1 (LaMer CODE: 3.0); bounds the loss of negative advantages by -A*c. */
  dualClip?: number;
}

export interface PpoLossOutput {
  /** Scalar, differentiable. */
  pgLoss: tf.Scalar;
  /** Fraction of tokens where the clipped branch is the larger loss, mean(L2 > L1) (verl
   *  pg_clipfrac; CleanRL's mean(|ratio - 1| > eps) also counts tokens outside the range whose
   *  loss the clip does not change). */
  clipFrac: tf.Scalar;
  /** Fraction of tokens bounded by the dual clip (A < 0, verl pg_clipfrac_lower). */
  dualClipFrac: tf.Scalar;
  /** k3 estimator of KL(old || new): token-mean of (ratio - 1) - log ratio (CleanRL approx_kl). */
  approxKl: tf.Scalar;
}

/**
 * PPO clipped surrogate with dual clip, token-mean (Schulman et al. 2017; dual clip: Ye et al. 2020;
 * as verl's compute_policy_loss):
 *   ratio = exp(logp - logp_old)
 *   L1 = -A ratio;  L2 = -A clip(ratio, 1-eps, 1+eps);  L = max(L1, L2)
 *   if A < 0: L = min(L, -A c)
 *   pg_loss = token-mean(L)
 */
export function ppoClipLoss(inp: PpoLossInput): PpoLossOutput {
  const clipCoef = inp.clipCoef ?? PPO_DEFAULTS.clipCoef;
  const dualClip = inp.dualClip ?? PPO_DEFAULTS.dualClip;
  if (!(dualClip > 1)) throw new RangeError(`dualClip must be > 1, got ${dualClip}`);
  return tf.tidy(() => {
    const { logprobs, oldLogprobs, mask } = inp;
    const advantages = inp.advantages.rank === 1 ? tf.expandDims(inp.advantages, 1) : inp.advantages;
    const logratio = tf.sub(logprobs, oldLogprobs); // log pi - log pi_old
    const ratio = tf.exp(logratio); // ratio = pi / pi_old (docs/method.md#the-ppo-loss)
    const pgLosses1 = tf.mul(tf.neg(advantages), ratio); // L1 = -A * ratio
    const pgLosses2 = tf.mul(tf.neg(advantages), tf.clipByValue(ratio, 1 - clipCoef, 1 + clipCoef)); // L2 = -A * clip(ratio, 1-eps, 1+eps) (eps 0.2)
    const clipped = tf.maximum(pgLosses1, pgLosses2); // max(L1, L2)
    const pgLosses3 = tf.mul(tf.neg(advantages), dualClip); // L3 = -A * c (dual clip c = 3.0)
    const dual = tf.minimum(clipped, pgLosses3); // min(max(L1, L2), L3)
    const negAdv = tf.less(advantages, 0);
    const pgLosses = tf.where(tf.broadcastTo(negAdv, ratio.shape), dual, clipped); // dual clip only where A < 0
    const pgLoss = tokenMean(pgLosses, mask); // pg_loss = token-mean(L)
    const clipFrac = tokenMean(tf.cast(tf.greater(pgLosses2, pgLosses1), 'float32'), mask); // verl pg_clipfrac: mean(L2 > L1)
    const dualClipFrac = tokenMean(tf.mul(tf.cast(tf.greater(clipped, pgLosses3), 'float32'), tf.cast(negAdv, 'float32')), mask); // verl pg_clipfrac_lower
    const approxKl = tokenMean(tf.sub(tf.sub(ratio, 1), logratio), mask); // approx_kl = mean((ratio - 1) - log ratio)
    return { pgLoss, clipFrac, dualClipFrac, approxKl };
  });
}

/** SFT loss: token-mean of -log pi(target) over output tokens only (mask), a scalar. */
export function sftLoss(logits: tf.Tensor3D, targets: tf.Tensor2D, mask: tf.Tensor2D): tf.Scalar {
  return tf.tidy(() => tokenMean(tf.neg(logprobsFromLogits(logits, targets)), mask));
}

/**
 * Clip gradients by their global L2 norm (torch.nn.utils.clip_grad_norm_):
 *   norm = sqrt(sum_i ||g_i||^2);  g_i <- g_i * min(1, maxNorm / (norm + 1e-6))
 * @returns new gradient tensors (caller disposes them and the inputs) and the norm before clipping.
 */
export function clipByGlobalNorm(grads: tf.Tensor[], maxNorm: number): { grads: tf.Tensor[]; norm: number } {
  if (!(maxNorm > 0)) throw new RangeError(`maxNorm must be > 0, got ${maxNorm}`);
  const normT = tf.tidy(() => tf.sqrt(tf.addN(grads.map((g) => tf.sum(tf.square(g))))));
  const norm = normT.dataSync()[0];
  normT.dispose();
  const scale = Math.min(1, maxNorm / (norm + 1e-6)); // clip_coef = max_norm / (norm + 1e-6), at most 1
  return { grads: grads.map((g) => tf.tidy(() => tf.mul(g, scale))), norm };
}

export interface AdamWOptions {
  lr: number;
  beta1?: number;
  beta2?: number;
  eps?: number;
  /** Decoupled weight decay (LaMer CODE: 0.01). */
  weightDecay?: number;
}

/** A non-trainable variable of zeros shaped like `x` (the temporary tensor is freed). */
function zerosVariable(x: tf.Tensor): tf.Variable {
  const z = tf.zerosLike(x);
  const v = tf.variable(z, false);
  z.dispose();
  return v;
}

/**
 * AdamW on tf.Variables (torch.optim.AdamW semantics, decoupled weight decay):
 *   theta <- theta (1 - lr wd)
 *   m <- b1 m + (1 - b1) g;   v <- b2 v + (1 - b2) g^2
 *   theta <- theta - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
 */
export class AdamW {
  /** Learning rate of the next update (a job's schedule sets it before each step). */
  lr: number;
  readonly beta1: number;
  readonly beta2: number;
  readonly eps: number;
  readonly weightDecay: number;
  /** Number of steps taken (t). */
  step = 0;
  private readonly m: tf.Variable[];
  private readonly v: tf.Variable[];

  constructor(readonly variables: tf.Variable[], opts: AdamWOptions) {
    this.lr = opts.lr;
    this.beta1 = opts.beta1 ?? 0.9;
    this.beta2 = opts.beta2 ?? 0.999;
    this.eps = opts.eps ?? 1e-8;
    this.weightDecay = opts.weightDecay ?? 0.01;
    if (!(this.lr >= 0)) throw new RangeError(`lr must be >= 0, got ${this.lr}`);
    this.m = variables.map((x) => zerosVariable(x));
    this.v = variables.map((x) => zerosVariable(x));
  }

  /** Apply one update; `grads[i]` is the gradient of `variables[i]` (same shape). */
  applyGradients(grads: tf.Tensor[], lr = this.lr): void {
    if (grads.length !== this.variables.length) throw new RangeError(`expected ${this.variables.length} gradients, got ${grads.length}`);
    this.step += 1;
    const bc1 = 1 - Math.pow(this.beta1, this.step);
    const bc2 = 1 - Math.pow(this.beta2, this.step);
    tf.tidy(() => {
      this.variables.forEach((theta, i) => {
        const g = grads[i];
        const m = tf.add(tf.mul(this.m[i], this.beta1), tf.mul(g, 1 - this.beta1)); // m = b1 m + (1-b1) g
        const v = tf.add(tf.mul(this.v[i], this.beta2), tf.mul(tf.square(g), 1 - this.beta2)); // v = b2 v + (1-b2) g^2
        this.m[i].assign(m);
        this.v[i].assign(v);
        const decayed = tf.mul(theta, 1 - lr * this.weightDecay); // theta (1 - lr wd)
        const update = tf.div(tf.div(m, bc1), tf.add(tf.sqrt(tf.div(v, bc2)), this.eps)); // m_hat / (sqrt(v_hat) + eps)
        theta.assign(tf.sub(decayed, tf.mul(update, lr)));
      });
    });
  }

  dispose(): void {
    for (const x of [...this.m, ...this.v]) x.dispose();
  }
}

export interface PpoObjectiveOptions {
  clipCoef?: number;
  dualClip?: number;
  /** Entropy bonus coefficient (LaMer CODE: 0.001). */
  entCoef?: number;
  /** `[B, T]`, 1 at the trained positions of reflection turns (src/training/data/batch.ts): only
   *  splits the reported entropy (`reflectionShare`, `reflectionEntropyShare`); the loss is the same. */
  reflectionMask?: tf.Tensor2D;
}

/**
 * The split of a token-mean entropy into reflection and action tokens, as two token-means over all
 * trained tokens (so that they add up over micro-batches and shards like the other losses):
 *   reflectionShare = token-mean(R),  reflectionEntropyShare = token-mean(H R)
 * with R the reflection mask. Then reflection entropy = reflectionEntropyShare / reflectionShare
 * and action entropy = (entropy - reflectionEntropyShare) / (1 - reflectionShare).
 * Both are 0 without a mask.
 */
export function reflectionSplit(entropy: tf.Tensor, mask: tf.Tensor2D, reflectionMask: tf.Tensor2D | undefined): { reflectionShare: tf.Scalar; reflectionEntropyShare: tf.Scalar } {
  return tf.tidy(() => {
    if (!reflectionMask) return { reflectionShare: tf.scalar(0), reflectionEntropyShare: tf.scalar(0) };
    const r = tf.mul(reflectionMask, mask);
    return { reflectionShare: tokenMean(r, mask), reflectionEntropyShare: tokenMean(tf.mul(entropy, r), mask) };
  });
}

/**
 * The full PPO objective from logits (CleanRL ppo.py: loss = pg_loss - ent_coef * entropy):
 *   loss = token-mean(L_clip) - ent_coef * token-mean(H)
 * @param logits `[B, T, V]`; targets `[B, T]`; oldLogprobs `[B, T]`; advantages `[B]` (one per
 *   sample) or `[B, T]` (per token: packed RL samples); mask `[B, T]`.
 */
export function ppoObjective(
  logits: tf.Tensor3D, targets: tf.Tensor2D, oldLogprobs: tf.Tensor2D, advantages: tf.Tensor1D | tf.Tensor2D, mask: tf.Tensor2D,
  opts: PpoObjectiveOptions = {},
): PpoLossOutput & { loss: tf.Scalar; entropy: tf.Scalar; reflectionShare: tf.Scalar; reflectionEntropyShare: tf.Scalar } {
  const entCoef = opts.entCoef ?? PPO_DEFAULTS.entCoef;
  return tf.tidy(() => {
    const logprobs = logprobsFromLogits(logits, targets);
    const out = ppoClipLoss({ logprobs, oldLogprobs, advantages, mask, clipCoef: opts.clipCoef, dualClip: opts.dualClip });
    const h = entropyFromLogits(logits);
    const entropy = tokenMean(h, mask); // entropy = token-mean(H)
    const loss = tf.sub(out.pgLoss, tf.mul(entropy, entCoef)) as tf.Scalar; // loss = pg_loss - ent_coef * entropy (ent_coef 0.001)
    return { ...out, loss, entropy, ...reflectionSplit(h, mask, opts.reflectionMask) };
  });
}
