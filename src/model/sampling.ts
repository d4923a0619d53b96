/**
 * Token sampling for the builtin engine: temperature, top-k, top-p (nucleus), a seeded PRNG,
 * stop tokens and length caps.
 *
 * Units: inputs are log-softmax rows `[V]` (natural log, temperature 1) from the model.
 * The logprob recorded for a sampled token is always its logprob under the model's *plain*
 * softmax (temperature 1, no top-k/top-p), as src/policy/engine.ts requires for PPO ratios —
 * not under the truncated/tempered sampling distribution.
 */
import type { SamplingParams } from '../policy/engine.js';
import { EOS } from './tokenizer.js';

/**
 * Small seeded PRNG (mulberry32, Tommy Ettinger): 32-bit state, uniform floats in [0, 1).
 * Reproducible across platforms for a fixed seed.
 */
export class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = (Math.floor(seed) ^ 0x9e3779b9) >>> 0;
  }
  /** Uniform float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
}

/** An Rng for `params.seed`, or for a random seed when none is given. */
export function rngFor(params: SamplingParams): Rng {
  return new Rng(params.seed ?? Math.floor(Math.random() * 2 ** 32));
}

/** Length caps and stop tokens of generations (configurable per engine). */
export interface GenerationLimits {
  /** Max sampled tokens of an action (stop token included). Default 48. */
  maxActionTokens: number;
  /** Max sampled tokens of a reflection (stop token included). Default 256. */
  maxReflectionTokens: number;
  /** Token ids that end a generation (kept in the output ids). Default [EOS]. */
  stopTokens: number[];
}

export const DEFAULT_LIMITS: GenerationLimits = {
  maxActionTokens: 48,
  maxReflectionTokens: 256,
  stopTokens: [EOS],
};

/**
 * Draws one index from unnormalised log-weights `scores` (length K) with temperature, top-k and
 * top-p applied. Used both for next tokens (scores = log-softmax row) and for choosing among
 * candidate actions (scores = summed candidate logprobs).
 * - temperature 0: argmax (lowest index on ties); no randomness consumed.
 * - otherwise: p_i ∝ exp(scores_i / T); keep the top-k (if k > 0), then the smallest set of
 *   highest-probability entries whose mass reaches top-p (if top-p < 1); renormalise; draw.
 * @throws Error for temperature < 0, topP outside (0, 1], or topK < 0.
 */
export function sampleIndex(scores: ArrayLike<number>, params: SamplingParams, rng: Rng): number {
  const { temperature, topP, topK } = params;
  if (!(temperature >= 0)) throw new Error(`temperature must be >= 0, got ${temperature}`);
  if (!(topP > 0 && topP <= 1)) throw new Error(`topP must be in (0, 1], got ${topP}`);
  if (!(topK >= 0)) throw new Error(`topK must be >= 0, got ${topK}`);
  const K = scores.length;
  if (temperature === 0) {
    let best = 0;
    for (let i = 1; i < K; i++) if (scores[i] > scores[best]) best = i;
    return best;
  }
  let max = -Infinity;
  for (let i = 0; i < K; i++) if (scores[i] > max) max = scores[i];
  const order = Array.from({ length: K }, (_, i) => i).sort((a, b) => scores[b] - scores[a] || a - b);
  let keep = topK > 0 ? Math.min(topK, K) : K;
  const probs = new Float64Array(keep);
  let total = 0;
  for (let r = 0; r < keep; r++) {
    probs[r] = Math.exp((scores[order[r]] - max) / temperature);
    total += probs[r];
  }
  if (topP < 1) {
    let mass = 0;
    let r = 0;
    for (; r < keep; r++) {
      mass += probs[r] / total;
      if (mass >= topP - 1e-9) break; // epsilon: 0.5 + 0.3 must reach 0.8 despite rounding
    }
    keep = Math.min(keep, r + 1);
    total = 0;
    for (let i = 0; i < keep; i++) total += probs[i];
  }
  let u = rng.next() * total;
  for (let r = 0; r < keep; r++) {
    u -= probs[r];
    if (u < 0) return order[r];
  }
  return order[keep - 1];
}
