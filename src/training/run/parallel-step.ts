/**
 * The data-parallel pieces of a training job (./job.ts runTrainingJob with workers > 1): one
 * optimiser step and pi_old, each split between this thread and the replica threads of a
 * `ReplicaPool` (./data-parallel.ts). Same maths as the one-thread path (../maths/ppo.ts ppoUpdate,
 * ../data/behaviour.ts recomputeOldLogprobs): gradients are token-sums added over shards and divided by
 * the minibatch's output tokens.
 */
import * as tf from '@tensorflow/tfjs';
import type { OldLogprobSource } from '../../domain.js';
import type { Supports } from '../data/batch.js';
import { behaviourOutputs, oldPolicyFrom, type OldPolicy } from '../data/behaviour.js';
import type { TrainingSample } from '../data/data.js';
import { balanceShards, combineGradients, LOSS_KEYS, objectiveOf, ReplicaPool, shardGradients } from './data-parallel.js';
import type { AdamW } from '../maths/losses.js';
import type { TrainableModel } from '../model-api.js';
import { applyUpdate, type StepLosses } from '../maths/ppo.js';

/**
 * One optimiser step with data parallelism: shard 0 here, shards 1.. on the replicas (at the same
 * time), the token-sum gradients added and divided by the minibatch's output tokens, one AdamW
 * update here, and the new weights published to the replicas. The losses are the minibatch's
 * token-means (the shards' token-sums over the output tokens).
 */
export async function parallelStep(
  pool: ReplicaPool, model: TrainableModel, optimizer: AdamW, objective: ReturnType<typeof objectiveOf>, samples: readonly TrainingSample[],
  shards: number[][], seqLens: readonly number[], h: { microBatchTokens: number; maxGradNorm: number }, old: { oldLogprobs: ReadonlyArray<number[] | null>; supports: Supports } | null,
  offsets: readonly number[] | null,
): Promise<{ update: StepLosses & { gradNorm: number }; sizes: { tokens: number; positions: number } }> {
  const remote = pool.computeShards(shards.slice(1), offsets); // posted first, so the replicas work while this thread does shard 0
  let own: ReturnType<typeof shardGradients>;
  try {
    own = shardGradients(model, optimizer.variables, objective, samples, shards[0], seqLens, h.microBatchTokens, old?.oldLogprobs, old?.supports, offsets);
  } catch (err) {
    await remote.catch(() => undefined);
    throw err;
  }
  let others: Awaited<typeof remote>;
  try {
    others = await remote;
  } catch (err) {
    tf.dispose(own.grads);
    throw err;
  }
  const parts = [own, ...others];
  const outTokens = parts.reduce((a, p) => a + p.outTokens, 0);
  const grads = combineGradients(optimizer.variables, own.grads, others.map((o) => o.grads), outTokens);
  tf.dispose(own.grads);
  const gradNorm = applyUpdate(optimizer, grads, h.maxGradNorm);
  tf.dispose(grads);
  pool.publish(optimizer.variables);
  const losses = Object.fromEntries(LOSS_KEYS.map((k) => [k, parts.reduce((a, p) => a + p.losses[k], 0) / outTokens])) as unknown as StepLosses;
  return {
    update: { ...losses, gradNorm },
    sizes: { tokens: parts.reduce((a, p) => a + p.tokens, 0), positions: parts.reduce((a, p) => a + p.positions, 0) },
  };
}

/**
 * pi_old with data parallelism: the samples cut into balanced parts (`balanceShards`), part 0
 * computed here and the others by the replicas at the same time, merged in sample order
 * (as `recomputeOldLogprobs`, whose chunks they follow within each part).
 */
export async function parallelOldPolicy(
  pool: ReplicaPool, model: TrainableModel, samples: readonly TrainingSample[], seqLens: readonly number[],
  h: { minibatchSize: number; microBatchTokens: number; oldLogprobs: OldLogprobSource },
): Promise<OldPolicy> {
  const parts = balanceShards(samples.map((_, i) => i), seqLens, pool.size + 1);
  const remote = pool.behaviour(parts.slice(1));
  let own: ReturnType<typeof behaviourOutputs>;
  try {
    own = behaviourOutputs(model, parts[0].map((i) => samples[i]), h.minibatchSize, h.microBatchTokens);
  } catch (err) {
    await remote.catch(() => undefined);
    throw err;
  }
  const logprobs: number[][] = new Array(samples.length);
  const supports: Array<Array<number[] | null> | null> = new Array(samples.length);
  [own, ...(await remote)].forEach((r, k) => parts[k].forEach((i, j) => { logprobs[i] = r.logprobs[j]; supports[i] = r.supports[j]; }));
  return oldPolicyFrom(samples, logprobs, supports, h.oldLogprobs);
}
