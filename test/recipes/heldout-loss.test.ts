/** Held-out loss on demonstrations (heldOutDemoLoss): a tiny real GPT on held-out demonstration sessions, against the SFT loss of the same samples. */
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { heldOutDemoLoss } from '../../src/recipes/heldout-loss.js';
import { generateDemos } from '../../src/envs/demos.js';
import { initModel } from '../../src/model/gpt.js';
import { disposeBatch, makeBatch } from '../../src/training/data/batch.js';
import { trainedTokens } from '../../src/training/data/samples.js';
import { buildSftSamples } from '../../src/training/data/sft-data.js';
import { sftLoss } from '../../src/training/maths/losses.js';
import { GptTrainable } from '../../src/training/run/gpt-adapter.js';

beforeAll(async () => { await tf.setBackend('cpu'); });

describe('heldOutDemoLoss on a tiny real GPT', () => {
  it('runs on held-out demonstrations, finite values near ln(260) at init, the SFT loss of the same samples', async () => {
    const gpt = initModel({ vocab_size: 260, block_size: 384, n_layer: 1, n_head: 2, n_embd: 16 }, 5);
    const model = new GptTrainable(gpt);
    try {
      const before = tf.memory().numTensors;
      const r = await heldOutDemoLoss(model, { env: 'minesweeper', sessions: 2, seed: 3 });
      expect(tf.memory().numTensors).toBe(before);
      const { samples } = buildSftSamples(generateDemos({ env: 'minesweeper', tasks: 2, seed: 3, failRate: 1, seedRange: 'eval' }), { blockSize: 384 });
      const byKind = (kind: string) => samples.filter((s) => s.kind === kind);
      expect(r.sessions).toBe(2);
      expect(r.samples).toEqual({ action: byKind('action').length, reflection: byKind('reflection').length });
      expect(r.samples.reflection).toBeGreaterThan(0);
      for (const kind of ['action', 'reflection'] as const) {
        expect(r[kind].tokens).toBe(byKind(kind).reduce((a, s) => a + trainedTokens(s), 0));
        expect(Number.isFinite(r[kind].natsPerToken)).toBe(true);
        expect(Math.abs(r[kind].natsPerToken! - Math.log(260))).toBeLessThan(0.5);
        // the token-mean SFT loss (src/training/maths/losses.ts) of the same samples in one batch
        const b = makeBatch(byKind(kind), model);
        const sft = tf.tidy(() => sftLoss(model.logits(b.inputs, false), b.targets, b.mask).dataSync()[0]!);
        disposeBatch(b);
        expect(r[kind].natsPerToken).toBeCloseTo(sft, 4);
      }
      await expect(heldOutDemoLoss(model, { env: 'minesweeper', sessions: 1, seed: 0, blockSize: 385 })).rejects.toThrow('blockSize must be an integer in [1, 384], got 385');
    } finally {
      model.dispose();
    }
  }, 180_000); // the cpu backend at block 384: about 70 s on a loaded 2-core machine
});
