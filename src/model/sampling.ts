/**
 * Token sampling for the builtin engine: temperature, top-k, top-p (nucleus), a seeded PRNG,
 * stop tokens and length caps.
 *
 * Units: inputs are log-softmax rows `[V]` (natural log, temperature 1) from the model.
 * The logprob recorded for a sampled token is its logprob under the sampling distribution itself
 * (`samplingLogprobs`: tempered, restricted to the allowed tokens, top-k, top-p, renormalised),
 * the behaviour policy that training recomputes for PPO ratios (src/policy/engine.ts).
 */
import { EOS } from './tokenizer.js';
import { Rng } from '../shared/rng.js';

/** Sampling settings of one generation (docs/protocol.md "Create a session" `sampling`). */
export interface SamplingParams {
  /** > 0; 0 means greedy (argmax). */
  temperature: number;
  /** (0, 1]; nucleus sampling mass. 1 disables. */
  topP: number;
  /** >= 0; 0 disables. */
  topK: number;
  /** Optional integer seed: one seed gives one output for one prompt and model version. A session
   *  derives each call's seed from its own seed, attempt, step and call kind (callSeed). */
  seed?: number;
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
  /** Token ids that end a generation (kept in the output ids). Default [EOS]. Free generation
   *  never samples BOS, SEP or PAD (src/model/tokenizer.ts utf8Allowed), so they cannot stop it. */
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

/** What a model call is, for deriving its random stream (see `callSeed`). */
export type CallKind = 'act' | 'reflect';

/**
 * The seed of one model call of a seeded session: a 32-bit hash (murmur3 finaliser over the
 * words) of the session's seed, the attempt, the step and the call kind, so that one session seed
 * reproduces the whole session while every call draws from its own stream (a fresh generator
 * built from the bare session seed at every call would repeat step 0's draws at every step).
 * @param seed the session's integer seed; attempt, step: 0-based position of the call.
 * @returns an unsigned 32-bit integer.
 */
export function callSeed(seed: number, attempt: number, step: number, kind: CallKind): number {
  const fmix = (h: number) => {
    h ^= h >>> 16; h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13; h = Math.imul(h, 0xc2b2ae35);
    return (h ^ (h >>> 16)) >>> 0;
  };
  let h = 0x5be0cd19;
  // the seed may exceed 32 bits: mix its low and high words separately
  const words = [seed >>> 0, Math.floor(seed / 2 ** 32) >>> 0, attempt >>> 0, step >>> 0, kind === 'act' ? 1 : 2];
  for (const w of words) h = fmix((h ^ fmix(w)) + 0x9e3779b9);
  return h;
}

/**
 * The sampling distribution itself, as natural-log probabilities over the K entries of `scores`
 * (a log-softmax row of the model, or any log-weights): restricted to `allowed` (indices; all when
 * omitted), then tempered, then top-k, then top-p, renormalised. Entries outside the support are
 * -Infinity. This is the behaviour policy whose logprobs are recorded and trained
 * (src/training/data/behaviour.ts recomputes it with logits / temperature and the same support):
 *   p_i = exp(s_i / T) / sum_{j in S} exp(s_j / T)  for i in S, 0 otherwise,
 * with S = the allowed indices, cut to the k highest (k > 0), then to the smallest prefix (by
 * descending p, ties by lower index) whose mass reaches top-p. Temperature 0 (greedy) is scored
 * at temperature 1 over the allowed set (a greedy step is not a sample of any tempered policy).
 * @throws Error for temperature < 0, topP outside (0, 1], topK < 0 or an empty `allowed`.
 */
export function samplingLogprobs(scores: ArrayLike<number>, params: Pick<SamplingParams, 'temperature' | 'topP' | 'topK'>, allowed?: readonly number[]): Float64Array {
  const { topP, topK } = params;
  if (!(params.temperature >= 0)) throw new Error(`temperature must be >= 0, got ${params.temperature}`);
  if (!(topP > 0 && topP <= 1)) throw new Error(`topP must be in (0, 1], got ${topP}`);
  if (!(topK >= 0)) throw new Error(`topK must be >= 0, got ${topK}`);
  const greedy = params.temperature === 0;
  const T = greedy ? 1 : params.temperature;
  const K = scores.length;
  const idx = allowed ? [...new Set(allowed)] : Array.from({ length: K }, (_, i) => i);
  if (idx.length === 0) throw new Error('the allowed set is empty');
  const order = idx.sort((a, b) => scores[b] - scores[a] || a - b);
  let keep = !greedy && topK > 0 ? Math.min(topK, order.length) : order.length;
  const max = scores[order[0]];
  const w = new Float64Array(keep);
  let total = 0;
  for (let r = 0; r < keep; r++) { w[r] = Math.exp((scores[order[r]] - max) / T); total += w[r]; }
  if (!greedy && topP < 1) {
    let mass = 0;
    let r = 0;
    for (; r < keep; r++) {
      mass += w[r] / total;
      if (mass >= topP - 1e-9) break; // the same epsilon as sampleIndex
    }
    keep = Math.min(keep, r + 1);
    total = 0;
    for (let i = 0; i < keep; i++) total += w[i];
  }
  const out = new Float64Array(K).fill(-Infinity);
  const logTotal = Math.log(total);
  for (let r = 0; r < keep; r++) out[order[r]] = Math.log(w[r]) - logTotal; // log p_i
  return out;
}

/**
 * Draws an index from log-probabilities (`samplingLogprobs`); at temperature 0 the argmax (lowest
 * index on ties) without consuming randomness.
 */
export function drawIndex(logprobs: ArrayLike<number>, temperature: number, rng: Rng): number {
  const K = logprobs.length;
  let best = 0;
  for (let i = 1; i < K; i++) if (logprobs[i] > logprobs[best]) best = i;
  if (temperature === 0) return best;
  let u = rng.next();
  let last = best;
  for (let i = 0; i < K; i++) {
    if (logprobs[i] === -Infinity) continue;
    u -= Math.exp(logprobs[i]);
    last = i;
    if (u < 0) return i;
  }
  return last; // rounding: the mass summed to slightly below u
}

/**
 * The allowed next tokens at each position of `output` when sampling is constrained to
 * `candidates` (token-id sequences, e.g. each action's bytes + EOS): position j allows the j-th
 * token of every candidate that agrees with output[0..j-1] (a walk down the candidates' trie).
 * @returns `[output.length]` sorted, distinct token ids per position (empty once no candidate agrees).
 */
export function candidateSupport(candidates: readonly (readonly number[])[], output: readonly number[]): number[][] {
  let live = candidates.map((_, i) => i);
  const out: number[][] = [];
  for (let j = 0; j < output.length; j++) {
    const allowed = [...new Set(live.filter((c) => candidates[c].length > j).map((c) => candidates[c][j]))].sort((a, b) => a - b);
    out.push(allowed);
    live = live.filter((c) => candidates[c][j] === output[j]);
  }
  return out;
}
