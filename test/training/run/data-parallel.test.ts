import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { balanceShards, liveReplicaThreads } from '../../../src/training/run/data-parallel.js';
import { BOS, encode, EOS } from '../../../src/model/tokenizer.js';
import { buildRlSamples, type StepRecord, type TrainingSample } from '../../../src/training/data/data.js';
import { createModelIO } from '../../../src/training/run/gpt-adapter.js';
import { JobCancelledError, resolveTrainWorkers, runTrainingJob, trainWorkersFromEnv, type JobResult, type TrainingJobSpec } from '../../../src/training/run/job.js';
import type { ModelIO } from '../../../src/training/model-api.js';
import { writeTinyGptCheckpoint } from '../../helpers/index.js';
import { createModelIO as createTinyIO, TinyModel, writeTinyCheckpoint } from '../tiny-model.js';

// Data-parallel training: 2 workers (this thread + one replica thread) give the parameters and
// losses of 1 worker, for SFT and PPO; a failing or cancelled job leaves no replica thread behind.
// The tests that train (each starts a replica thread that loads tfjs and the model) have 120 s, as
// the other training tests: under load they ran 7-12 s where they had 30 s.
let dir: string;
let io: ModelIO;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'lamer-dp-'));
  await writeTinyGptCheckpoint(join(dir, 'base'), 3);
  await writeTinyCheckpoint(join(dir, 'tiny'), TinyModel.init(8, 8, 16));
  io = await createModelIO({ backend: 'wasm' });
});
afterAll(async () => { await rm(dir, { recursive: true, force: true }); });

/** n samples of varied lengths (deterministic), output tokens in the byte range. */
function samples(n: number, rl: boolean): TrainingSample[] {
  let s = 12345;
  const rnd = (k: number) => { s = (s * 16807) % 2147483647; return s % k; };
  return Array.from({ length: n }, (_, i) => {
    const promptTokenIds = Array.from({ length: 4 + rnd(40) }, () => 32 + rnd(90));
    const outputTokenIds = Array.from({ length: 1 + rnd(12) }, () => 32 + rnd(90));
    return {
      sessionId: `s${i % 3}`, taskId: 't', attempt: 0, step: i, kind: 'action' as const, promptTokenIds, outputTokenIds,
      // some RL samples carry the sampler's logprobs, so the job reports the sampler's drift
      oldLogprobs: rl && i % 3 === 0 ? outputTokenIds.map(() => -5) : null, advantage: rl ? rnd(200) / 100 - 1 : 0, return: 0,
      ...(rl && i % 2 === 0 ? { behaviour: { temperature: 0.8, topP: 0.9, topK: 0 } } : {}),
    };
  });
}

/**
 * Recorded 3-step attempts (2 tasks x 4 sessions) whose served prompts extend each other as the
 * acting prompt does (prompt(t+1) = prompt(t) + action + next tail; the output is the action + EOS),
 * step 1 constrained to availableActions: buildRlSamples packs each attempt into one sample.
 */
function packedSamples(): TrainingSample[] {
  let s = 777;
  const rnd = (k: number) => { s = (s * 16807) % 2147483647; return s % k; };
  const moves = ['up', 'down', 'left', 'right'];
  const records: StepRecord[] = [];
  for (let task = 0; task < 2; task++) {
    for (let g = 0; g < 4; g++) {
      const base = { sessionId: `t${task}g${g}`, taskId: `T${task}`, attempt: 0, kind: 'action' as const, invalidAction: false, modelVersion: 'base', sampling: { temperature: 0.9, topP: 1, topK: 0 } };
      let prompt = [BOS, ...encode(`Task ${task}.\nObservation:\nstart ${g}\nAction: `)];
      let reward = 0;
      for (let t = 0; t < 3; t++) {
        const action = moves[rnd(4)];
        const out = [...encode(action), EOS];
        records.push({ ...base, step: t, observation: `o${t}`, reward, done: false, success: false, promptTokenIds: prompt, outputTokenIds: out, logprobs: out.map(() => -0.5 - rnd(100) / 100), availableActions: t === 1 ? moves : null });
        reward = action === 'up' ? 1 : -0.2;
        prompt = [...prompt, ...encode(action), ...encode(`\nObservation:\nboard ${t} ${action}\nAction: `)];
      }
      records.push({ ...base, step: 3, observation: 'end', reward, done: true, success: reward > 0, promptTokenIds: null, outputTokenIds: null, logprobs: null });
    }
  }
  return buildRlSamples(records, { algorithm: 'lamer', returns: { gammaStep: 0.9, gammaTraj: 0.6 }, blockSize: 384 }).samples;
}

async function weights(checkpointDir: string): Promise<Float32Array[]> {
  const m = await io.load(checkpointDir);
  const w = m.trainableVariables().map((v) => v.dataSync() as Float32Array);
  m.dispose();
  return w;
}

function maxAbsDiff(a: Float32Array[], b: Float32Array[]): number {
  let d = 0;
  a.forEach((x, i) => x.forEach((v, j) => { d = Math.max(d, Math.abs(v - b[i][j])); }));
  return d;
}

async function oneVsTwo(algorithm: 'sft' | 'lamer', data: TrainingSample[], name: string, hyper: TrainingJobSpec['hyper'] = {}): Promise<[JobResult, JobResult]> {
  // 18 samples / 6 per step = 3 optimiser steps; 96-position micro-batches make several per shard
  const spec = (workers: number): TrainingJobSpec => ({
    algorithm, baseCheckpointDir: join(dir, 'base'), outputDir: join(dir, `${name}-${workers}`),
    hyper: { lr: 0.01, minibatchSize: 6, microBatchTokens: 96, workers, ...hyper },
  });
  const one = await runTrainingJob(spec(1), data, { io });
  const two = await runTrainingJob(spec(2), data, { io });
  return [one, two];
}

// One worker multiplies all rows at once, two workers half each: a BLAS matmul (src/model/blas.ts)
// may sum a row's products in another order for another number of rows, so figures agree to float
// rounding (~1e-5 after a few steps), not bit for bit. A replica at a wrong offset or on wrong data
// is ~1e-2 off.
const ROUNDING = 5e-5;

function expectSame(one: JobResult, two: JobResult): void {
  expect(two.iterations).toBe(3);
  one.metrics.forEach((m, i) => {
    const p = two.metrics[i];
    for (const k of ['loss', 'pgLoss', 'entropy', 'clipFrac', 'dualClipFrac', 'approxKl', 'gradNorm'] as const) expect(Math.abs(p[k] - m[k]), k).toBeLessThan(ROUNDING);
    expect(p.tokens).toBe(m.tokens);
    expect(p.padFrac).toBeGreaterThanOrEqual(0);
  });
}

describe('data-parallel training', () => {
  it('SFT: 2 workers give the parameters and losses of 1 worker', async () => {
    const [one, two] = await oneVsTwo('sft', samples(18, false), 'sft');
    expectSame(one, two);
    // float rounding of BLAS sums over other row counts, compounded by Adam: ~1e-5; a lost shard ~1e-2
    expect(maxAbsDiff(await weights(one.checkpointDir), await weights(two.checkpointDir))).toBeLessThan(1e-4);
    // the parameters did move (the comparison is not of two untouched copies)
    expect(maxAbsDiff(await weights(join(dir, 'base')), await weights(two.checkpointDir))).toBeGreaterThan(1e-3);
    expect(liveReplicaThreads()).toBe(0);
  }, 120_000);

  it('SFT with random position offsets: 2 workers (the replica trains its shard at the same offsets) give the parameters and losses of 1 worker', async () => {
    const data = samples(18, false);
    const [one, two] = await oneVsTwo('sft', data, 'sft-offsets', { positionOffset: 'random' });
    expectSame(one, two);
    // wpe rows that few samples reach get tiny gradients, which AdamW's first steps turn into
    // moves of about lr: float rounding of the summation order shows at ~2e-4 there
    expect(maxAbsDiff(await weights(one.checkpointDir), await weights(two.checkpointDir))).toBeLessThan(1e-3);
    // the offsets changed the training: other losses than at offset 0
    const plain = await runTrainingJob({ algorithm: 'sft', baseCheckpointDir: join(dir, 'base'), outputDir: join(dir, 'sft-offsets-none'), hyper: { lr: 0.01, minibatchSize: 6, microBatchTokens: 96, workers: 1 } }, data, { io });
    expect(Math.abs(plain.metrics[0].loss - one.metrics[0].loss)).toBeGreaterThan(1e-3);
    expect(liveReplicaThreads()).toBe(0);
  }, 120_000);

  it('PPO (recomputed pi_old, sampler supports): 2 workers give the parameters and losses of 1 worker', async () => {
    const [one, two] = await oneVsTwo('lamer', samples(18, true), 'ppo');
    expectSame(one, two);
    // the second and third steps are off-policy, so the clip statistics are exercised
    expect(two.metrics[2].approxKl).toBeGreaterThan(0);
    // pi_old is computed in parts by both workers: the same drift of the sampler as one worker's
    expect(one.behaviorLogprobGap).not.toBeNull();
    expect(Math.abs(two.behaviorLogprobGap! - one.behaviorLogprobGap!)).toBeLessThan(ROUNDING);
    expect(maxAbsDiff(await weights(one.checkpointDir), await weights(two.checkpointDir))).toBeLessThan(1e-4);
    expect(liveReplicaThreads()).toBe(0);
  }, 120_000);

  it('PPO on packed samples: 2 workers give the parameters and losses of 1 worker; pack: false (per-step samples) the same step', async () => {
    const data = packedSamples();
    expect(data.map((x) => x.packedTurns?.length)).toEqual(new Array(8).fill(3));
    // 24 turns / 8 per step = 3 optimiser steps
    const spec = (workers: number, hyper: TrainingJobSpec['hyper'] = {}): TrainingJobSpec => ({
      algorithm: 'lamer', baseCheckpointDir: join(dir, 'base'), outputDir: join(dir, `packed-${workers}-${hyper.pack ?? true}-${hyper.minibatchSize ?? 8}`),
      hyper: { lr: 0.01, minibatchSize: 8, microBatchTokens: 400, workers, ...hyper },
    });
    const one = await runTrainingJob(spec(1), data, { io });
    const two = await runTrainingJob(spec(2), data, { io });
    expectSame(one, two);
    expect(one.samples).toBe(8);
    // AdamW's first steps move every weight by about lr whatever its gradient's size, so float
    // rounding in the summation order shows at ~1e-4 here (lr 0.01, 3 steps); the losses agree to ROUNDING
    expect(maxAbsDiff(await weights(one.checkpointDir), await weights(two.checkpointDir))).toBeLessThan(1e-3);
    expect(Math.abs(two.behaviorLogprobGap! - one.behaviorLogprobGap!)).toBeLessThan(ROUNDING);
    // one step on all 24 turns: packed and per-step give the same losses and update, on fewer positions
    const packed = await runTrainingJob(spec(1, { minibatchSize: 24 }), data, { io });
    const plain = await runTrainingJob(spec(1, { minibatchSize: 24, pack: false }), data, { io });
    expect(plain.samples).toBe(24);
    for (const k of ['loss', 'pgLoss', 'entropy', 'gradNorm'] as const) expect(Math.abs(packed.metrics[0][k] - plain.metrics[0][k]), k).toBeLessThan(ROUNDING);
    expect(Math.abs(packed.behaviorLogprobGap! - plain.behaviorLogprobGap!)).toBeLessThan(ROUNDING);
    expect(packed.metrics[0].tokens).toBeLessThan(plain.metrics[0].tokens / 1.5);
    expect(maxAbsDiff(await weights(packed.checkpointDir), await weights(plain.checkpointDir))).toBeLessThan(1e-3);
    expect(liveReplicaThreads()).toBe(0);
  }, 120_000);

  it('a replica that crashes rejects the job and leaves no thread behind', async () => {
    const tinyModule = pathToFileURL(join(import.meta.dirname, '..', 'tiny-model.ts')).href;
    const data = samples(8, false).map((s) => ({ ...s, promptTokenIds: s.promptTokenIds.map((t) => t % 8), outputTokenIds: s.outputTokenIds.map((t) => t % 8) }));
    await tf.setBackend('cpu');
    try {
      for (const crash of ['exit', 'uncaught'] as const) {
        const crashing: ModelIO = { ...createTinyIO({ slowMs: 20 }), replica: { module: tinyModule, options: { crash } } };
        const spec: TrainingJobSpec = { algorithm: 'sft', baseCheckpointDir: join(dir, 'tiny'), outputDir: join(dir, `crash-${crash}`), hyper: { minibatchSize: 4, epochs: 3, workers: 2 } };
        await expect(runTrainingJob(spec, data, { io: crashing })).rejects.toThrow(/training replica 1 (exited with code 3|crashed: tiny model: uncaught crash)/);
        await vi.waitFor(() => expect(liveReplicaThreads(), 'replica threads still alive').toBe(0), { timeout: 20_000, interval: 20 });
      }
    } finally {
      await tf.setBackend('wasm');
    }
  }, 120_000);

  it('cancelling a data-parallel job rejects with JobCancelledError and ends the replicas', async () => {
    const abort = new AbortController();
    const spec: TrainingJobSpec = { algorithm: 'sft', baseCheckpointDir: join(dir, 'base'), outputDir: join(dir, 'cancelled'), hyper: { minibatchSize: 6, epochs: 3, workers: 2 } };
    const seen: number[] = [];
    await expect(runTrainingJob(spec, samples(18, false), { io, signal: abort.signal, onProgress: (p) => { seen.push(p.iteration); abort.abort(); } })).rejects.toBeInstanceOf(JobCancelledError);
    expect(seen).toEqual([1]);
    await vi.waitFor(() => expect(liveReplicaThreads(), 'replica threads still alive').toBe(0), { timeout: 20_000, interval: 20 });
  }, 120_000);

  it('workers > 1 with a model I/O that threads cannot make is refused; the default falls back to this thread', async () => {
    const tiny = createTinyIO();
    const data = samples(4, false).map((s) => ({ ...s, promptTokenIds: [1, 2], outputTokenIds: [3] }));
    await tf.setBackend('cpu');
    try {
      const spec: TrainingJobSpec = { algorithm: 'sft', baseCheckpointDir: join(dir, 'tiny'), outputDir: join(dir, 'tiny-2'), hyper: { minibatchSize: 4, workers: 2 } };
      await expect(runTrainingJob(spec, data, { io: tiny })).rejects.toThrow(/workers > 1 needs a model I\/O/);
      const res = await runTrainingJob({ ...spec, hyper: { minibatchSize: 4 } }, data, { io: tiny });
      expect(res.iterations).toBe(1);
    } finally {
      await tf.setBackend('wasm');
    }
  });
});

describe('balanceShards', () => {
  it('cuts a minibatch into non-empty shards of about equal token count, each index once', () => {
    const lens = [100, 90, 50, 40, 30, 10, 5];
    const shards = balanceShards([0, 1, 2, 3, 4, 5, 6], lens, 2);
    expect(shards).toEqual([[0, 3, 4], [1, 2, 5, 6]]);
    expect(shards.map((s) => s.reduce((a, i) => a + lens[i], 0))).toEqual([170, 155]);
    expect(balanceShards([4], lens, 3)).toEqual([[4]]);
  });
});

describe('resolveTrainWorkers', () => {
  it('defaults to every core on wasm, else LAMER_TRAIN_WORKERS; at most the minibatch; 1 without a replica module', async () => {
    const replica = { module: 'x' };
    const saved = process.env.LAMER_TRAIN_WORKERS;
    try {
      delete process.env.LAMER_TRAIN_WORKERS;
      expect(tf.getBackend()).toBe('wasm');
      expect(resolveTrainWorkers(undefined, { replica }, 64)).toBe(Math.min(64, availableParallelism()));
      expect(resolveTrainWorkers(undefined, { replica }, 1)).toBe(1);
      expect(resolveTrainWorkers(undefined, {}, 64)).toBe(1);
      expect(resolveTrainWorkers(3, { replica }, 64)).toBe(3);
      process.env.LAMER_TRAIN_WORKERS = '5';
      expect(resolveTrainWorkers(undefined, { replica }, 64)).toBe(5);
      expect(resolveTrainWorkers(2, { replica }, 64)).toBe(2);
      expect(() => resolveTrainWorkers(0, { replica }, 64)).toThrow(RangeError);
    } finally {
      if (saved === undefined) delete process.env.LAMER_TRAIN_WORKERS; else process.env.LAMER_TRAIN_WORKERS = saved;
    }
  });
});

describe('trainWorkersFromEnv', () => {
  it('reads LAMER_TRAIN_WORKERS: a count, or null (every core) for unset, empty or 0; refuses the rest', () => {
    expect(trainWorkersFromEnv({})).toBeNull();
    expect(trainWorkersFromEnv({ LAMER_TRAIN_WORKERS: '' })).toBeNull();
    expect(trainWorkersFromEnv({ LAMER_TRAIN_WORKERS: '0' })).toBeNull();
    expect(trainWorkersFromEnv({ LAMER_TRAIN_WORKERS: '3' })).toBe(3);
    expect(() => trainWorkersFromEnv({ LAMER_TRAIN_WORKERS: '1.5' })).toThrow(RangeError);
    expect(() => trainWorkersFromEnv({ LAMER_TRAIN_WORKERS: 'many' })).toThrow(/LAMER_TRAIN_WORKERS/);
  });
});
