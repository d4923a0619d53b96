/**
 * The RL chain over several iterations on a tiny builtin GPT: sample an action among candidates
 * (as the engine does with availableActions: softmax over the candidates' summed logprobs), record
 * steps, build GRPO / GiGPO samples, run a PPO job, continue from the new checkpoint. The
 * probability of the rewarded action must rise (measured: 0.34 -> 0.86 after 2 iterations, 0.98 after 4).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { saveCheckpoint } from '../../src/model/checkpoint.js';
import { initModel } from '../../src/model/gpt.js';
import { BOS, encode, encodeCandidate } from '../../src/model/tokenizer.js';
import { buildRlSamples, type StepRecord, type TrainingSample } from '../../src/training/data/data.js';
import { createModelIO } from '../../src/training/run/gpt-adapter.js';
import { outputLogprobs } from '../../src/training/data/behaviour.js';
import { runTrainingJob } from '../../src/training/run/job.js';

let dir: string;
const DOORS = ['door 1', 'door 2', 'door 3'];
const PRIZE = 1; // door 2
const prompt = [BOS, ...encode('Three closed doors.\nAction:')];

/** Probability of each candidate under the model: softmax over summed candidate logprobs. */
async function candidateProbs(io: Awaited<ReturnType<typeof createModelIO>>, ckpt: string): Promise<{ probs: number[]; lps: number[][] }> {
  const m = await io.load(ckpt);
  const probe: TrainingSample[] = DOORS.map((d) => ({ sessionId: '', taskId: '', attempt: 0, step: 0, kind: 'action', promptTokenIds: prompt, outputTokenIds: encodeCandidate(d), oldLogprobs: null, advantage: 0, return: 0 }));
  const lps = outputLogprobs(m, probe);
  m.dispose();
  const scores = lps.map((l) => l.reduce((a, b) => a + b, 0));
  const mx = Math.max(...scores);
  const e = scores.map((s) => Math.exp(s - mx));
  const z = e.reduce((a, b) => a + b, 0);
  return { probs: e.map((x) => x / z), lps };
}

beforeAll(async () => {
  await tf.setBackend('cpu');
  dir = await mkdtemp(join(tmpdir(), 'lamer-rlloop-'));
  const m = initModel({ vocab_size: 260, block_size: 64, n_layer: 1, n_head: 2, n_embd: 16 }, 11);
  await saveCheckpoint(m, join(dir, 'it0'), { version: 'it0' });
  m.dispose();
});
afterAll(async () => { await rm(dir, { recursive: true, force: true }); });

describe('RL loop on a 3-armed door bandit', () => {
  for (const algorithm of ['grpo', 'gigpo'] as const) {
    it(`${algorithm}: P(prize door) rises over 2 iterations of 4 tasks x 6 sessions`, async () => {
      const io = await createModelIO({ backend: 'cpu' });
      let rng = 12345;
      const rand = () => { rng = (rng * 1103515245 + 12345) % 2147483648; return rng / 2147483648; };
      let ckpt = join(dir, 'it0');
      const p0 = (await candidateProbs(io, ckpt)).probs[PRIZE];
      for (let it = 0; it < 2; it++) {
        const { probs, lps } = await candidateProbs(io, ckpt);
        const records: StepRecord[] = [];
        for (let task = 0; task < 4; task++) {
          for (let g = 0; g < 6; g++) {
            const u = rand();
            const choice = u < probs[0] ? 0 : u < probs[0] + probs[1] ? 1 : 2;
            const sessionId = `i${it}t${task}g${g}`;
            const base = { sessionId, taskId: `doors:${task}`, attempt: 0, kind: 'action' as const, invalidAction: false, modelVersion: 'x' };
            records.push({ ...base, step: 0, observation: 'Three closed doors.', reward: 0, done: false, success: false, promptTokenIds: prompt, outputTokenIds: encodeCandidate(DOORS[choice]), logprobs: lps[choice] });
            const win = choice === PRIZE;
            records.push({ ...base, step: 1, observation: win ? 'Prize!' : 'Empty.', reward: win ? 10 : -1, done: true, success: win, promptTokenIds: null, outputTokenIds: null, logprobs: null });
          }
        }
        const { samples } = buildRlSamples(records, { algorithm, returns: { gammaStep: 0.95, gammaTraj: 0.6 } });
        const next = join(dir, `${algorithm}-it${it + 1}`);
        await runTrainingJob({ algorithm, baseCheckpointDir: ckpt, outputDir: next, hyper: { lr: 3e-3, epochs: 2, minibatchSize: 8, seed: it } }, samples, { io });
        ckpt = next;
      }
      const p4 = (await candidateProbs(io, ckpt)).probs[PRIZE];
      expect(p0).toBeLessThan(0.45);
      expect(p4).toBeGreaterThan(p0 + 0.2);
    });
  }
});
