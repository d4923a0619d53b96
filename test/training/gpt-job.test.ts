import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { saveCheckpoint } from '../../src/model/checkpoint.js';
import { initModel } from '../../src/model/gpt.js';
import { BOS, encode, EOS } from '../../src/model/tokenizer.js';
import type { TrainingSample } from '../../src/training/data.js';
import { createModelIO } from '../../src/training/gpt-adapter.js';
import { outputLogprobs, runTrainingJob } from '../../src/training/job.js';
import { DEFAULT_MODEL_IO, startTrainingWorker } from '../../src/training/worker.js';

// The training job on the builtin GPT (src/model), with a tiny config so that it runs in seconds.
let dir: string;
const cfg = { vocab_size: 260, block_size: 32, n_layer: 1, n_head: 2, n_embd: 16 };
const prompt = [BOS, ...encode('Obs: x\nAction:')];
const mk = (action: string, advantage: number): TrainingSample =>
  ({ sessionId: 's', taskId: 't', attempt: 0, step: 0, kind: 'action', promptTokenIds: prompt, outputTokenIds: [...encode(action), EOS], oldLogprobs: null, advantage, return: 0 });
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

beforeAll(async () => {
  await tf.setBackend('cpu');
  dir = await mkdtemp(join(tmpdir(), 'lamer-gptjob-'));
  const m = initModel(cfg, 7);
  await saveCheckpoint(m, join(dir, 'base'), { version: 'base' });
  m.dispose();
});
afterAll(async () => { await rm(dir, { recursive: true, force: true }); });

describe('PPO on the builtin GPT', () => {
  it('raises the logprob of the positively-advantaged action, in this thread and in a worker', async () => {
    const io = await createModelIO({ backend: 'cpu' });
    const pos = mk(' up', 1);
    const neg = mk(' down', -1);
    const m0 = await io.load(join(dir, 'base'));
    const [lp0Pos, lp0Neg] = outputLogprobs(m0, [pos, neg]).map(sum);
    const stored = outputLogprobs(m0, [pos, neg]);
    m0.dispose();
    const samples = [{ ...pos, oldLogprobs: stored[0] }, { ...neg, oldLogprobs: stored[1] }];
    const spec = { algorithm: 'lamer' as const, baseCheckpointDir: join(dir, 'base'), hyper: { lr: 0.01, epochs: 5, minibatchSize: 2 }, meta: { version: 'v1', parent: 'base' } };
    const res = await runTrainingJob({ ...spec, outputDir: join(dir, 'v1') }, samples, { io });
    const m1 = await io.load(res.checkpointDir);
    const [lp1Pos, lp1Neg] = outputLogprobs(m1, [pos, neg]).map(sum);
    m1.dispose();
    expect(lp1Pos).toBeGreaterThan(lp0Pos + 0.1);
    expect(lp1Neg).toBeLessThan(lp0Neg - 0.1);
    expect(res.behaviorLogprobGap).toBeCloseTo(0, 4);

    const h = startTrainingWorker({ spec: { ...spec, outputDir: join(dir, 'v1w') }, samples, modelIO: { ...DEFAULT_MODEL_IO, options: { backend: 'cpu' } } });
    const wres = await h.done;
    const mw = await io.load(wres.checkpointDir);
    const [lpwPos] = outputLogprobs(mw, [pos]).map(sum);
    mw.dispose();
    expect(lpwPos).toBeCloseTo(lp1Pos, 3); // same data, seed and backend: the same update
  });
});
