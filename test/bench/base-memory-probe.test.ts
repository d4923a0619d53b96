/**
 * bench/base-memory-probe.ts on a tiny random compact model: both probes count what they should and
 * give probabilities; an untrained model is near chance on the copy and indifferent to memory.
 */
import * as tf from '@tensorflow/tfjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { probe } from '../../bench/base-memory-probe.js';
import { initModel } from '../../src/model/gpt.js';
import { GameTokenizer } from '../../src/model/tokenizers.js';
import { GAME_ENV_TAGS, gameVocabulary } from '../../src/envs/vocab.js';

beforeAll(async () => { await tf.setBackend('cpu'); await tf.ready(); });

describe('base memory probe', () => {
  it('measures the copy of the mine cell and the effect of a memory line', () => {
    const tok = new GameTokenizer(gameVocabulary());
    const model = initModel({ vocab_size: tok.vocabSize, block_size: 384, n_layer: 1, n_head: 2, n_embd: 16 }, 7);
    try {
      const r = probe(model, { name: 'compact', envTags: [...GAME_ENV_TAGS], historySteps: 0, memoryAt: 'tail' }, tok, 6, 'tiny');
      expect(r.model).toBe('tiny');
      expect(r.reflection.prompts).toBeGreaterThan(0);
      // a random model spreads its mass over the whole vocabulary: far below even the 36-cell chance
      expect(r.reflection.meanLogprob).toBeLessThan(Math.log(1 / 36));
      expect(r.reflection.top1).toBeGreaterThanOrEqual(0);
      expect(r.reflection.top1).toBeLessThanOrEqual(1);
      // boards whose favourite token is a cell; the probabilities are of that token
      expect(r.acting.boards).toBeLessThanOrEqual(6);
      if (r.acting.boards > 0) {
        expect(r.acting.pBefore).toBeGreaterThan(0);
        expect(r.acting.pBefore).toBeLessThan(1);
        expect(r.acting.pAfter).toBeGreaterThan(0);
      }
    } finally {
      model.dispose();
    }
  }, 120_000);
});
