/**
 * The training job runner (docs/method.md#the-optimiser-step): load a checkpoint, run PPO epochs
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
 *
 * The pieces, in the order a job uses them: ../data/behaviour.ts (pi_old and the supports under the
 * starting weights), ../data/minibatches.ts (which samples each step trains on), ../data/batch.ts (samples as
 * tensors), ../maths/ppo.ts (one optimiser step: loss, gradient accumulation, clip, AdamW), ../maths/losses.ts
 * (the PPO and SFT equations), ./data-parallel.ts and ./parallel-step.ts (the same step split over
 * worker threads).
 */
import { availableParallelism } from 'node:os';
import * as tf from '@tensorflow/tfjs';
import { ConfigError, parseTrainWorkers } from '../../config/values.js';
import { passAtKRate } from '../../shared/passk.js';
import { POSITION_OFFSETS, type LrSchedule, type OldLogprobSource, type PositionOffset } from '../../domain.js';
import { makeBatch, disposeBatch, type Batch, type Supports } from '../data/batch.js';
import { recomputeOldLogprobs } from '../data/behaviour.js';
import { unpackSample, type Algorithm, type DataStats, type TrainingSample } from '../data/data.js';
import { AdamW, PPO_DEFAULTS } from '../maths/losses.js';
import { learningRateAt, validateLrSchedule } from '../maths/lr-schedule.js';
import { balanceShards, objectiveOf, ReplicaPool, type ObjectiveSpec } from './data-parallel.js';
import { parallelOldPolicy, parallelStep } from './parallel-step.js';
import { minibatchOrder, randomPositionOffsets, splitMicroBatches } from '../data/minibatches.js';
import type { ModelIO, TrainableModel } from '../model-api.js';
import { ppoUpdate, type StepLosses } from '../maths/ppo.js';

export interface TrainingHyper {
  /** Learning rate (the peak of a schedule). Default 1e-4 for RL, 1e-3 for SFT: sized for the small
   *  CPU models (CleanRL's ppo.py uses 2.5e-4 for small nets; LaMer's 1e-6 is for a 4B model). */
  lr?: number;
  /** 'constant' (default): `lr` at every step. 'cosine': linear warm-up over `warmupSteps`, then
   *  cosine decay to `lr x minLrRatio` at the job's last optimiser step (../maths/lr-schedule.ts). */
  lrSchedule?: LrSchedule;
  /** Warm-up steps of the 'cosine' schedule (default 0). */
  warmupSteps?: number;
  /** Final learning rate of the 'cosine' schedule as a fraction of `lr` (default 0.1). */
  minLrRatio?: number;
  /** Passes over the samples (LaMer CODE: 1 PPO epoch). Default 1. */
  epochs?: number;
  /** Turns per optimiser step: samples, a packed RL sample counting as its turns (`packedTurns`),
   *  so that packing changes the cost of a step and not the number of steps. Default 16. */
  minibatchSize?: number;
  /** Train packed RL samples packed (default true). false: each is trained as the per-step samples
   *  of its turns (`unpackSample`, src/training/data/data.ts), as is a packed sample longer than the
   *  model's block in any case. (Whether samples are packed at all is `RlDataOptions.pack` /
   *  `SftDataOptions.pack`; the manager sets both from this, the API's `hyperparameters.pack`.) */
  pack?: boolean;
  clipCoef?: number;
  dualClip?: number;
  entCoef?: number;
  maxGradNorm?: number;
  weightDecay?: number;
  /** 'recompute' (default): old logprobs from the loaded checkpoint before any update (verl);
   *  'stored': the logprobs recorded when sampling. */
  oldLogprobs?: OldLogprobSource;
  /** Memory cap: a minibatch is run as micro-batches of at most this many [B, T] positions (at
   *  least one sample each) with gradient accumulation; the update is the same. Default 4096 (8192
   *  ran the wasm heap out of memory at 1000-token prompts on the 0.56M base model). */
  microBatchTokens?: number;
  /** Seed of the minibatch shuffle and of the random position offsets. */
  seed?: number;
  /** SFT only. 'random': in epoch e each sample starts at a random position drawn with seed
   *  `seed + e` (../data/minibatches.ts randomPositionOffsets), so a learned position embedding cannot
   *  tie a format to an absolute position of fixed-layout prompts. 'none' (default): position 0, as
   *  served. RL refuses 'random': the sampler served at offset 0, so pi_old is the offset-0 policy;
   *  PPO at other offsets would start from ratios != 1, or, with pi_old recomputed there, clip and
   *  move a policy the server never runs. */
  positionOffset?: PositionOffset;
  /** CPU workers (data parallelism over worker threads, ./data-parallel.ts): each optimiser step's
   *  minibatch is split across this many model replicas. 1 trains in this thread alone. Default:
   *  env LAMER_TRAIN_WORKERS, else every core (os.availableParallelism()) on the wasm and cpu
   *  backends and 1 on the multi-threaded ones; never more than minibatchSize, and 1 when the
   *  model I/O has no `replica` module. */
  workers?: number;
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

/** One optimiser step's metrics: its losses by name (definitions in ../maths/ppo.ts) and more. */
export interface IterationMetrics extends StepLosses {
  iteration: number;
  epoch: number;
  /** Learning rate this step's update used (the schedule's value). */
  lr: number;
  /** Global L2 norm of the minibatch's gradient before clipping. */
  gradNorm: number;
  /** Mean undiscounted return of the attempts this minibatch has samples of (its own rollouts;
   *  the data's mean when samples carry no outcome). */
  meanReturn: number;
  /** pass@k of the sessions this minibatch has samples of, k = 1..the data's attempts (the data's
   *  pass@k when samples carry no outcome). */
  passAtK: Record<string, number>;
  /** Entropy (as `entropy`) over the step's action tokens alone; null when it trained none. */
  actionEntropy: number | null;
  /** Entropy (as `entropy`) over the step's reflection tokens alone; null when it trained none. */
  reflectionEntropy: number | null;
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

/**
 * Mean return and pass@k of the rollouts behind `samples` (a minibatch): each distinct
 * (session, attempt) counts once in the mean of attempt returns; each distinct session once in
 * pass@k = share of sessions whose first success is at an attempt < k, k = 1..maxK (docs/method.md#metrics).
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
  // each session's attempts up to its first success (none: no success), for src/shared/passk.ts
  const ordered = [...sessions.values()].map((f) => (f === null ? [] : Array.from({ length: f + 1 }, (_, n) => ({ success: n === f }))));
  const passAtK = passAtKRate(ordered, maxK);
  const rets = [...attempts.values()];
  return { meanReturn: rets.reduce((a, b) => a + b, 0) / rets.length, passAtK };
}

/**
 * Attention cells (`[T, T]` map entries over all layers and heads) one micro-batch may hold:
 * 2^25. Training keeps several float32 copies of each map for the backward pass, and the wasm
 * backend's heap faults ("memory access out of bounds") past about 2 GB: measured on this code,
 * 4 layers x 4 heads at 4096 tokens of T = 1024 (2^26 cells) fault, 2 x 4 at the same size and
 * 4 x 4 at 2048 tokens (2^25 cells) train.
 */
export const ATTENTION_CELLS_PER_MICRO_BATCH = 2 ** 25;

/**
 * The micro-batch size (padded `[B, T]` positions) a job uses: `requested`, lowered so that
 * B x T x T x `attentionMaps` <= ATTENTION_CELLS_PER_MICRO_BATCH for sequences of `maxSeqLen`
 * tokens, and never below one sequence. Unchanged when the model reports no attention maps.
 * Example: (4096, 16 maps, T 1024) -> 2048; (4096, 8, 1024) -> 4096; (4096, 64, 1024) -> 1024.
 */
export function fitMicroBatchTokens(requested: number, attentionMaps: number | undefined, maxSeqLen: number): number {
  if (!attentionMaps || attentionMaps <= 0 || maxSeqLen <= 0) return requested;
  const sequences = Math.max(1, Math.floor(ATTENTION_CELLS_PER_MICRO_BATCH / (attentionMaps * maxSeqLen * maxSeqLen)));
  return Math.max(maxSeqLen, Math.min(requested, sequences * maxSeqLen));
}

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * The job's rule for `TrainingHyper.positionOffset`, checked here once (the job runner and the
 * training route both ask it): one of POSITION_OFFSETS (src/domain.ts) or absent, and 'random'
 * only for 'sft' (RL trains at the positions the sampler served; see `TrainingHyper`).
 * @returns null when the value is allowed, else the reason it is not.
 */
export function positionOffsetProblem(algorithm: Algorithm, positionOffset: unknown): string | null {
  if (positionOffset === undefined) return null;
  if (!(POSITION_OFFSETS as readonly unknown[]).includes(positionOffset)) return `positionOffset must be 'none' or 'random', got ${JSON.stringify(positionOffset)}`;
  if (positionOffset === 'random' && algorithm !== 'sft') return `positionOffset 'random' is for sft jobs only (${algorithm} trains at the positions the sampler served)`;
  return null;
}

/** The hyperparameters with their defaults applied (see `TrainingHyper`). */
function withDefaults(algorithm: Algorithm, h: TrainingHyper) {
  const isSft = algorithm === 'sft';
  return {
    isSft,
    lr: h.lr ?? (isSft ? 1e-3 : 1e-4),
    lrSchedule: h.lrSchedule ?? 'constant',
    warmupSteps: h.warmupSteps ?? 0,
    minLrRatio: h.minLrRatio ?? 0.1,
    epochs: h.epochs ?? 1,
    minibatchSize: h.minibatchSize ?? 16,
    maxGradNorm: h.maxGradNorm ?? 1.0,
    microBatchTokens: h.microBatchTokens ?? 4096,
    weightDecay: h.weightDecay ?? 0.01,
    oldLogprobs: h.oldLogprobs ?? 'recompute',
    ppo: { clipCoef: h.clipCoef ?? PPO_DEFAULTS.clipCoef, dualClip: h.dualClip ?? PPO_DEFAULTS.dualClip, entCoef: h.entCoef ?? PPO_DEFAULTS.entCoef },
    seed: h.seed ?? 0,
    pack: h.pack ?? true,
    positionOffset: h.positionOffset ?? 'none',
  };
}

/**
 * The samples a job trains: packed RL samples (`packedTurns`) whose sequence does not fit the
 * model's block (prompt + output > blockSize + 1 tokens: makeBatch would cut their first turns
 * from the left), and all of them when `pack` is false, are replaced by their turns' per-step
 * samples (`unpackSample`); the others are kept as given.
 */
export function fitPacked(samples: readonly TrainingSample[], blockSize: number, pack: boolean): TrainingSample[] {
  return samples.flatMap((s) => (s.packedTurns && (!pack || s.promptTokenIds.length + s.outputTokenIds.length > blockSize + 1) ? unpackSample(s) : [s]));
}

/**
 * Re-cut an epoch's minibatches (sample indices, in order) so that each holds about `size` turns
 * (`turns[i]` of sample i; a packed RL sample has several): samples in the same order, a new
 * minibatch once `size` turns are reached. Unchanged when every sample is one turn.
 */
export function byTurns(minibatches: readonly number[][], turns: readonly number[], size: number): number[][] {
  if (turns.every((n) => n === 1)) return minibatches.map((m) => [...m]);
  const out: number[][] = [];
  let cur: number[] = [];
  let n = 0;
  for (const i of minibatches.flat()) {
    cur.push(i);
    n += turns[i];
    if (n >= size) { out.push(cur); cur = []; n = 0; }
  }
  if (cur.length > 0) out.push(cur);
  return out;
}

/**
 * LAMER_TRAIN_WORKERS: training worker threads per job (1..256), or unset / '' / 0 for every core.
 * @returns the count, or null for every core.
 * @throws RangeError for any other value.
 */
export function trainWorkersFromEnv(env: Record<string, string | undefined> = process.env): number | null {
  let n: number;
  try {
    n = parseTrainWorkers(env); // the one parser of LAMER_TRAIN_WORKERS (src/config/values.ts)
  } catch (err) {
    throw err instanceof ConfigError ? new RangeError(err.message) : err;
  }
  return n === 0 ? null : n;
}

/**
 * Workers of a job: `hyper.workers`, else LAMER_TRAIN_WORKERS, else every core on the
 * single-threaded backends (wasm, cpu: a job is the heaviest CPU work of the process, and it
 * yields between steps so the server's thread keeps answering) and 1 on the others (tensorflow
 * already uses every core, webgpu the GPU); at most `minibatchSize`. 1 when `io` has no replica
 * module, unless asked for explicitly in `hyper.workers` (then a RangeError). Uses the backend
 * active in this thread (tf.getBackend()).
 * @throws RangeError for `asked` not an integer >= 1, or > 1 without `io.replica`; a bad LAMER_TRAIN_WORKERS.
 */
export function resolveTrainWorkers(asked: number | undefined, io: Pick<ModelIO, 'replica'>, minibatchSize: number): number {
  if (asked !== undefined && !(Number.isInteger(asked) && asked >= 1)) throw new RangeError(`workers must be an integer >= 1, got ${asked}`);
  const allCores = ['wasm', 'cpu'].includes(tf.getBackend()) ? availableParallelism() : 1;
  const n = Math.min(asked ?? trainWorkersFromEnv() ?? allCores, minibatchSize);
  if (n <= 1) return 1;
  if (!io.replica) {
    if (asked !== undefined) throw new RangeError('workers > 1 needs a model I/O that worker threads can make (ModelIO.replica)');
    return 1;
  }
  return n;
}

/**
 * Run one training job from this thread: PPO (RL algorithms) or SFT epochs over minibatches, one
 * optimiser step per minibatch (CleanRL ppo.py's update loop; docs/method.md#the-optimiser-step). With `hyper.workers`
 * > 1 this thread coordinates workers - 1 replica threads (./data-parallel.ts), which it ends
 * before returning or throwing.
 * @param samples RL samples (with advantages and the sampler's logprobs) or SFT samples.
 * @returns the new checkpoint folder and per-iteration metrics.
 * @throws RangeError for no samples, bad epochs / minibatchSize / workers / learning-rate schedule
 *   (../maths/lr-schedule.ts validateLrSchedule) / positionOffset ('random'
 *   on an RL job), or RL samples without logprobs; JobCancelledError when `signal` aborts (no
 *   checkpoint is written); ReplicaError (./data-parallel.ts) when a replica thread fails or exits;
 *   errors of model I/O.
 */
export async function runTrainingJob(spec: TrainingJobSpec, given: readonly TrainingSample[], opts: RunOptions): Promise<JobResult> {
  const t0 = performance.now();
  const h = withDefaults(spec.algorithm, spec.hyper ?? {});
  if (given.length === 0) throw new RangeError('no training samples (no data)');
  if (!(h.epochs >= 1 && Number.isInteger(h.epochs))) throw new RangeError(`epochs must be an integer >= 1, got ${h.epochs}`);
  if (!(h.minibatchSize >= 1 && Number.isInteger(h.minibatchSize))) throw new RangeError(`minibatchSize must be an integer >= 1, got ${h.minibatchSize}`);
  const offsetProblem = positionOffsetProblem(spec.algorithm, h.positionOffset);
  if (offsetProblem !== null) throw new RangeError(offsetProblem);
  const checkAbort = () => { if (opts.signal?.aborted) throw new JobCancelledError(); };
  checkAbort();

  const workers = resolveTrainWorkers(spec.hyper?.workers, opts.io, h.minibatchSize);
  const model = await opts.io.load(spec.baseCheckpointDir);
  const samples = fitPacked(given, model.blockSize, h.pack);
  const optimizer = new AdamW(model.trainableVariables(), { lr: h.lr, weightDecay: h.weightDecay });
  let pool: ReplicaPool | null = null;
  try {
    const objectiveSpec: ObjectiveSpec = h.isSft ? { kind: 'sft' } : { kind: 'ppo', coef: h.ppo };
    const objective = objectiveOf(objectiveSpec); // loss = pg_loss - ent_coef * entropy (docs/method.md#the-ppo-loss)
    const seqLens = samples.map((x) => Math.min(x.promptTokenIds.length + x.outputTokenIds.length - 1, model.blockSize));
    h.microBatchTokens = fitMicroBatchTokens(h.microBatchTokens, model.attentionMaps, seqLens.reduce((a, b) => Math.max(a, b), 0));
    if (workers > 1) {
      pool = await ReplicaPool.start(workers - 1, {
        modelIO: opts.io.replica!, checkpointDir: spec.baseCheckpointDir, objective: objectiveSpec, samples,
        microBatchTokens: h.microBatchTokens, behaviourBatchSize: h.minibatchSize,
      }, optimizer.variables);
      checkAbort();
    }
    // pi_old: the behaviour policy under the starting weights (docs/method.md#the-behaviour-policy), so the first ratio is 1
    const old = h.isSft ? null
      : pool ? await parallelOldPolicy(pool, model, samples, seqLens, h)
      : recomputeOldLogprobs(model, samples, h.oldLogprobs, h.minibatchSize, h.microBatchTokens);
    if (old) {
      await yieldToEventLoop();
      checkAbort();
      if (old.oldLogprobs.some((x) => x === null)) throw new RangeError('RL samples need logprobs');
      await pool?.setPolicy(old);
    }
    const turns = samples.map((x) => x.packedTurns?.length ?? 1);
    const epochs = Array.from({ length: h.epochs }, (_, epoch) => byTurns(minibatchOrder(h.isSft, seqLens, h.minibatchSize, h.seed + epoch), turns, h.minibatchSize));
    const offsetsOf = (epoch: number) => (h.positionOffset === 'random' ? randomPositionOffsets(seqLens, model.blockSize, h.seed + epoch) : null);
    const total = epochs.reduce((a, e) => a + e.length, 0);
    const schedule = { lr: h.lr, schedule: h.lrSchedule, warmupSteps: h.warmupSteps, minLrRatio: h.minLrRatio };
    validateLrSchedule(schedule, total);
    const metrics: IterationMetrics[] = [];
    for (let epoch = 0; epoch < h.epochs; epoch++) {
      const offsets = offsetsOf(epoch); // per sample index, this epoch's
      for (const idx of epochs[epoch]) {
        checkAbort();
        const tStep = performance.now();
        optimizer.lr = learningRateAt(schedule, metrics.length, total);
        let update: StepLosses & { gradNorm: number };
        let sizes: { tokens: number; positions: number };
        if (pool) {
          ({ update, sizes } = await parallelStep(pool, model, optimizer, objective, samples, balanceShards(idx, seqLens, workers), seqLens, h, old, offsets));
        } else {
          const micro = microBatches(model, samples, idx, seqLens, h.microBatchTokens, old?.oldLogprobs, old?.supports, offsets);
          update = ppoUpdate(model, optimizer, micro, objective, h.maxGradNorm);
          sizes = microSizes(micro);
          micro.forEach(disposeBatch);
        }
        const m = iterationMetrics(spec, samples, idx, sizes, update, { iteration: metrics.length, epoch, lr: optimizer.lr, seconds: (performance.now() - tStep) / 1000 });
        metrics.push(m);
        opts.onProgress?.({ progress: metrics.length / total, iteration: metrics.length, totalIterations: total, metrics: m });
        await yieldToEventLoop(); // let cancel and messages through
      }
    }
    checkAbort();
    await opts.io.save(model, spec.outputDir, {
      ...spec.meta, algorithm: spec.algorithm, hyper: { ...spec.hyper, lr: h.lr, lrSchedule: h.lrSchedule, ...(h.lrSchedule === 'cosine' ? { warmupSteps: h.warmupSteps, minLrRatio: h.minLrRatio } : {}), epochs: h.epochs, minibatchSize: h.minibatchSize, positionOffset: h.positionOffset }, dataStats: spec.dataStats ?? null,
      iterations: metrics.length, finalMetrics: metrics[metrics.length - 1] ?? null,
    });
    return { checkpointDir: spec.outputDir, iterations: metrics.length, samples: samples.length, metrics, behaviorLogprobGap: old?.behaviorLogprobGap ?? null, seconds: (performance.now() - t0) / 1000 };
  } finally {
    await pool?.close();
    optimizer.dispose();
    model.dispose();
  }
}

/** Non-padding and padded positions of micro-batches. */
function microSizes(micro: readonly Batch[]): { tokens: number; positions: number } {
  return { tokens: micro.reduce((a, b) => a + b.tokens, 0), positions: micro.reduce((a, b) => a + b.tokens / (1 - b.padFrac || 1), 0) };
}

/**
 * The minibatch `idx` as micro-batches of at most `budget` padded [B, T] positions (memory cap;
 * `splitMicroBatches`), each with its samples' old logprobs, supports and position offsets.
 */
function microBatches(
  model: TrainableModel, samples: readonly TrainingSample[], idx: readonly number[], seqLens: readonly number[], budget: number,
  oldLogprobs: ReadonlyArray<number[] | null> | undefined, supports: Supports | undefined, offsets: readonly number[] | null,
): Batch[] {
  return splitMicroBatches(idx, seqLens, budget).map((m) => makeBatch(
    m.map((i) => samples[i]), model, oldLogprobs && m.map((i) => oldLogprobs[i]), supports && m.map((i) => supports[i]), offsets ? m.map((i) => offsets[i]) : undefined,
  ));
}

/** One iteration's metrics: the step's losses, its tokens and speed, and its own rollouts' returns. */
function iterationMetrics(
  spec: TrainingJobSpec, samples: readonly TrainingSample[], idx: readonly number[], sizes: { tokens: number; positions: number },
  update: StepLosses & { gradNorm: number }, at: { iteration: number; epoch: number; lr: number; seconds: number },
): IterationMetrics {
  const { tokens, positions } = sizes;
  // the rollouts this step trains on (not the whole job's data, which is the same every step)
  const own = rolloutMetrics(idx.map((i) => samples[i]), Math.max(1, Object.keys(spec.dataStats?.passAtK ?? {}).length, ...idx.map((i) => samples[i].attempt + 1)));
  const { loss, pgLoss, entropy, clipFrac, dualClipFrac, approxKl, gradNorm, reflectionShare, reflectionEntropyShare } = update;
  return {
    iteration: at.iteration, epoch: at.epoch, lr: at.lr, loss, pgLoss, entropy, clipFrac, dualClipFrac, approxKl, gradNorm,
    reflectionShare, reflectionEntropyShare, ...entropyByKind(entropy, reflectionShare, reflectionEntropyShare),
    meanReturn: own?.meanReturn ?? spec.dataStats?.meanReturn ?? 0, passAtK: own?.passAtK ?? spec.dataStats?.passAtK ?? {},
    tokens, padFrac: 1 - tokens / positions, tokensPerSec: tokens / Math.max(at.seconds, 1e-9), seconds: at.seconds,
  };
}

/**
 * A step's entropy split into its action and reflection tokens (../maths/losses.ts reflectionSplit):
 * reflection = reflectionEntropyShare / reflectionShare, action = (entropy - reflectionEntropyShare)
 * / (1 - reflectionShare); null for a kind the step trained no token of (share within 1e-6 of 0 or 1:
 * the shares are float32 token-means).
 */
export function entropyByKind(entropy: number, reflectionShare: number, reflectionEntropyShare: number): { actionEntropy: number | null; reflectionEntropy: number | null } {
  const eps = 1e-6;
  return {
    actionEntropy: reflectionShare < 1 - eps ? (entropy - reflectionEntropyShare) / (1 - reflectionShare) : null,
    reflectionEntropy: reflectionShare > eps ? reflectionEntropyShare / reflectionShare : null,
  };
}
