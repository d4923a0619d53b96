/**
 * The behaviour policy under given weights (docs/method.md#the-behaviour-policy: logprobs for the PPO
 * ratio are computed on logits divided by the rollout temperature, verl dp_actor.py ~153/225): per sample
 * and output token, the sampler's support and the token's logprob, computed without gradient;
 * and the old logprobs pi_old of a PPO job.
 */
import * as tf from '@tensorflow/tfjs';
import { candidateSupport, samplingLogprobs } from '../../model/sampling.js';
import { utf8Support } from '../../model/tokenizer.js';
import { logprobsFromLogits } from '../../model/logprobs.js';
import type { OldLogprobSource } from '../../domain.js';
import { disposeBatch, effectiveBehaviour, makeBatch, type Supports } from './batch.js';
import type { TrainingSample } from './data.js';
import type { TrainableModel } from '../model-api.js';

/**
 * Logprobs of each sample's output tokens under `model` and the sample's behaviour policy,
 * `[outLen]` per sample (no gradient). Used to recompute old logprobs and by tests.
 */
export function outputLogprobs(model: TrainableModel, samples: readonly TrainingSample[], batchSize = 16, maxTokens = Infinity): number[][] {
  return behaviourOutputs(model, samples, batchSize, maxTokens).logprobs;
}

/**
 * The behaviour policy of every sample under `model` (no gradient): per output position, the
 * support (samplingLogprobs' finite entries; null = whole vocabulary) and the logprob of the output
 * token, log p_t = z_t / T - logsumexp_{S}(z / T). A token outside the recomputed support (a
 * top-p boundary that float noise moved) joins the support, so its logprob stays finite.
 * @returns `logprobs[i]` `[outLen]`, `supports[i]` `[outLen]` (null entries) or null (plain sample).
 */
export function behaviourOutputs(model: TrainableModel, samples: readonly TrainingSample[], batchSize = 16, maxTokens = Infinity): { logprobs: number[][]; supports: Array<Array<number[] | null> | null> } {
  const out: number[][] = [];
  const supports: Array<Array<number[] | null> | null> = [];
  const V = model.vocabSize;
  const len = (x: TrainingSample) => Math.min(x.promptTokenIds.length + x.outputTokenIds.length - 1, model.blockSize);
  for (let i = 0; i < samples.length;) {
    // consecutive samples, at most batchSize of them and at most maxTokens padded [B, T] positions
    // (the memory cap of training micro-batches: long prompts ran the wasm heap out of memory here)
    let n = 1;
    let longest = len(samples[i]);
    while (n < batchSize && i + n < samples.length && (n + 1) * Math.max(longest, len(samples[i + n])) <= maxTokens) {
      longest = Math.max(longest, len(samples[i + n]));
      n++;
    }
    const chunk = samples.slice(i, i + n);
    i += n;
    const batch = makeBatch(chunk, model);
    const behaviours = chunk.map(effectiveBehaviour);
    // samples without recorded sampler settings (legacy data, tests) are scored by the plain softmax
    const plain = chunk.map((s) => !s.behaviour);
    if (plain.every(Boolean)) {
      const lp = tf.tidy(() => logprobsFromLogits(model.logits(batch.inputs, false), batch.targets));
      const data = lp.arraySync();
      lp.dispose();
      batch.outputPositions.forEach((p, b) => { out.push(data[b].slice(p.start, p.start + p.length)); supports.push(null); });
    } else {
      const T = batch.inputs.shape[1];
      const rowsT = tf.tidy(() => tf.logSoftmax(model.logits(batch.inputs, false), -1));
      const rows = rowsT.dataSync() as Float32Array;
      rowsT.dispose();
      batch.outputPositions.forEach((p, b) => {
        const s = chunk[b];
        const beh = behaviours[b];
        const { targets, allowed: allowedOf } = trainedOutputs(s, beh.candidates, V);
        const off = s.outputTokenIds.length - p.length; // left-truncated outputs keep their last tokens
        const outIds = targets.slice(off);
        const allowedAll = allowedOf.slice(off);
        const lps: number[] = [];
        const sup: Array<number[] | null> = [];
        for (let k = 0; k < p.length; k++) {
          const row = rows.subarray((b * T + p.start + k) * V, (b * T + p.start + k + 1) * V);
          const t = outIds[k];
          if (t < 0) { lps.push(0); sup.push(null); continue; } // not trained (a packed sample's context)
          if (plain[b]) { lps.push(row[t]); sup.push(null); continue; }
          const allowed = allowedAll[k];
          const dist = samplingLogprobs(row, beh, allowed && allowed.length > 0 ? allowed : undefined);
          const S: number[] = [];
          for (let v = 0; v < V; v++) if (dist[v] > -Infinity) S.push(v);
          if (!(dist[t] > -Infinity)) S.push(t);
          // log p_t = z_t / T - logsumexp_{v in S} z_v / T  (the in-graph computation of training)
          let mx = -Infinity;
          for (const v of S) mx = Math.max(mx, row[v] / beh.temperature);
          let z = 0;
          for (const v of S) z += Math.exp(row[v] / beh.temperature - mx);
          lps.push(row[t] / beh.temperature - mx - Math.log(z));
          sup.push(S.length === V ? null : S);
        }
        out.push(lps);
        supports.push(sup);
      });
    }
    disposeBatch(batch);
  }
  return { logprobs: out, supports };
}

/**
 * Per output position of a sample: the token it trains (`lossTargets`, else the output token; -1:
 * none) and the sampler's restriction there (the candidates' trie, else the UTF-8 guard of free
 * generations; null where nothing is trained). A packed RL sample's turns each get their own,
 * from their own output tokens and candidates, exactly as their per-step samples.
 */
function trainedOutputs(s: TrainingSample, candidates: number[][] | undefined, V: number): { targets: number[]; allowed: Array<number[] | null> } {
  const support = (ids: readonly number[], cands: number[][] | undefined) => (cands ? candidateSupport(cands, ids) : utf8Support(ids, V));
  if (!s.packedTurns) {
    const targets = s.lossTargets ?? s.outputTokenIds;
    return { targets: [...targets], allowed: s.lossTargets ? targets.map(() => null) : support(s.outputTokenIds, candidates) };
  }
  const targets = s.outputTokenIds.map(() => -1);
  const allowed: Array<number[] | null> = s.outputTokenIds.map(() => null);
  for (const t of s.packedTurns) {
    const ids = s.lossTargets!.slice(t.start, t.start + t.length);
    support(ids, t.candidates).forEach((a, k) => { targets[t.start + k] = ids[k]; allowed[t.start + k] = a; });
  }
  return { targets, allowed };
}

/** pi_old of a PPO job: per sample, the old logprob of each output token, and the sampler's support. */
export interface OldPolicy {
  /** `oldLogprobs[i]` `[outLen]`: recomputed under the starting weights, or the sampler's recorded
   *  ones (`source` 'stored'; null for a sample that recorded none). */
  oldLogprobs: Array<number[] | null>;
  /** The behaviour policy's support per sample and output token (see `behaviourOutputs`). */
  supports: Supports;
  /** Mean of (sampler's recorded - recomputed) logprob over the output tokens that have a recorded
   *  one (the sampler's drift from the starting weights), or null when none has. */
  behaviorLogprobGap: number | null;
}

/**
 * The old policy of the PPO ratio (docs/method.md#the-behaviour-policy; verl recomputes old logprobs with the weights
 * before the update, so the first ratio is exactly 1): the behaviour policy of every sample under
 * the starting weights `model`. Its supports are always used; its logprobs are the old logprobs
 * unless `source` is 'stored' (then the sampler's recorded logprobs are). Chunks as
 * `behaviourOutputs` (`batchSize` samples, `maxTokens` padded positions at most).
 */
export function recomputeOldLogprobs(model: TrainableModel, samples: readonly TrainingSample[], source: OldLogprobSource, batchSize: number, maxTokens: number): OldPolicy {
  const { logprobs: recomputed, supports } = behaviourOutputs(model, samples, batchSize, maxTokens);
  return oldPolicyFrom(samples, recomputed, supports, source);
}

/**
 * The old policy from the behaviour outputs of every sample under the starting weights
 * (`behaviourOutputs`, computed here or by data-parallel replicas): see `recomputeOldLogprobs`.
 */
export function oldPolicyFrom(samples: readonly TrainingSample[], recomputed: number[][], supports: Supports, source: OldLogprobSource): OldPolicy {
  let gap = 0, n = 0;
  samples.forEach((s, i) => {
    const sampler = s.oldLogprobs;
    if (!sampler) return;
    const off = sampler.length - recomputed[i].length; // left-truncated outputs keep their last logprobs
    const lt = s.lossTargets;
    recomputed[i].forEach((x, k) => { if (lt && lt[off + k] < 0) return; gap += sampler[off + k] - x; n++; }); // recorded - recomputed, trained tokens
  });
  const oldLogprobs = source === 'recompute' ? recomputed : samples.map((s) => s.oldLogprobs);
  return { oldLogprobs, supports, behaviorLogprobGap: n > 0 ? gap / n : null };
}
