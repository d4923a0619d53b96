/**
 * Worker-thread side of a data-parallel training replica (src/training/run/data-parallel.ts): on
 * `init` it makes its own model I/O (own tfjs backend) and loads the job's starting checkpoint;
 * on each `step` it copies the coordinator's newest weights when told to, computes the gradient
 * of its shard's token-sum loss and posts it as one transferred Float32Array. Errors are posted
 * as `error`; the coordinator terminates the thread when the job ends.
 */
import type * as tf from '@tensorflow/tfjs';
import { pathToFileURL } from 'node:url';
import { parentPort } from 'node:worker_threads';
import { behaviourOutputs } from '../data/behaviour.js';
import { LOSS_KEYS, objectiveOf, paramCount, shardGradients, writeWeights, type FromReplica, type ReplicaInit, type ReplicaPolicy, type ToReplica } from './data-parallel.js';
import type { ModelIO, TrainableModel } from '../model-api.js';
import type { Objective } from '../maths/ppo.js';

if (!parentPort) throw new Error('replica-entry.ts must run in a worker thread');
const port = parentPort;
const post = (m: FromReplica, transfer: ArrayBuffer[] = []) => port.postMessage(m, transfer);

let state: { init: ReplicaInit; model: TrainableModel; vars: tf.Variable[]; objective: Objective; seqLens: number[]; weights: Float32Array; policy: ReplicaPolicy | null } | null = null;

async function init(msg: ReplicaInit): Promise<void> {
  const spec = msg.modelIO;
  const url = /^[a-z]+:/i.test(spec.module) ? spec.module : pathToFileURL(spec.module).href;
  const mod = (await import(url)) as Record<string, unknown>;
  const factory = mod[spec.exportName ?? 'createModelIO'];
  if (typeof factory !== 'function') throw new TypeError(`${spec.module} has no function ${spec.exportName ?? 'createModelIO'}`);
  const io = (await factory(spec.options ?? {})) as ModelIO;
  const model = await io.load(msg.checkpointDir);
  const vars = model.trainableVariables();
  const seqLens = msg.samples.map((x) => Math.min(x.promptTokenIds.length + x.outputTokenIds.length - 1, model.blockSize));
  state = { init: msg, model, vars, objective: objectiveOf(msg.objective), seqLens, weights: new Float32Array(msg.weights), policy: null };
  post({ type: 'ready', params: paramCount(vars) });
}

function ready(): NonNullable<typeof state> {
  if (!state) throw new Error('replica got a request before init');
  return state;
}

/** pi_old's share of this replica: the behaviour outputs of samples `idx` under the starting weights. */
function behaviour(idx: number[]): void {
  const s = ready();
  // chunked like the job's recomputeOldLogprobs: minibatch-sized chunks within the micro-batch cap
  const minibatch = s.init.behaviourBatchSize;
  const r = behaviourOutputs(s.model, idx.map((i) => s.init.samples[i]), minibatch, s.init.microBatchTokens);
  post({ type: 'behaviour', logprobs: r.logprobs, supports: r.supports });
}

/** One shard: `positionOffsets[j]` (when given) is the position offset of sample idx[j]. */
function step(idx: number[], syncWeights: boolean, positionOffsets: number[] | null): void {
  const s = ready();
  if (syncWeights) writeWeights(s.vars, s.weights);
  const offsets: number[] = []; // by sample index, as shardGradients reads them
  if (positionOffsets) idx.forEach((i, j) => { offsets[i] = positionOffsets[j]; });
  const r = shardGradients(s.model, s.vars, s.objective, s.init.samples, idx, s.seqLens, s.init.microBatchTokens, s.policy?.oldLogprobs, s.policy?.supports, positionOffsets && offsets);
  const flat = new Float32Array(paramCount(s.vars));
  let off = 0;
  for (const g of r.grads) {
    flat.set(g.dataSync() as Float32Array, off);
    off += g.size;
    g.dispose();
  }
  post({ type: 'grads', grads: flat, outTokens: r.outTokens, tokens: r.tokens, positions: r.positions, losses: LOSS_KEYS.map((k) => r.losses[k]) }, [flat.buffer]);
}

port.on('message', (msg: ToReplica) => {
  const run = async () => {
    if (msg.type === 'init') await init(msg);
    else if (msg.type === 'step') step(msg.idx, msg.syncWeights, msg.positionOffsets);
    else if (msg.type === 'behaviour') behaviour(msg.idx);
    else if (msg.type === 'policy') {
      ready().policy = { oldLogprobs: msg.oldLogprobs, supports: msg.supports };
      post({ type: 'ok' });
    }
  };
  run().catch((err: unknown) => {
    const e = err instanceof Error ? err : new Error(String(err));
    post({ type: 'error', name: e.name, message: e.message, stack: e.stack });
  });
});
