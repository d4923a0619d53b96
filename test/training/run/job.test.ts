import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TrainingSample } from '../../../src/training/data/data.js';
import { outputLogprobs } from '../../../src/training/data/behaviour.js';
import { byTurns, fitMicroBatchTokens, fitPacked, JobCancelledError, rolloutMetrics, runTrainingJob } from '../../../src/training/run/job.js';
import { createModelIO, TinyModel, writeTinyCheckpoint } from '../tiny-model.js';

let dir: string;
const base = () => join(dir, 'base');
beforeAll(async () => {
  await tf.setBackend('cpu');
  dir = await mkdtemp(join(tmpdir(), 'lamer-train-'));
  await writeTinyCheckpoint(base(), TinyModel.init(8, 8, 16));
});
afterAll(async () => { await rm(dir, { recursive: true, force: true }); });

const sample = (prompt: number[], output: number[], advantage = 0, oldLogprobs: number[] | null = null): TrainingSample =>
  ({ sessionId: 's', taskId: 't', attempt: 0, step: 0, kind: 'action', promptTokenIds: prompt, outputTokenIds: output, oldLogprobs, advantage, return: 0 });

describe('runTrainingJob', () => {
  const io = createModelIO();
  it('PPO raises the logprob of the positively-advantaged action and lowers the other', async () => {
    const m0 = await io.load(base());
    const pos = sample([1, 2], [3], 1);
    const neg = sample([1, 2], [4], -1);
    const [lpPos0, lpNeg0] = outputLogprobs(m0, [pos, neg]).map((x) => x[0]);
    m0.dispose();
    const samples = [{ ...pos, oldLogprobs: [lpPos0] }, { ...neg, oldLogprobs: [lpNeg0] }];
    const before = tf.memory().numTensors;
    const progress: number[] = [];
    const res = await runTrainingJob(
      { algorithm: 'lamer', baseCheckpointDir: base(), outputDir: join(dir, 'ppo'), hyper: { lr: 0.05, epochs: 4, minibatchSize: 2 } },
      samples, { io, onProgress: (p) => progress.push(p.progress) },
    );
    expect(tf.memory().numTensors).toBe(before);
    expect(res.iterations).toBe(4);
    expect(progress).toEqual([0.25, 0.5, 0.75, 1]);
    expect(res.behaviorLogprobGap).toBeCloseTo(0, 5); // the stored logprobs came from the same weights
    expect(res.metrics[0].clipFrac).toBe(0); // first step: ratio 1
    expect(res.metrics[0].pgLoss).toBeCloseTo(0, 6); // -(1*1 + -1*1)/2
    const m1 = await io.load(res.checkpointDir);
    const [lpPos1, lpNeg1] = outputLogprobs(m1, [pos, neg]).map((x) => x[0]);
    m1.dispose();
    expect(lpPos1).toBeGreaterThan(lpPos0 + 0.05);
    expect(lpNeg1).toBeLessThan(lpNeg0 - 0.05);
    const meta = JSON.parse(await readFile(join(res.checkpointDir, 'tiny.json'), 'utf8')).meta;
    expect(meta.algorithm).toBe('lamer');
    expect(meta.iterations).toBe(4);
  });
  it('SFT on a handful of samples lowers the loss', async () => {
    const samples = [sample([1, 2], [3, 7]), sample([1, 5], [6, 7]), sample([2, 2], [3, 7])];
    const res = await runTrainingJob({ algorithm: 'sft', baseCheckpointDir: base(), outputDir: join(dir, 'sft'), hyper: { lr: 0.05, epochs: 30, minibatchSize: 3 } }, samples, { io });
    expect(res.iterations).toBe(30);
    const first = res.metrics[0].loss;
    const last = res.metrics[res.metrics.length - 1].loss;
    expect(first).toBeCloseTo(Math.log(8), 1); // near-uniform start over 8 tokens
    expect(last).toBeLessThan(first * 0.5);
    expect(res.metrics.every((m) => m.tokensPerSec > 0)).toBe(true);
  });
  it("a cosine schedule sets each step's learning rate (reported per iteration, stored in the checkpoint)", async () => {
    const samples = [sample([1, 2], [3, 7]), sample([1, 5], [6, 7])];
    const hyper = { lr: 0.01, epochs: 6, minibatchSize: 2, lrSchedule: 'cosine' as const, warmupSteps: 2, minLrRatio: 0.1 };
    const res = await runTrainingJob({ algorithm: 'sft', baseCheckpointDir: base(), outputDir: join(dir, 'sft-cosine'), hyper }, samples, { io });
    // warm-up 0.005, 0.01; then p = 0, 1/3, 2/3, 1 of the decay from 0.01 to 0.001 (hand-computed)
    const want = [0.005, 0.01, 0.01, 0.00775, 0.00325, 0.001];
    res.metrics.forEach((m, i) => expect(m.lr).toBeCloseTo(want[i]!, 12));
    const meta = JSON.parse(await readFile(join(res.checkpointDir, 'tiny.json'), 'utf8')).meta;
    expect(meta.hyper).toMatchObject({ lr: 0.01, lrSchedule: 'cosine', warmupSteps: 2, minLrRatio: 0.1 });
    const constant = await runTrainingJob({ algorithm: 'sft', baseCheckpointDir: base(), outputDir: join(dir, 'sft-constant'), hyper: { lr: 0.01, epochs: 2, minibatchSize: 2 } }, samples, { io });
    expect(constant.metrics.map((m) => m.lr)).toEqual([0.01, 0.01]);
  });

  it('refuses a warm-up as long as the job, writing no checkpoint', async () => {
    const out = join(dir, 'sft-bad-warmup');
    await expect(runTrainingJob({ algorithm: 'sft', baseCheckpointDir: base(), outputDir: out, hyper: { epochs: 2, minibatchSize: 1, lrSchedule: 'cosine', warmupSteps: 2 } }, [sample([1], [2])], { io }))
      .rejects.toThrow(/warmupSteps \(2\) must be below the job's 2 optimiser steps/);
    await expect(stat(out)).rejects.toThrow();
  });

  it('cancel stops the job and writes no checkpoint', async () => {
    const ac = new AbortController();
    const samples = Array.from({ length: 8 }, (_, i) => sample([1], [2 + (i % 3)], i % 2 ? 1 : -1, [-2]));
    const seen: number[] = [];
    const run = runTrainingJob({ algorithm: 'grpo', baseCheckpointDir: base(), outputDir: join(dir, 'cancelled'), hyper: { minibatchSize: 1, epochs: 5 } }, samples, {
      io, signal: ac.signal, onProgress: (p) => { seen.push(p.iteration); if (p.iteration === 2) ac.abort(); },
    });
    await expect(run).rejects.toBeInstanceOf(JobCancelledError);
    expect(seen).toEqual([1, 2]);
    await expect(stat(join(dir, 'cancelled'))).rejects.toThrow(/ENOENT/);
  });
  it('rejects an empty sample set and propagates model errors', async () => {
    await expect(runTrainingJob({ algorithm: 'sft', baseCheckpointDir: base(), outputDir: join(dir, 'x') }, [], { io })).rejects.toThrow(/no training samples/);
    await expect(runTrainingJob({ algorithm: 'sft', baseCheckpointDir: base(), outputDir: join(dir, 'x') }, [sample([1], [2])], { io: createModelIO({ throwInLogits: true }) })).rejects.toThrow(/forward failed/);
  });
});

describe('micro-batches with gradient accumulation', () => {
  it('the update is the same whatever the micro-batch budget', async () => {
    const io = createModelIO();
    const samples = [sample([1, 2, 3, 4, 5], [3], 1, [-2]), sample([1], [4, 5], -0.5, [-2, -2]), sample([2, 6], [7], 2, [-2]), sample([5, 5, 5], [1, 2, 3], -1, [-2, -2, -2])];
    for (const algorithm of ['rloo', 'sft'] as const) {
      const run = async (name: string, microBatchTokens: number) => {
        const res = await runTrainingJob({ algorithm, baseCheckpointDir: base(), outputDir: join(dir, name), hyper: { lr: 0.05, epochs: 2, minibatchSize: 4, microBatchTokens } }, samples, { io });
        return { res, w: JSON.parse(await readFile(join(dir, name, 'tiny.json'), 'utf8')).weights };
      };
      const whole = await run(`${algorithm}-whole`, 10_000);
      const split = await run(`${algorithm}-split`, 1);
      expect(whole.res.metrics[1].loss).toBeCloseTo(split.res.metrics[1].loss, 5);
      expect(whole.res.metrics[1].entropy).toBeCloseTo(split.res.metrics[1].entropy, 5);
      const flat = (w: { E: number[][]; W: number[][]; c: number[] }) => [...w.E.flat(), ...w.W.flat(), ...w.c];
      const a = flat(whole.w); const b = flat(split.w);
      expect(Math.max(...a.map((x, i) => Math.abs(x - b[i])))).toBeLessThan(1e-5);
      expect(Math.max(...a.map((x, i) => Math.abs(x - flat(TinyModel.init(8, 8, 16) as never)[i])))).toBeGreaterThan(1e-3); // it did train
    }
  });
});

describe('per-iteration rollout metrics', () => {
  const withOutcome = (sessionId: string, attempt: number, attemptReturn: number, firstSuccess: number | null): TrainingSample =>
    ({ ...sample([1], [2], 0, [-1]), sessionId, attempt, outcome: { attemptReturn, firstSuccess } });
  it('rolloutMetrics: each attempt once in the mean return, each session once in pass@k (hand-computed)', () => {
    // session a: attempts 0 (-1, two samples) and 1 (10), solved at 1; b: attempt 0 (-2), never solved
    const m = rolloutMetrics([withOutcome('a', 0, -1, 1), withOutcome('a', 0, -1, 1), withOutcome('a', 1, 10, 1), withOutcome('b', 0, -2, null)], 3);
    expect(m).toEqual({ meanReturn: 7 / 3, passAtK: { 1: 0, 2: 0.5, 3: 0.5 } });
    expect(rolloutMetrics([sample([1], [2])], 3)).toBeNull();
  });
  it("each optimiser step reports its own minibatch's rollouts, not the job's constant data stats", async () => {
    const io = createModelIO();
    // minibatch size 1, no shuffle effects on the values: steps see session a (solved, return 10) or b (-1)
    const samples = [withOutcome('a', 0, 10, 0), withOutcome('b', 0, -1, null)].map((s, i) => ({ ...s, advantage: i ? -1 : 1 }));
    const dataStats = { sessions: 2, tasks: 1, turns: 2, samples: 2, groups: 1, zeroAdvantageGroups: 0, zeroAdvantageTurns: 0, droppedTurns: 0, meanReturn: 4.5, passAtK: { 1: 0.5 }, outputTokens: 2 };
    const res = await runTrainingJob({ algorithm: 'gigpo', baseCheckpointDir: base(), outputDir: join(dir, 'own'), dataStats, hyper: { lr: 0.01, epochs: 1, minibatchSize: 1 } }, samples, { io });
    expect(res.metrics.map((m) => m.meanReturn).sort((x, y) => x - y)).toEqual([-1, 10]);
    expect(res.metrics.map((m) => m.passAtK['1']).sort()).toEqual([0, 1]);
  });
});

describe('fitMicroBatchTokens', () => {
  it.each([
    // requested, attention maps (layers x heads), longest sequence, expected
    [4096, 16, 1024, 2048], // 4 x 4 model: 2 sequences of 1024 = 2^25 cells
    [4096, 8, 1024, 4096], // 2 x 4 model: 4 sequences fit
    [4096, 64, 1024, 1024], // never below one sequence
    [4096, 18, 1000, 1000], // 2^25 / (18 * 1000^2) = 1.86 -> 1 sequence
    [2048, 16, 512, 2048], // the request is below the cap (cap 8 x 512)
    [4096, undefined, 1024, 4096], // a model without attention maps: unchanged
    [4096, 16, 0, 4096],
  ])('(%d, %s maps, T %d) -> %d', (requested, maps, maxSeqLen, expected) => {
    expect(fitMicroBatchTokens(requested, maps, maxSeqLen)).toBe(expected);
  });
});

describe('packed samples in a job', () => {
  // prompt [1, 2]; turn 0 trains [3, 7] (7 where the tail 4 follows), turn 1 trains [6, 7]
  const packed: TrainingSample = {
    ...sample([1, 2], [3, 4, 5, 6, 7], 0.5, [-1, -2, 0, -3, -4]), step: 0, lossTargets: [3, 7, -1, 6, 7], advantages: [0.5, 0.5, 0, -1, -1],
    packedTurns: [{ step: 0, start: 0, length: 2, advantage: 0.5, return: 1 }, { step: 1, start: 3, length: 2, advantage: -1, return: 0 }],
    behaviour: { temperature: 0.9, topP: 1, topK: 0 },
  };
  it('fitPacked: a packed sample longer than the block, or any with pack false, becomes its per-step samples', () => {
    const plain = sample([1], [2]);
    expect(fitPacked([packed, plain], 6, true)).toEqual([packed, plain]); // 2 + 5 <= 6 + 1
    const steps = fitPacked([packed, plain], 5, true);
    expect(steps.map((x) => [x.step, x.promptTokenIds, x.outputTokenIds, x.oldLogprobs, x.advantage, x.return])).toEqual([
      [0, [1, 2], [3, 7], [-1, -2], 0.5, 1], [1, [1, 2, 3, 4, 5], [6, 7], [-3, -4], -1, 0], [0, [1], [2], null, 0, 0],
    ]);
    expect(steps[0].packedTurns).toBeUndefined();
    expect(fitPacked([packed], 100, false)).toEqual(steps.slice(0, 2));
  });
  it('byTurns: minibatches of about minibatchSize turns, a packed sample counting as its turns', () => {
    expect(byTurns([[0, 1], [2, 3]], [1, 1, 1, 1], 2)).toEqual([[0, 1], [2, 3]]);
    // turns 1 + 2 + 3 reach 4 at sample 0; the rest make the last minibatch
    expect(byTurns([[1, 2], [0, 3]], [3, 1, 2, 1], 4)).toEqual([[1, 2, 0], [3]]);
  });
});
