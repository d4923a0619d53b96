/**
 * Data-parallel training over worker threads: N workers each hold a copy of the model (own tfjs
 * backend, loaded from the job's starting checkpoint); every optimiser step's minibatch is cut
 * into N shards balanced by token count, each worker computes the gradient of its shard's
 * token-SUM loss, and the coordinator (the thread running the job, which computes shard 0
 * itself) adds them up and divides by the minibatch's output-token count. That is the gradient of
 * the minibatch's token-mean loss (src/training/maths/losses.ts tokenMean), the same as one worker's up
 * to float rounding. The coordinator alone clips, applies AdamW and writes the new weights into a
 * SharedArrayBuffer that the replicas copy into their variables before their next shard.
 *
 * Why the coordinator updates and broadcasts weights rather than every replica applying the same
 * AdamW step: both move one model-sized Float32Array each way per step, but a broadcast keeps one
 * optimiser state (no AdamW moments in the replicas, nothing that can drift) and the replicas'
 * weight copy (an assign per variable) costs less than an AdamW step.
 *
 * PPO's pi_old pass (the behaviour policy of every sample under the starting weights) is split the
 * same way: each worker computes a share of the samples, the coordinator merges them and gives
 * every replica the whole pi_old.
 *
 * Messages: parent -> replica `init` (model I/O module, checkpoint, objective, the job's samples,
 * weight buffer), `behaviour` (its share of the pi_old pass), `policy` (the merged pi_old), then
 * `step` (sample indices of its shard, with their position offsets when the job draws them);
 * replica -> parent `ready`, `behaviour`, `ok`, `grads` (a transferred Float32Array, all trainable
 * variables concatenated in `trainableVariables()` order) or `error`.
 */
import * as tf from '@tensorflow/tfjs';
import type { Worker } from 'node:worker_threads';
import { spawnEntry, WorkerChannel } from '../../shared/worker-channel.js';
import { makeBatch, disposeBatch, type Supports } from '../data/batch.js';
import type { TrainingSample } from '../data/data.js';
import { splitMicroBatches } from '../data/minibatches.js';
import type { ModelIOModule, TrainableModel } from '../model-api.js';
import { accumulateGradients, outputTokens, ppoLoss, sftObjective, type Objective, type PpoCoefficients, type StepLosses } from '../maths/ppo.js';

/** The losses in the order they travel between threads. */
export const LOSS_KEYS = ['loss', 'pgLoss', 'entropy', 'clipFrac', 'dualClipFrac', 'approxKl', 'reflectionShare', 'reflectionEntropyShare'] as const;

/** Which objective the replicas use (an Objective is a function and cannot cross threads). */
export type ObjectiveSpec = { kind: 'sft' } | { kind: 'ppo'; coef: PpoCoefficients };

/** The Objective of a spec (../maths/ppo.ts). */
export function objectiveOf(spec: ObjectiveSpec): Objective {
  return spec.kind === 'sft' ? sftObjective : ppoLoss(spec.coef);
}

/** What a replica gets once. */
export interface ReplicaInit {
  modelIO: ModelIOModule;
  checkpointDir: string;
  objective: ObjectiveSpec;
  samples: readonly TrainingSample[];
  /** Cap of padded [B, T] positions per micro-batch (`TrainingHyper.microBatchTokens`). */
  microBatchTokens: number;
  /** Samples per forward pass of the pi_old computation (the job's minibatchSize). */
  behaviourBatchSize: number;
  /** Float32 weights, all trainable variables concatenated; written by the coordinator. */
  weights: SharedArrayBuffer;
}

/** pi_old of a PPO job: per sample, its old logprobs and sampler support (../data/behaviour.ts). */
export interface ReplicaPolicy {
  oldLogprobs: ReadonlyArray<number[] | null>;
  supports: Supports;
}

export type ToReplica =
  | ({ type: 'init' } & ReplicaInit)
  | { type: 'behaviour'; idx: number[] }
  | ({ type: 'policy' } & ReplicaPolicy)
  | { type: 'step'; idx: number[]; syncWeights: boolean; positionOffsets: number[] | null };
export type FromReplica =
  | { type: 'ready'; params: number }
  | { type: 'behaviour'; logprobs: number[][]; supports: Array<Array<number[] | null> | null> }
  | { type: 'ok' }
  | { type: 'grads'; grads: Float32Array; outTokens: number; tokens: number; positions: number; losses: number[] }
  | { type: 'error'; name: string; message: string; stack?: string };

/** One shard's share of a step: gradient of its token-sum loss and the sums behind the metrics. */
export interface ShardSums {
  /** Output tokens (the mask's count): the denominator of the token-means. */
  outTokens: number;
  /** Non-padding positions. */
  tokens: number;
  /** Padded [B, T] positions. */
  positions: number;
  /** Each loss times its micro-batch's output tokens, summed (divide by the step's outTokens). */
  losses: StepLosses;
}

/**
 * The gradient of a shard's token-sum loss: sum over its micro-batches of outTokens_k *
 * grad(token-mean loss_k), one tensor per `vars[i]` (the caller disposes them), and its sums.
 * Micro-batches as the job's (`splitMicroBatches` within `microBatchTokens`). `oldLogprobs`,
 * `supports` and `positionOffsets` (the epoch's random position offsets, ../data/minibatches.ts) are
 * indexed by sample index, like `samples`.
 */
export function shardGradients(
  model: TrainableModel, vars: tf.Variable[], objective: Objective, samples: readonly TrainingSample[], idx: readonly number[],
  seqLens: readonly number[], microBatchTokens: number, oldLogprobs: ReadonlyArray<number[] | null> | null | undefined, supports: Supports | null | undefined,
  positionOffsets?: ArrayLike<number> | null,
): { grads: tf.Tensor[] } & ShardSums {
  const micro = splitMicroBatches(idx, seqLens, microBatchTokens).map((m) => makeBatch(
    m.map((i) => samples[i]), model, oldLogprobs ? m.map((i) => oldLogprobs[i]) : undefined, supports ? m.map((i) => supports[i]) : undefined,
    positionOffsets ? m.map((i) => positionOffsets[i]) : undefined,
  ));
  try {
    const outs = micro.map(outputTokens);
    const { grads, losses } = accumulateGradients(model, vars, micro, outs, objective); // token-sum: weight = output tokens
    return {
      grads, losses, outTokens: outs.reduce((a, b) => a + b, 0),
      tokens: micro.reduce((a, b) => a + b.tokens, 0),
      positions: micro.reduce((a, b) => a + b.tokens / (1 - b.padFrac || 1), 0),
    };
  } finally {
    micro.forEach(disposeBatch);
  }
}

/**
 * Cut a minibatch into at most `n` non-empty shards of about equal token count (longest first,
 * each to the lightest shard so far: LPT scheduling).
 */
export function balanceShards(idx: readonly number[], seqLens: readonly number[], n: number): number[][] {
  const k = Math.max(1, Math.min(n, idx.length));
  const shards: number[][] = Array.from({ length: k }, () => []);
  const load = new Array<number>(k).fill(0);
  for (const i of [...idx].sort((a, b) => seqLens[b] - seqLens[a] || a - b)) {
    let best = 0;
    for (let s = 1; s < k; s++) if (load[s] < load[best]) best = s;
    shards[best].push(i);
    load[best] += seqLens[i];
  }
  return shards;
}

/** Total element count of `vars`. */
export const paramCount = (vars: readonly tf.Variable[]): number => vars.reduce((a, v) => a + v.size, 0);

/** Copy `vars` into `out` (concatenated, in order). */
export function readWeights(vars: readonly tf.Variable[], out: Float32Array): void {
  let off = 0;
  for (const v of vars) {
    out.set(v.dataSync() as Float32Array, off);
    off += v.size;
  }
}

/** Assign `vars` from `flat` (concatenated, in order; copied, so `flat` may be changed later). */
export function writeWeights(vars: readonly tf.Variable[], flat: Float32Array): void {
  let off = 0;
  for (const v of vars) {
    const t = tf.tensor(flat.slice(off, off + v.size), v.shape, 'float32');
    v.assign(t);
    t.dispose();
    off += v.size;
  }
}

let live = 0;
/** Replica threads started and not yet exited (for tests: none may outlive their job). */
export function liveReplicaThreads(): number { return live; }

function spawnReplica(): Worker {
  const w = spawnEntry('./replica-entry', import.meta.url);
  live++;
  w.once('exit', () => { live--; });
  return w;
}

/** A failed replica (crash, exit, or an error it reported). */
export class ReplicaError extends Error {
  constructor(message: string, options?: { cause?: unknown }) { super(message, options); this.name = 'ReplicaError'; }
}

/** One replica thread (`index` >= 1) with a one-request-at-a-time channel; `stale` until it has the newest weights. */
class Replica extends WorkerChannel<ToReplica, FromReplica> {
  stale = true;
  constructor(worker: Worker, readonly index: number) {
    super(worker, {
      reported: (m) => new ReplicaError(`training replica ${index}: ${m.name}: ${m.message}`),
      crashed: (err) => new ReplicaError(`training replica ${index} crashed: ${err.message}`, { cause: err }),
      exited: (code) => new ReplicaError(`training replica ${index} exited with code ${code}`),
    });
  }
}

/**
 * The replica threads of one job (workers 1..n-1; the coordinator is worker 0).
 * Always `close()` it (a finally): it terminates every thread.
 */
export class ReplicaPool {
  private readonly weights: Float32Array;
  private constructor(private readonly replicas: Replica[], buffer: SharedArrayBuffer) {
    this.weights = new Float32Array(buffer);
  }

  /**
   * Start `count` replica threads, each loading `init.checkpointDir` with `init.modelIO`, and wait
   * until all are ready. The weight buffer is filled from `vars` (the coordinator's weights).
   * @throws ReplicaError when a replica fails to start or its model has another parameter count
   *   (the threads are terminated first).
   */
  static async start(count: number, init: Omit<ReplicaInit, 'weights'>, vars: readonly tf.Variable[]): Promise<ReplicaPool> {
    const n = paramCount(vars);
    const buffer = new SharedArrayBuffer(n * 4);
    const pool = new ReplicaPool(Array.from({ length: count }, (_, k) => new Replica(spawnReplica(), k + 1)), buffer);
    readWeights(vars, pool.weights);
    try {
      const ready = await Promise.all(pool.replicas.map((r) => r.request({ type: 'init', ...init, weights: buffer })));
      for (const m of ready) {
        if (m.type !== 'ready' || m.params !== n) throw new ReplicaError(`training replica loaded ${m.type === 'ready' ? m.params : '?'} parameters, the coordinator has ${n}`);
      }
      return pool;
    } catch (err) {
      await pool.close();
      throw err;
    }
  }

  /** Number of replica threads. */
  get size(): number { return this.replicas.length; }

  /**
   * The behaviour outputs (`behaviourOutputs` of ../data/behaviour.ts under the starting weights) of the
   * samples `parts[k]`, computed by replica k (k < size), in part order.
   * @throws ReplicaError when a replica fails.
   */
  behaviour(parts: readonly number[][]): Promise<Array<{ logprobs: number[][]; supports: Array<Array<number[] | null> | null> }>> {
    return Promise.all(parts.map(async (idx, k) => {
      const m = await this.replicas[k].request({ type: 'behaviour', idx: [...idx] });
      if (m.type !== 'behaviour') throw new ReplicaError(`training replica ${k + 1} answered ${m.type} to a behaviour request`);
      return { logprobs: m.logprobs, supports: m.supports };
    }));
  }

  /** Give every replica the job's pi_old (PPO); resolves when all have it. */
  async setPolicy(policy: ReplicaPolicy): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.request({ type: 'policy', oldLogprobs: policy.oldLogprobs, supports: policy.supports })));
  }

  /**
   * Send shard `k` to replica k-1 (k >= 1; at most `size` shards), with the newest weights when it
   * has not seen them and the position offsets of its samples (`positionOffsets`, by sample index,
   * or null); resolves with their sums and flat gradients, in shard order.
   * @throws ReplicaError when a replica fails.
   */
  computeShards(shards: readonly number[][], positionOffsets: readonly number[] | null = null): Promise<Array<ShardSums & { grads: Float32Array }>> {
    return Promise.all(shards.map(async (idx, k) => {
      const r = this.replicas[k];
      const m = await r.request({ type: 'step', idx: [...idx], syncWeights: r.stale, positionOffsets: positionOffsets && idx.map((i) => positionOffsets[i]) });
      r.stale = false;
      if (m.type !== 'grads') throw new ReplicaError(`training replica ${r.index} answered ${m.type} to a step`);
      const losses = Object.fromEntries(LOSS_KEYS.map((key, j) => [key, m.losses[j]])) as unknown as StepLosses;
      return { grads: m.grads, outTokens: m.outTokens, tokens: m.tokens, positions: m.positions, losses };
    }));
  }

  /** Publish the coordinator's weights after an update (replicas copy them before their next shard). */
  publish(vars: readonly tf.Variable[]): void {
    readWeights(vars, this.weights);
    for (const r of this.replicas) r.stale = true;
  }

  /** Terminate every replica thread and wait for them to exit. */
  async close(): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.close()));
  }
}

/**
 * Sum the coordinator's shard gradient (tensors, token-sum) and the replicas' (flat Float32Arrays)
 * and scale by `1 / outTokens`: the minibatch's token-mean gradient, one tensor per `vars[i]`
 * (the caller disposes them). Does not dispose `own`.
 */
export function combineGradients(vars: readonly tf.Variable[], own: readonly tf.Tensor[], others: readonly Float32Array[], outTokens: number): tf.Tensor[] {
  let off = 0;
  return vars.map((v, i) => {
    const at = off;
    off += v.size;
    return tf.tidy(() => {
      const parts = [own[i], ...others.map((g) => tf.tensor(g.subarray(at, at + v.size), v.shape, 'float32'))];
      return tf.mul(parts.length === 1 ? parts[0] : tf.addN(parts), 1 / outTokens); // g = (sum_s g_s) / N_out
    });
  });
}
