import { describe, expect, it } from 'vitest';
import { packRun } from '../../../src/training/data/packing.js';

const E = 256; // stands for the EOS that ends an answer

describe('packRun', () => {
  it('lays each tail and shown output after the first prompt; an unshown last token trains where the next tail starts', () => {
    const p = packRun([1, 2], [
      { prompt: [1, 2], output: [10, 11, E], shown: 2, trained: true },
      { prompt: [1, 2, 10, 11, 20, 21], output: [30, E], shown: 2, trained: true },
    ]);
    expect(p.tokens).toEqual([10, 11, 20, 21, 30, E]);
    expect(p.targets).toEqual([10, 11, E, -1, 30, E]);
    expect(p.sources).toEqual([{ turn: 0, token: 0 }, { turn: 0, token: 1 }, { turn: 0, token: 2 }, null, { turn: 1, token: 0 }, { turn: 1, token: 1 }]);
    expect(p.starts).toEqual([0, 4]);
  });

  it('keeps an untrained turn as context: its tokens and its unshown last token train nothing', () => {
    const p = packRun([1], [
      { prompt: [1], output: [10, E], shown: 1, trained: true },
      { prompt: [1, 10, 5], output: [11, E], shown: 1, trained: false },
      { prompt: [1, 10, 5, 11, 6], output: [12], shown: 1, trained: true },
    ]);
    expect(p.tokens).toEqual([10, 5, 11, 6, 12]);
    expect(p.targets).toEqual([10, E, -1, -1, 12]);
    expect(p.sources).toEqual([{ turn: 0, token: 0 }, { turn: 0, token: 1 }, null, null, { turn: 2, token: 0 }]);
    expect(p.starts).toEqual([0, 2, 4]);
  });

  it('drops an unshown last token that has no tail to train at (empty tail, or no turn follows)', () => {
    const p = packRun([1], [
      { prompt: [1], output: [10, E], shown: 1, trained: true },
      { prompt: [1, 10], output: [11, E], shown: 1, trained: true },
    ]);
    expect(p.tokens).toEqual([10, 11]);
    expect(p.targets).toEqual([10, 11]);
    expect(p.starts).toEqual([0, 1]);
  });
});
