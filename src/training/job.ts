/**
 * The training job runner (shared/DESIGN.md §4; LAMER.md §3): load a checkpoint, run PPO epochs
 * (RL algorithms) or SFT epochs over minibatches of samples, report per-iteration metrics, honour
 * cancellation, and write a new checkpoint folder.
 *
 * One *iteration* is one optimiser step on one minibatch.
 *
 * The policy trained is the behaviour policy that sampled the data (src/model/sampling.ts
 * samplingLogprobs; verl divides logits by the rollout temperature, dp_actor.py ~153/225): each
 * sample's logits are divided by its recorded temperature and restricted to its support at every
 * output position (the candidates' trie for availableActions, else the UTF-8 guard of free text,
 * src/model/tokenizer.ts utf8Support; then top-k / top-p); the support is
 * taken from the starting weights (the weights that sampled) and held fixed during the job, so
 * the first PPO ratio is exactly 1 and the gradient moves the probabilities within it. Entropy is
 * that distribution's entropy.
 * Units: seconds for durations; tokens/s counts every non-padding position of the batch.
 */
import * as tf from '@tensorflow/tfjs';
import { candidateSupport, samplingLogprobs } from '../model/sampling.js';
import { utf8Support } from '../model/tokenizer.js';
import type { Algorithm, Behaviour, DataStats, TrainingSample } from './data.js';
import { AdamW, clipByGlobalNorm, logprobsFromLogits, ppoObjective, sftLoss, entropyFromLogits, tokenMean } from './losses.js';
import type { ModelIO, TrainableModel } from './model-api.js';

export interface TrainingHyper {
  /** Learning rate (constant). Default 1e-4 for RL, 1e-3 for SFT: sized for the small CPU models
   *  (CleanRL's ppo.py uses 2.5e-4 for small nets; LaMer's 1e-6 is for a 4B model). */
  lr?: number;
  /** Passes over the samples (LaMer CODE: 1 PPO epoch). Default 1. */
  epochs?: number;
  /** Samples per optimiser step. Default 16. */
  minibatchSize?: number;
  clipCoef?: number;
  dualClip?: number;
  entCoef?: number;
  maxGradNorm?: number;
  weightDecay?: number;
  /** 'recompute' (default): old logprobs from the loaded checkpoint before any update (verl);
   *  'stored': the logprobs recorded when sampling. */
  oldLogprobs?: 'recompute' | 'stored';
  /** Memory cap: a minibatch is run as micro-batches of at most this many [B, T] positions (at
   *  least one sample each) with gradient accumulation; the update is the same. Default 4096 (8192
   *  ran the wasm heap out of memory at 1000-token prompts on the 0.56M base model). */
  microBatchTokens?: number;
  /** Seed of the minibatch shuffle. */
  seed?: number;
}

export interface TrainingJobSpec {
  algorithm: Algorithm;
  /** Checkpoint folder to start from. */
  baseCheckpointDir: string;
  /** New checkpoint folder to write (must not exist yet or be empty). */
  outputDir: string;
  hyper?: TrainingHyper;
  /** Stats of the data (from data.ts), reported with every iteration and stored in the checkpoint. */
  dataStats?: DataStats;
  /** Extra metadata written with the checkpoint (parent version, job id...). */
  meta?: Record<string, unknown>;
}

export interface IterationMetrics {
  iteration: number;
  epoch: number;
  loss: number;
  /** RL only: clipped surrogate; SFT: equals loss. */
  pgLoss: number;
  entropy: number;
  clipFrac: number;
  dualClipFrac: number;
  approxKl: number;
  gradNorm: number;
  /** Mean undiscounted return of the attempts this minibatch has samples of (its own rollouts;
   *  the data's mean when samples carry no outcome). */
  meanReturn: number;
  /** pass@k of the sessions this minibatch has samples of, k = 1..the data's attempts (the data's
   *  pass@k when samples carry no outcome). */
  passAtK: Record<string, number>;
  /** Non-padding positions in the minibatch. */
  tokens: number;
  /** Fraction of the [B, T] positions that were padding. */
  padFrac: number;
  tokensPerSec: number;
  seconds: number;
}

export interface JobProgress {
  /** Fraction done in [0, 1]. */
  progress: number;
  iteration: number;
  totalIterations: number;
  metrics: IterationMetrics;
}

export interface JobResult {
  checkpointDir: string;
  iterations: number;
  samples: number;
  metrics: IterationMetrics[];
  /** Mean of the stored-minus-recomputed logprob over output tokens (drift of the sampler), RL only. */
  behaviorLogprobGap: number | null;
  seconds: number;
}

export class JobCancelledError extends Error {
  constructor() { super('training job cancelled'); this.name = 'JobCancelledError'; }
}

export interface RunOptions {
  io: ModelIO;
  onProgress?: (p: JobProgress) => void;
  signal?: AbortSignal;
}

/** A minibatch as tensors; see `makeBatch`. */
export interface Batch {
  /** `[B, T]` int32 input ids. */
  inputs: tf.Tensor2D;
  /** `[B, T]` int32 target ids (inputs shifted by one). */
  targets: tf.Tensor2D;
  /** `[B, T]` float32, 1 at output-token targets. */
  mask: tf.Tensor2D;
  /** `[B, T]` float32 stored logprobs at output positions (0 elsewhere). */
  storedLogprobs: tf.Tensor2D;
  /** `[B]` float32. */
  advantages: tf.Tensor1D;
  /** Non-padding positions. */
  tokens: number;
  /** Fraction of the [B, T] positions that are padding. */
  padFrac: number;
  /** Per sample: positions of its output targets, for writing recomputed logprobs back. */
  outputPositions: Array<{ start: number; length: number }>;
  /** `[B]` float32 sampling temperature of each sample (1 for greedy or unknown). */
  temperatures: tf.Tensor1D;
  /** `[B, T, V]` float32 additive support mask (0 allowed, -1e9 outside the sampler's support), or
   *  null when every position of the batch allows the whole vocabulary. */
  supportMask: tf.Tensor3D | null;
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
 * Lay samples out as next-token training rows: sequence s = prompt ++ output (length L);
 * inputs = s[0..L-2], targets = s[1..L-1]; mask = 1 where the target is an output token.
 * Sequences longer than blockSize + 1 lose tokens from the left (prompt first). Right-padded.
 * @throws RangeError when a sample has no output tokens or a token id outside [0, V).
 */
export function makeBatch(samples: readonly TrainingSample[], model: Pick<TrainableModel, 'blockSize' | 'padId' | 'vocabSize'>, oldLogprobs?: ReadonlyArray<number[] | null>, supports?: Supports): Batch {
  const rows = samples.map((s, b) => {
    if (s.outputTokenIds.length === 0) throw new RangeError(`sample ${s.sessionId}/${s.attempt}/${s.step} has no output tokens`);
    let seq = [...s.promptTokenIds, ...s.outputTokenIds];
    let promptLen = s.promptTokenIds.length;
    const cut = Math.max(0, seq.length - 1 - model.blockSize);
    seq = seq.slice(cut);
    promptLen = Math.max(0, promptLen - cut);
    for (const id of seq) if (!(Number.isInteger(id) && id >= 0 && id < model.vocabSize)) throw new RangeError(`token id ${id} outside [0, ${model.vocabSize})`);
    const firstOut = Math.max(0, promptLen - 1); // targets index j predicts seq[j+1]
    const lp = oldLogprobs?.[b] ?? s.oldLogprobs;
    return { seq, firstOut, lp, support: supports?.[b] ?? null };
  });
  const V = model.vocabSize;
  const T = Math.max(...rows.map((r) => r.seq.length - 1));
  const B = rows.length;
  const inputs = new Int32Array(B * T).fill(model.padId);
  const targets = new Int32Array(B * T).fill(model.padId);
  const mask = new Float32Array(B * T);
  const stored = new Float32Array(B * T);
  let tokens = 0;
  const outputPositions: Batch['outputPositions'] = [];
  const restricted = rows.some((r) => r.support?.some((x) => x !== null));
  const maskAdd = restricted ? new Float32Array(B * T * V) : null;
  rows.forEach((r, b) => {
    const n = r.seq.length - 1;
    tokens += n;
    for (let j = 0; j < n; j++) {
      inputs[b * T + j] = r.seq[j];
      targets[b * T + j] = r.seq[j + 1];
      if (j >= r.firstOut) mask[b * T + j] = 1;
    }
    const outLen = n - r.firstOut;
    outputPositions.push({ start: r.firstOut, length: outLen });
    if (r.lp) {
      const off = r.lp.length - outLen; // left-truncated outputs keep their last logprobs
      for (let k = 0; k < outLen; k++) stored[b * T + r.firstOut + k] = r.lp[off + k] ?? 0;
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
    storedLogprobs: tf.tensor2d(stored, [B, T]),
    advantages: tf.tensor1d(samples.map((s) => s.advantage)),
    tokens,
    padFrac: 1 - tokens / (B * T),
    outputPositions,
    temperatures: tf.tensor1d(samples.map((s) => effectiveBehaviour(s).temperature)),
    supportMask: maskAdd ? tf.tensor3d(maskAdd, [B, T, V]) : null,
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

function disposeBatch(b: Batch): void {
  tf.dispose([b.inputs, b.targets, b.mask, b.storedLogprobs, b.advantages, b.temperatures]);
  if (b.supportMask) b.supportMask.dispose();
}

/**
 * Mean return and pass@k of the rollouts behind `samples` (a minibatch): each distinct
 * (session, attempt) counts once in the mean of attempt returns; each distinct session once in
 * pass@k = share of sessions whose first success is at an attempt < k, k = 1..maxK.
 * @returns null when no sample carries an outcome.
 */
export function rolloutMetrics(samples: readonly TrainingSample[], maxK: number): { meanReturn: number; passAtK: Record<string, number> } | null {
  const attempts = new Map<string, number>();
  const sessions = new Map<string, number | null>();
  for (const s of samples) {
    if (!s.outcome) continue;
    attempts.set(`${s.sessionId}\u0000${s.attempt}`, s.outcome.attemptReturn);
    sessions.set(s.sessionId, s.outcome.firstSuccess);
  }
  if (sessions.size === 0) return null;
  const passAtK: Record<string, number> = {};
  for (let k = 1; k <= maxK; k++) passAtK[String(k)] = [...sessions.values()].filter((f) => f !== null && f < k).length / sessions.size;
  const rets = [...attempts.values()];
  return { meanReturn: rets.reduce((a, b) => a + b, 0) / rets.length, passAtK };
}

/** Deterministic Fisher-Yates shuffle (mulberry32). */
function shuffled(n: number, seed: number): number[] {
  let a = seed >>> 0;
  const rand = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const idx = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [idx[i], idx[j]] = [idx[j], idx[i]];
  }
  return idx;
}

/**
 * Minibatches of sample indices for one epoch, with little padding: shuffle, cut into windows of
 * 8 minibatches, sort each window by sequence length, cut into minibatches, shuffle their order.
 * Every index appears exactly once; there are ceil(n / mbSize) minibatches.
 */
export function lengthBucketedMinibatches(lengths: readonly number[], mbSize: number, seed: number): number[][] {
  const order = shuffled(lengths.length, seed);
  const window = mbSize * 8;
  const batches: number[][] = [];
  for (let w = 0; w < order.length; w += window) {
    const win = order.slice(w, w + window).sort((a, b) => lengths[b] - lengths[a]);
    for (let k = 0; k < win.length; k += mbSize) batches.push(win.slice(k, k + mbSize));
  }
  return shuffled(batches.length, seed ^ 0x9e3779b9).map((i) => batches[i]);
}

/**
 * Minibatches of one epoch: SFT groups similar lengths (less padding); RL uses plain shuffled
 * minibatches, because length buckets put the long reflection turns of LaMer together, and each
 * Adam step on such a bucket moves the reflections alone in the direction of their (group-centred,
 * but not batch-centred) advantages: measured on MineSweeper, output entropy rose 0.9 -> 1.4 in
 * three jobs. Micro-batches still sort by length inside a minibatch, so padding stays small.
 */
export function minibatchOrder(bucketed: boolean, lengths: readonly number[], mbSize: number, seed: number): number[][] {
  if (bucketed) return lengthBucketedMinibatches(lengths, mbSize, seed);
  const order = shuffled(lengths.length, seed);
  const out: number[][] = [];
  for (let k = 0; k < order.length; k += mbSize) out.push(order.slice(k, k + mbSize));
  return out;
}

/**
 * Split a minibatch into micro-batches whose padded size (count x longest length) stays within
 * `budget` positions; longest sequences first; every micro-batch has at least one sample.
 */
export function splitMicroBatches(idx: readonly number[], lengths: readonly number[], budget: number): number[][] {
  const sorted = [...idx].sort((a, b) => lengths[b] - lengths[a]);
  const out: number[][] = [];
  let cur: number[] = [];
  for (const i of sorted) {
    const longest = cur.length > 0 ? lengths[cur[0]] : lengths[i];
    if (cur.length > 0 && (cur.length + 1) * longest > budget) { out.push(cur); cur = []; }
    cur.push(i);
  }
  if (cur.length > 0) out.push(cur);
  return out;
}

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

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
        const outIds = s.outputTokenIds.slice(s.outputTokenIds.length - p.length);
        // the sampler's restriction: the candidates' trie, or the UTF-8 guard of free generations
        const allowedAll = (beh.candidates ? candidateSupport(beh.candidates, s.outputTokenIds) : utf8Support(s.outputTokenIds, V)).slice(s.outputTokenIds.length - p.length);
        const lps: number[] = [];
        const sup: Array<number[] | null> = [];
        for (let k = 0; k < p.length; k++) {
          const row = rows.subarray((b * T + p.start + k) * V, (b * T + p.start + k + 1) * V);
          const t = outIds[k];
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
 * Run one training job in this thread.
 * @param samples RL samples (with advantages and stored logprobs) or SFT samples.
 * @returns the new checkpoint folder and per-iteration metrics.
 * @throws JobCancelledError when `signal` aborts (no checkpoint is written); errors of model I/O.
 */
export async function runTrainingJob(spec: TrainingJobSpec, samples: readonly TrainingSample[], opts: RunOptions): Promise<JobResult> {
  const t0 = performance.now();
  const isSft = spec.algorithm === 'sft';
  const h = spec.hyper ?? {};
  const lr = h.lr ?? (isSft ? 1e-3 : 1e-4);
  const epochs = h.epochs ?? 1;
  const mbSize = h.minibatchSize ?? 16;
  const maxGradNorm = h.maxGradNorm ?? 1.0;
  const microTokens = h.microBatchTokens ?? 4096;
  if (samples.length === 0) throw new RangeError('no training samples (all groups skipped or no data)');
  if (!(epochs >= 1 && Number.isInteger(epochs))) throw new RangeError(`epochs must be an integer >= 1, got ${epochs}`);
  if (!(mbSize >= 1 && Number.isInteger(mbSize))) throw new RangeError(`minibatchSize must be an integer >= 1, got ${mbSize}`);
  const checkAbort = () => { if (opts.signal?.aborted) throw new JobCancelledError(); };
  checkAbort();

  const model = await opts.io.load(spec.baseCheckpointDir);
  const vars = model.trainableVariables();
  const optimizer = new AdamW(vars, { lr, weightDecay: h.weightDecay ?? 0.01 });
  try {
    // old logprobs: recomputed with the starting weights (verl), or as stored when sampling
    let oldLp: Array<number[] | null> = samples.map((s) => s.oldLogprobs);
    let behaviorLogprobGap: number | null = null;
    let supports: Supports | undefined;
    if (!isSft) {
      // the behaviour policy under the starting weights: its supports always, its logprobs as the
      // old logprobs unless the stored ones are asked for
      const beh = behaviourOutputs(model, samples, mbSize, microTokens);
      supports = beh.supports;
      const fresh = beh.logprobs;
      let gap = 0, n = 0;
      samples.forEach((s, i) => {
        const stored = s.oldLogprobs;
        if (!stored) return;
        const off = stored.length - fresh[i].length;
        fresh[i].forEach((x, k) => { gap += stored[off + k] - x; n++; });
      });
      behaviorLogprobGap = n > 0 ? gap / n : null;
      if ((h.oldLogprobs ?? 'recompute') === 'recompute') oldLp = fresh;
      await yieldToEventLoop();
      checkAbort();
    }
    if (!isSft && oldLp.some((x) => x === null)) throw new RangeError('RL samples need logprobs');

    const seqLens = samples.map((x) => Math.min(x.promptTokenIds.length + x.outputTokenIds.length - 1, model.blockSize));
    const perEpoch = Math.ceil(samples.length / mbSize);
    const total = perEpoch * epochs;
    const metrics: IterationMetrics[] = [];
    let iteration = 0;
    for (let epoch = 0; epoch < epochs; epoch++) {
      for (const idx of minibatchOrder(isSft, seqLens, mbSize, (h.seed ?? 0) + epoch)) {
        checkAbort();
        const tStep = performance.now();
        // gradient accumulation over micro-batches of at most microBatchTokens [B, T] positions;
        // each micro-batch's token-mean is weighted by its share of the minibatch's output tokens,
        // so the sum of their gradients is the gradient of the minibatch's token-mean loss.
        const micro = splitMicroBatches(idx, seqLens, microTokens).map((m) => makeBatch(m.map((i) => samples[i]), model, m.map((i) => oldLp[i]), supports && m.map((i) => supports![i])));
        const outTokens = micro.map((b) => b.outputPositions.reduce((a, p) => a + p.length, 0));
        const totalOut = outTokens.reduce((a, b) => a + b, 0);
        const s = [0, 0, 0, 0, 0, 0]; // loss, pgLoss, entropy, clipFrac, dualClipFrac, approxKl
        let acc: tf.Tensor[] | null = null;
        for (let k = 0; k < micro.length; k++) {
          const batch = micro[k];
          const w = outTokens[k] / totalOut;
          let stats: tf.Tensor1D | null = null;
          const { value, grads } = tf.variableGrads(() => {
            const logits = model.logits(batch.inputs, true);
            if (isSft) {
              const loss = sftLoss(logits, batch.targets, batch.mask);
              const ent = tokenMean(entropyFromLogits(logits), batch.mask);
              stats = tf.keep(tf.stack([loss, loss, ent, tf.scalar(0), tf.scalar(0), tf.scalar(0)]) as tf.Tensor1D);
              return tf.mul(loss, w) as tf.Scalar;
            }
            const o = ppoObjective(behaviourLogits(logits, batch), batch.targets, batch.storedLogprobs, batch.advantages, batch.mask, {
              clipCoef: h.clipCoef ?? 0.2, dualClip: h.dualClip ?? 3.0, entCoef: h.entCoef ?? 0.001,
            });
            stats = tf.keep(tf.stack([o.loss, o.pgLoss, o.entropy, o.clipFrac, o.dualClipFrac, o.approxKl]) as tf.Tensor1D);
            return tf.mul(o.loss, w) as tf.Scalar;
          }, vars);
          const gradList = vars.map((v) => grads[v.name]);
          const statVals = (stats as unknown as tf.Tensor1D).dataSync();
          for (let j = 0; j < 6; j++) s[j] += w * statVals[j];
          if (acc === null) acc = gradList;
          else {
            const prev: tf.Tensor[] = acc;
            acc = prev.map((a, i) => tf.add(a, gradList[i]));
            tf.dispose([...prev, ...gradList]);
          }
          tf.dispose([value, stats as unknown as tf.Tensor]);
        }
        const clipped = clipByGlobalNorm(acc!, maxGradNorm); // g <- g * min(1, max_norm / ||g||)
        optimizer.applyGradients(clipped.grads);
        tf.dispose([...acc!, ...clipped.grads]);
        micro.forEach(disposeBatch);
        const tokens = micro.reduce((a, b) => a + b.tokens, 0);
        const positions = micro.reduce((a, b) => a + b.tokens / (1 - b.padFrac || 1), 0);
        const seconds = (performance.now() - tStep) / 1000;
        // the rollouts this step trains on (not the whole job's data, which is the same every step)
        const own = rolloutMetrics(idx.map((i) => samples[i]), Math.max(1, Object.keys(spec.dataStats?.passAtK ?? {}).length, ...idx.map((i) => samples[i].attempt + 1)));
        const m: IterationMetrics = {
          iteration, epoch, loss: s[0], pgLoss: s[1], entropy: s[2], clipFrac: s[3], dualClipFrac: s[4], approxKl: s[5],
          gradNorm: clipped.norm, meanReturn: own?.meanReturn ?? spec.dataStats?.meanReturn ?? 0, passAtK: own?.passAtK ?? spec.dataStats?.passAtK ?? {},
          tokens, padFrac: 1 - tokens / positions, tokensPerSec: tokens / Math.max(seconds, 1e-9), seconds,
        };
        metrics.push(m);
        iteration++;
        opts.onProgress?.({ progress: iteration / total, iteration, totalIterations: total, metrics: m });
        await yieldToEventLoop(); // let cancel and messages through
      }
    }
    checkAbort();
    await opts.io.save(model, spec.outputDir, {
      ...spec.meta, algorithm: spec.algorithm, hyper: { ...h, lr, epochs, minibatchSize: mbSize }, dataStats: spec.dataStats ?? null,
      iterations: iteration, finalMetrics: metrics[metrics.length - 1] ?? null,
    });
    return { checkpointDir: spec.outputDir, iterations: iteration, samples: samples.length, metrics, behaviorLogprobGap, seconds: (performance.now() - t0) / 1000 };
  } finally {
    optimizer.dispose();
    model.dispose();
  }
}
