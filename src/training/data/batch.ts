/**
 * Samples as training tensors (docs/method.md#the-behaviour-policy): next-token rows with an output mask, the old
 * logprobs of the PPO ratio, advantages, and each sample's behaviour policy (sampling temperature
 * and support), so that training scores tokens with the distribution that sampled them.
 * Shapes: B = samples, T = positions (longest sequence - 1), V = vocabulary.
 */
import * as tf from '@tensorflow/tfjs';
import type { Behaviour, TrainingSample } from './data.js';
import type { TrainableModel } from '../model-api.js';

/** A minibatch as tensors; see `makeBatch`. */
export interface Batch {
  /** `[B, T]` int32 input ids. */
  inputs: tf.Tensor2D;
  /** `[B, T]` int32 target ids (inputs shifted by one). */
  targets: tf.Tensor2D;
  /** `[B, T]` float32, 1 at trained targets: output tokens (all of them, or those a packed
   *  sample's `lossTargets` trains). */
  mask: tf.Tensor2D;
  /** `[B, T]` float32 log pi_old(target) at output positions (0 elsewhere): the old logprobs of the
   *  PPO ratio, as given to `makeBatch` (the job passes the ones recomputed with the starting
   *  weights, or the sampler's when `hyper.oldLogprobs` is 'stored'), else the sample's recorded
   *  `oldLogprobs` (the sampler's). */
  oldLogprobs: tf.Tensor2D;
  /** `[B]` float32, one per sample; `[B, T]` (the advantage of the turn each output position
   *  trains, 0 elsewhere) when a sample of the batch has per-token `advantages` (packed RL). */
  advantages: tf.Tensor1D | tf.Tensor2D;
  /** Non-padding positions. */
  tokens: number;
  /** Positions with mask 1: the trained output tokens (what token-mean losses average over). */
  trainedTokens: number;
  /** `[B, T]` float32, 1 at the trained positions that belong to a reflection turn (a sample of
   *  kind 'reflection', or a packed sample's reflection turn), 0 elsewhere: splits the step's
   *  entropy and token counts into reflection and action tokens (src/training/maths/ppo.ts).
   *  Absent (hand-made batches): no reflection tokens. */
  reflectionMask?: tf.Tensor2D;
  /** Fraction of the [B, T] positions that are padding. */
  padFrac: number;
  /** Per sample: positions of its output targets, for writing recomputed logprobs back. */
  outputPositions: Array<{ start: number; length: number }>;
  /** `[B]` float32 sampling temperature of each sample (1 for greedy or unknown). */
  temperatures: tf.Tensor1D;
  /** `[B, T, V]` float32 additive support mask (0 allowed, -1e9 outside the sampler's support), or
   *  null when every position of the batch allows the whole vocabulary. */
  supportMask: tf.Tensor3D | null;
  /** `[B]` int32 absolute position of each row's first input (the model's `positionOffsets`), or
   *  null: every row starts at position 0, as served. */
  positionOffsets: tf.Tensor1D | null;
}

/** Per sample, per output position: the allowed token ids, or null for the whole vocabulary. */
export type Supports = ReadonlyArray<ReadonlyArray<readonly number[] | null> | null>;

/** The sampler settings that define a sample's behaviour policy (greedy and absent: 1 / 1 / 0). */
export function effectiveBehaviour(s: Pick<TrainingSample, 'behaviour'>): Behaviour {
  const b = s.behaviour;
  if (!b || b.temperature === 0) return { temperature: 1, topP: 1, topK: 0, ...(b?.candidates ? { candidates: b.candidates } : {}) };
  return b;
}

/**
 * One sample of `makeBatch` checked and cut to the block: its sequence (prompt ++ output, the
 * first tokens dropped beyond blockSize + 1), the index of the first target that is an output
 * token, and what trains it: `lp` old logprobs, `lt` loss targets and `adv` per-token advantages
 * (the last two checked to be as long as the output), `support` per output token.
 * @throws RangeError as makeBatch documents.
 */
function batchRow(
  s: TrainingSample, model: Pick<TrainableModel, 'blockSize' | 'vocabSize'>, lp: number[] | null, support: ReadonlyArray<readonly number[] | null> | null, off: number | undefined,
) {
  if (s.outputTokenIds.length === 0) throw new RangeError(`sample ${s.sessionId}/${s.attempt}/${s.step} has no output tokens`);
  let seq = [...s.promptTokenIds, ...s.outputTokenIds];
  let promptLen = s.promptTokenIds.length;
  const cut = Math.max(0, seq.length - 1 - model.blockSize);
  seq = seq.slice(cut);
  promptLen = Math.max(0, promptLen - cut);
  for (const id of seq) if (!(Number.isInteger(id) && id >= 0 && id < model.vocabSize)) throw new RangeError(`token id ${id} outside [0, ${model.vocabSize})`);
  const firstOut = Math.max(0, promptLen - 1); // targets index j predicts seq[j+1]
  const lt = s.lossTargets ?? null;
  if (lt && lt.length !== s.outputTokenIds.length) throw new RangeError(`sample ${s.sessionId}/${s.attempt}/${s.step}: lossTargets must be [outLen]`);
  const adv = s.advantages ?? null;
  if (adv && adv.length !== s.outputTokenIds.length) throw new RangeError(`sample ${s.sessionId}/${s.attempt}/${s.step}: advantages must be [outLen]`);
  if (off !== undefined && !(Number.isInteger(off) && off >= 0 && off + seq.length - 1 <= model.blockSize)) {
    throw new RangeError(`sample ${s.sessionId}/${s.attempt}/${s.step}: position offset ${off} outside [0, ${model.blockSize - (seq.length - 1)}] (blockSize ${model.blockSize} - ${seq.length - 1} inputs)`);
  }
  return { seq, firstOut, lp, lt, adv, support };
}

/**
 * Which output tokens of a sample belong to a reflection turn: all of them for a sample of kind
 * 'reflection', a packed sample's reflection turn (`packedTurns`, positions start .. start +
 * length - 1), else none (null).
 */
export function reflectionOutputs(s: Pick<TrainingSample, 'kind' | 'outputTokenIds' | 'packedTurns'>): Uint8Array | null {
  if (!s.packedTurns) return s.kind === 'reflection' ? new Uint8Array(s.outputTokenIds.length).fill(1) : null;
  const turns = s.packedTurns.filter((t) => t.kind === 'reflection');
  if (turns.length === 0) return null;
  const out = new Uint8Array(s.outputTokenIds.length);
  for (const t of turns) out.fill(1, t.start, t.start + t.length);
  return out;
}

/**
 * Lay samples out as next-token training rows: sequence s = prompt ++ output (length L);
 * inputs = s[0..L-2], targets = s[1..L-1]; mask = 1 where the target is an output token. A sample
 * with `lossTargets` (packed SFT) instead trains, at the position that predicts output token i,
 * the target lossTargets[i] (mask 1), or nothing where it is -1 (mask 0, target s[j+1]); the
 * inputs stay the sequence, so a causal model's logits there are those of the prefix alone.
 * Sequences longer than blockSize + 1 lose tokens from the left (prompt first). Right-padded.
 * `oldLogprobs[b]` (when given and not null) is sample b's log pi_old per output token, else its
 * recorded `oldLogprobs`; `supports[b]` its sampler support per output token (null: whole vocabulary).
 * Advantages are `[B]`, or `[B, T]` when a sample has per-token `advantages` (packed RL: each
 * output position gets its turn's; samples without get their `advantage` at every position).
 * `positionOffsets[b]` (when given) is the absolute position of row b's first input: its n inputs
 * sit at positions offset..offset+n-1, so offset + n <= blockSize (n = the row's length after the
 * left cut).
 * @throws RangeError when a sample has no output tokens or a token id outside [0, V), or
 *   positionOffsets is not one integer per sample with 0 <= offset <= blockSize - n.
 */
export function makeBatch(
  samples: readonly TrainingSample[], model: Pick<TrainableModel, 'blockSize' | 'padId' | 'vocabSize'>, oldLogprobs?: ReadonlyArray<number[] | null>, supports?: Supports,
  positionOffsets?: readonly number[],
): Batch {
  if (positionOffsets && positionOffsets.length !== samples.length) throw new RangeError(`positionOffsets must have one offset per sample (${samples.length}), got ${positionOffsets.length}`);
  const rows = samples.map((s, b) => batchRow(s, model, oldLogprobs?.[b] ?? s.oldLogprobs, supports?.[b] ?? null, positionOffsets?.[b]));
  const V = model.vocabSize;
  const T = Math.max(...rows.map((r) => r.seq.length - 1));
  const B = rows.length;
  const inputs = new Int32Array(B * T).fill(model.padId);
  const targets = new Int32Array(B * T).fill(model.padId);
  const mask = new Float32Array(B * T);
  const reflMask = new Float32Array(B * T);
  const oldLp = new Float32Array(B * T);
  let tokens = 0;
  let trainedTokens = 0;
  const outputPositions: Batch['outputPositions'] = [];
  const perToken = rows.some((r) => r.adv !== null);
  const advs = perToken ? new Float32Array(B * T) : null;
  const restricted = rows.some((r) => r.support?.some((x) => x !== null));
  const maskAdd = restricted ? new Float32Array(B * T * V) : null;
  rows.forEach((r, b) => {
    const n = r.seq.length - 1;
    tokens += n;
    const outLen = n - r.firstOut;
    const ltOff = r.lt ? r.lt.length - outLen : 0; // left-truncated outputs keep their last targets
    const refl = reflectionOutputs(samples[b]);
    const outOff = samples[b].outputTokenIds.length - outLen; // output index of position firstOut
    for (let j = 0; j < n; j++) {
      inputs[b * T + j] = r.seq[j];
      targets[b * T + j] = r.seq[j + 1];
      if (j < r.firstOut) continue;
      const want = r.lt ? r.lt[ltOff + j - r.firstOut]! : r.seq[j + 1];
      if (want < 0) continue;
      if (!(Number.isInteger(want) && want < model.vocabSize)) throw new RangeError(`loss target ${want} outside [0, ${model.vocabSize})`);
      targets[b * T + j] = want;
      mask[b * T + j] = 1;
      if (refl?.[outOff + j - r.firstOut]) reflMask[b * T + j] = 1;
      trainedTokens++;
    }
    outputPositions.push({ start: r.firstOut, length: outLen });
    if (r.lp) {
      const off = r.lp.length - outLen; // left-truncated outputs keep their last logprobs
      for (let k = 0; k < outLen; k++) oldLp[b * T + r.firstOut + k] = r.lp[off + k] ?? 0;
    }
    if (advs) {
      const off = r.adv ? r.adv.length - outLen : 0;
      for (let k = 0; k < outLen; k++) advs[b * T + r.firstOut + k] = r.adv ? r.adv[off + k] : samples[b].advantage;
    }
    if (maskAdd && r.support) {
      const off = r.support.length - outLen;
      for (let k = 0; k < outLen; k++) {
        const allowed = r.support[off + k];
        if (!allowed) continue;
        const base = (b * T + r.firstOut + k) * V;
        maskAdd.fill(-1e9, base, base + V);
        for (const t of allowed) maskAdd[base + t] = 0;
      }
    }
  });
  return {
    inputs: tf.tensor2d(inputs, [B, T], 'int32'),
    targets: tf.tensor2d(targets, [B, T], 'int32'),
    mask: tf.tensor2d(mask, [B, T]),
    reflectionMask: tf.tensor2d(reflMask, [B, T]),
    oldLogprobs: tf.tensor2d(oldLp, [B, T]),
    advantages: advs ? tf.tensor2d(advs, [B, T]) : tf.tensor1d(samples.map((s) => s.advantage)),
    tokens,
    trainedTokens,
    padFrac: 1 - tokens / (B * T),
    outputPositions,
    temperatures: tf.tensor1d(samples.map((s) => effectiveBehaviour(s).temperature)),
    supportMask: maskAdd ? tf.tensor3d(maskAdd, [B, T, V]) : null,
    positionOffsets: positionOffsets ? tf.tensor1d(Int32Array.from(positionOffsets), 'int32') : null,
  };
}

/**
 * The behaviour policy's logits: `logits / temperature` per sample, plus the support mask.
 * `[B, T, V]` -> `[B, T, V]`; log-softmax of the result is samplingLogprobs at every output position.
 */
export function behaviourLogits(logits: tf.Tensor3D, batch: Pick<Batch, 'temperatures' | 'supportMask'>): tf.Tensor3D {
  return tf.tidy(() => {
    const scaled = tf.div(logits, tf.reshape(batch.temperatures, [-1, 1, 1])) as tf.Tensor3D; // z / T
    return batch.supportMask ? (tf.add(scaled, batch.supportMask) as tf.Tensor3D) : scaled;
  });
}

/** Free a batch's tensors. */
export function disposeBatch(b: Batch): void {
  tf.dispose([b.inputs, b.targets, b.mask, b.oldLogprobs, b.advantages, b.temperatures]);
  if (b.reflectionMask) b.reflectionMask.dispose();
  if (b.supportMask) b.supportMask.dispose();
  if (b.positionOffsets) b.positionOffsets.dispose();
}
