import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { saveCheckpoint } from '../../../src/model/checkpoint.js';
import { initModel } from '../../../src/model/gpt.js';
import { BOS, encode, EOS, PAD } from '../../../src/model/tokenizer.js';
import type { TrainingSample } from '../../../src/training/data/data.js';
import { createModelIO, GptTrainable } from '../../../src/training/run/gpt-adapter.js';
import { outputLogprobs } from '../../../src/training/data/behaviour.js';
import { runTrainingJob } from '../../../src/training/run/job.js';
import { randomPositionOffsets } from '../../../src/training/data/minibatches.js';
import type { ModelIO } from '../../../src/training/model-api.js';
import { DEFAULT_MODEL_IO, startTrainingWorker } from '../../../src/training/run/worker.js';

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

describe('the trained policy is the sampling policy', () => {
  it('recomputed logprobs at the recorded temperature / top-p / top-k and support equal the sampler\'s, free and constrained; the first PPO ratio is 1', async () => {
    const { createBuiltinEngineInstance } = await import('../../../src/policy/builtin-engine.js');
    const { behaviourOutputs } = await import('../../../src/training/data/behaviour.js');
    const { encodeCandidate } = await import('../../../src/model/tokenizer.js');
    const engine = await createBuiltinEngineInstance({ backend: 'cpu', limits: { maxActionTokens: 8, maxReflectionTokens: 8 } });
    await engine.load('base', join(dir, 'base'));
    const p = { head: 'Obs: x\n', steps: [], tail: 'Action:' };
    const actions = ['up', 'down', '(1, 2)', 'upper'];
    const samples: TrainingSample[] = [];
    const settings = [{ temperature: 0.7, topP: 0.8, topK: 20 }, { temperature: 1.5, topP: 1, topK: 5 }, { temperature: 0.5, topP: 0.95, topK: 0 }];
    for (let seed = 0; seed < 6; seed++) {
      const sampling = settings[seed % 3];
      const free = await engine.act({ sessionId: `f${seed}`, modelVersion: 'base', prompt: p, sampling: { ...sampling, seed } });
      const cons = await engine.act({ sessionId: `c${seed}`, modelVersion: 'base', prompt: p, availableActions: actions, sampling: { ...sampling, seed } });
      for (const [g, candidates] of [[free, undefined], [cons, actions.map(encodeCandidate)]] as const) {
        samples.push({ ...mk('x', seed % 2 ? 1 : -1), promptTokenIds: g.promptTokenIds, outputTokenIds: g.outputTokenIds, oldLogprobs: g.logprobs, behaviour: { ...sampling, ...(candidates ? { candidates } : {}) } });
      }
    }
    await engine.dispose();
    const io = await createModelIO({ backend: 'cpu' });
    const m0 = await io.load(join(dir, 'base'));
    const beh = behaviourOutputs(m0, samples);
    m0.dispose();
    samples.forEach((s, i) => s.oldLogprobs!.forEach((lp, k) => expect(beh.logprobs[i][k]).toBeCloseTo(lp, 4)));
    // training on the stored logprobs with lr 0: ratio exp(logp - logp_old) is 1 at every token
    const res = await runTrainingJob({ algorithm: 'lamer', baseCheckpointDir: join(dir, 'base'), outputDir: join(dir, 'same'), hyper: { lr: 0, epochs: 1, minibatchSize: samples.length, oldLogprobs: 'stored' } }, samples, { io });
    expect(res.metrics[0].approxKl).toBeLessThan(1e-8);
    expect(res.metrics[0].clipFrac).toBe(0);
    expect(Math.abs(res.behaviorLogprobGap!)).toBeLessThan(1e-5);
  });
});

describe('SFT with random position offsets on the builtin GPT', () => {
  const actions = [' up', ' down', ' left', ' right', ' (1, 2)'];
  const data = actions.map((a) => mk(a, 0)); // distinct lengths: 19..23 inputs, offsets in [0, 32 - n]
  const seqLens = data.map((s) => s.promptTokenIds.length + s.outputTokenIds.length - 1);

  /** The cpu GPT I/O, recording each training forward's (row length, offset) pairs, sorted. */
  async function spyIO(calls: Array<Array<[number, number]>>): Promise<ModelIO> {
    const io = await createModelIO({ backend: 'cpu' });
    return {
      ...io,
      replica: undefined,
      async load(d) {
        const m = (await io.load(d)) as GptTrainable;
        const inner = m.logits.bind(m);
        m.logits = (tokens, training, offsets) => {
          if (training) {
            const lens = (tokens.arraySync() as number[][]).map((row) => row.filter((t) => t !== PAD).length);
            const offs = offsets ? Array.from(offsets.dataSync()) : lens.map(() => 0);
            calls.push(lens.map((n, b): [number, number] => [n, offs[b]]).sort((x, y) => x[0] - y[0] || x[1] - y[1]));
          }
          return inner(tokens, training, offsets);
        };
        return m;
      },
    };
  }

  it('trains every sample at the offsets drawn for its epoch from the seed, lowers the loss, keeps the tensor count, records the hyperparameter', async () => {
    const calls: Array<Array<[number, number]>> = [];
    const io = await spyIO(calls);
    const counts: number[] = [];
    const before = tf.memory().numTensors;
    const hyper = { lr: 0.01, epochs: 25, minibatchSize: data.length, seed: 3, positionOffset: 'random' as const };
    const res = await runTrainingJob({ algorithm: 'sft', baseCheckpointDir: join(dir, 'base'), outputDir: join(dir, 'sft-rand'), hyper }, data, {
      io, onProgress: () => counts.push(tf.memory().numTensors),
    });
    expect(tf.memory().numTensors).toBe(before);
    expect(new Set(counts).size).toBe(1); // nothing accumulates from one step to the next
    expect(res.iterations).toBe(25);
    expect(calls).toHaveLength(25); // one micro-batch per step
    calls.forEach((got, epoch) => {
      const want = randomPositionOffsets(seqLens, cfg.block_size, 3 + epoch).map((o, i): [number, number] => [seqLens[i], o]).sort((x, y) => x[0] - y[0] || x[1] - y[1]);
      expect(got, `epoch ${epoch}`).toEqual(want);
    });
    expect(new Set(calls.flatMap((c) => c.map(([, o]) => o))).size).toBeGreaterThan(5); // offsets vary
    const first = res.metrics[0].loss;
    const last = res.metrics[res.metrics.length - 1].loss;
    expect(first).toBeGreaterThan(5);
    expect(last).toBeLessThan(first * 0.6);
    const meta = JSON.parse(await readFile(join(res.checkpointDir, 'model.json'), 'utf8'));
    expect(JSON.stringify(meta)).toContain('"positionOffset":"random"');

    // deterministic given the seed: the same weights again; another seed, other weights
    const short = (name: string, seed: number) => runTrainingJob({ algorithm: 'sft', baseCheckpointDir: join(dir, 'base'), outputDir: join(dir, name), hyper: { ...hyper, epochs: 3, seed } }, data, { io });
    const w = async (d: string) => { const m = await io.load(d); const x = m.trainableVariables().map((v) => Array.from(v.dataSync())); m.dispose(); return x; };
    const [a, b, c] = [await short('seed3-a', 3), await short('seed3-b', 3), await short('seed4', 4)];
    expect(await w(b.checkpointDir)).toEqual(await w(a.checkpointDir));
    expect(await w(c.checkpointDir)).not.toEqual(await w(a.checkpointDir));
  }, 60_000);

  it('positionOffset none (the default) trains at position 0; RL jobs refuse random offsets and write nothing', async () => {
    const calls: Array<Array<[number, number]>> = [];
    const io = await spyIO(calls);
    const res = await runTrainingJob({ algorithm: 'sft', baseCheckpointDir: join(dir, 'base'), outputDir: join(dir, 'sft-none'), hyper: { lr: 0.01, minibatchSize: data.length } }, data, { io });
    expect(calls).toEqual([seqLens.map((n): [number, number] => [n, 0]).sort((x, y) => x[0] - y[0] || x[1] - y[1])]);
    expect(JSON.stringify(JSON.parse(await readFile(join(res.checkpointDir, 'model.json'), 'utf8')))).toContain('"positionOffset":"none"');
    const rl = data.map((s) => ({ ...s, advantage: 1, oldLogprobs: s.outputTokenIds.map(() => -1) }));
    await expect(runTrainingJob({ algorithm: 'lamer', baseCheckpointDir: join(dir, 'base'), outputDir: join(dir, 'rl-rand'), hyper: { positionOffset: 'random' } }, rl, { io }))
      .rejects.toThrow(/positionOffset 'random' is for sft jobs only/);
    await expect(runTrainingJob({ algorithm: 'sft', baseCheckpointDir: join(dir, 'base'), outputDir: join(dir, 'bad'), hyper: { positionOffset: 'sometimes' as 'random' } }, data, { io }))
      .rejects.toThrow(/positionOffset must be 'none' or 'random'/);
    await expect(stat(join(dir, 'rl-rand'))).rejects.toThrow(/ENOENT/);
  });
});
