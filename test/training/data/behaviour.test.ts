/**
 * The behaviour policy under given weights: output logprobs in memory-capped chunks, and the old
 * logprobs of a PPO job (recomputed or the sampler's) with the sampler's drift.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { outputLogprobs, recomputeOldLogprobs } from '../../../src/training/data/behaviour.js';
import type { TrainingSample } from '../../../src/training/data/data.js';
import { createModelIO, TinyModel, writeTinyCheckpoint } from '../tiny-model.js';

let dir: string;
const base = () => join(dir, 'base');
beforeAll(async () => {
  await tf.setBackend('cpu');
  dir = await mkdtemp(join(tmpdir(), 'lamer-behaviour-'));
  await writeTinyCheckpoint(base(), TinyModel.init(8, 8, 16));
});
afterAll(async () => { await rm(dir, { recursive: true, force: true }); });

const sample = (prompt: number[], output: number[], advantage = 0, oldLogprobs: number[] | null = null): TrainingSample =>
  ({ sessionId: 's', taskId: 't', attempt: 0, step: 0, kind: 'action', promptTokenIds: prompt, outputTokenIds: output, oldLogprobs, advantage, return: 0 });

describe('outputLogprobs under a token budget', () => {
  it('gives the same logprobs in the same order, in batches of at most maxTokens padded positions', async () => {
    const io = createModelIO();
    const m = await io.load(base());
    const samples = [sample([1, 2, 3, 4, 5], [3]), sample([1], [4, 5]), sample([2, 6, 1, 1, 1, 1, 1], [7, 2]), sample([5], [1])];
    const calls: number[][] = [];
    const spy = { ...m, blockSize: m.blockSize, padId: m.padId, vocabSize: m.vocabSize, logits: (t: tf.Tensor2D, tr: boolean) => { calls.push(t.shape); return m.logits(t, tr); } } as typeof m;
    const all = outputLogprobs(spy, samples, 16);
    expect(calls).toEqual([[4, 8]]);
    calls.length = 0;
    const capped = outputLogprobs(spy, samples, 16, 10);
    // lengths (prompt + output - 1): 5, 2, 8, 1 -> [5, 2] (2 x 5 = 10), [8], [1]
    expect(calls).toEqual([[2, 5], [1, 8], [1, 1]]);
    expect(capped.map((x) => x.length)).toEqual([1, 2, 2, 1]);
    capped.flat().forEach((x, i) => expect(x).toBeCloseTo(all.flat()[i]!, 6));
    m.dispose();
  });
});

describe('recomputeOldLogprobs', () => {
  it('pi_old: the recomputed logprobs by default, the sampler\'s when stored; the gap is the mean recorded - recomputed', async () => {
    const m = await createModelIO().load(base());
    const plain = [sample([1, 2], [3, 4]), sample([5], [6])];
    const fresh = outputLogprobs(m, plain);
    // the sampler's logprobs: off by +0.5 on sample 0's tokens and -0.25 on sample 1's; one sample recorded none
    const samples = [{ ...plain[0], oldLogprobs: fresh[0].map((x) => x + 0.5) }, { ...plain[1], oldLogprobs: fresh[1].map((x) => x - 0.25) }, sample([2], [7])];
    const before = tf.memory().numTensors;
    const r = recomputeOldLogprobs(m, samples, 'recompute', 16, Infinity);
    expect(tf.memory().numTensors).toBe(before);
    expect(r.oldLogprobs.slice(0, 2)).toEqual(fresh);
    expect(r.oldLogprobs[2]).toHaveLength(1);
    expect(r.supports).toEqual([null, null, null]); // no recorded sampler settings: the whole vocabulary
    expect(r.behaviorLogprobGap).toBeCloseTo((2 * 0.5 - 0.25) / 3, 6);
    const s = recomputeOldLogprobs(m, samples, 'stored', 16, Infinity);
    expect(s.oldLogprobs).toEqual([samples[0].oldLogprobs, samples[1].oldLogprobs, null]);
    expect(s.behaviorLogprobGap).toBeCloseTo(r.behaviorLogprobGap!, 12);
    m.dispose();
  });
});
