/**
 * The compact trainer's example pool (src/recipes/sft-base/pool.ts) and its data thread
 * (src/recipes/sft-base/data-thread.ts): the thread draws exactly the pool's examples for the same
 * seed; a reflection share keeps reflections apart and trains them that often.
 */
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExamplePool, MEMORY_RING, poolRng, REFLECTION_RING, type PoolOptions } from '../../../src/recipes/sft-base/pool.js';
import { DataThread } from '../../../src/recipes/sft-base/data-thread.js';
import type { CompactExample } from '../../../src/training/data/compact-sft.js';
import { initModel, type GPT } from '../../../src/model/gpt.js';
import { GameTokenizer } from '../../../src/model/tokenizers.js';
import { GAME_ENV_TAGS, gameVocabulary } from '../../../src/envs/vocab.js';
import type { CompactPromptFormat } from '../../../src/model/prompt-format.js';

const tok = new GameTokenizer(gameVocabulary());
const format: CompactPromptFormat = { name: 'compact', envTags: [...GAME_ENV_TAGS], historySteps: 0, memoryAt: 'tail' };
const base: PoolOptions = { curriculum: [{ env: 'minesweeper-5x5-3', weight: 1 }, { env: 'sokoban-5x5-1', weight: 1 }], seed: 5, daggerShare: 0.5, balanceReflections: false, reflectionShare: null, memoryWeight: 1, memoryContrast: 0 };
let model: GPT;

beforeAll(async () => {
  await tf.setBackend('cpu');
  await tf.ready();
  model = initModel({ vocab_size: tok.vocabSize, block_size: 384, n_layer: 1, n_head: 2, n_embd: 16 }, 3);
});
afterAll(() => model.dispose());

/** A model that always answers `cell`: ln_f gives the constant v, and only that token's row is v. */
function alwaysClicks(cell: string): GPT {
  const clicker = initModel({ vocab_size: tok.vocabSize, block_size: 384, n_layer: 1, n_head: 2, n_embd: 16 }, 3);
  const ids = tok.encode(cell);
  expect(ids).toHaveLength(1);
  tf.tidy(() => {
    const v = tf.oneHot(0, 16).asType('float32');
    clicker.lnF.g.assign(tf.zerosLike(clicker.lnF.g));
    clicker.lnF.b.assign(v);
    clicker.wte.assign(tf.oneHot(tf.tensor1d([ids[0]!], 'int32'), tok.vocabSize).reshape([tok.vocabSize, 1]).mul(v.mul(50).reshape([1, 16])).add(clicker.wte.mul(0.01)));
  });
  return clicker;
}

describe('ExamplePool', () => {
  it('keeps reflections apart with a reflection share, in a ring of the newest, and draws that share of reflection batches', () => {
    const pool = new ExamplePool({ ...base, reflectionShare: 0.5 }, model, tok, format, poolRng(5), 200);
    pool.refill(false);
    expect(pool.items.length).toBeGreaterThanOrEqual(200);
    expect(pool.items.every((x) => x.kind === 'action')).toBe(true);
    expect(pool.reflections.length).toBeGreaterThan(0);
    expect(pool.reflections.length).toBeLessThanOrEqual(REFLECTION_RING);
    expect(pool.reflections.every((x) => x.kind === 'reflection' && typeof x.failure === 'string')).toBe(true);
    let refl = 0;
    const ringBefore = pool.reflections.length;
    for (let t = 0; t < 400; t++) {
      const batch = pool.take(4);
      expect(new Set(batch.map((x) => x.kind)).size).toBe(1);
      if (batch[0]!.kind === 'reflection') refl++;
      pool.refill(false);
    }
    // binomial(400, 0.5): sd 10
    expect(Math.abs(refl - 200)).toBeLessThan(50);
    // reflection batches leave the ring as it was (reuse); refills only add to it
    expect(pool.reflections.length).toBeGreaterThanOrEqual(ringBefore);
  });

  it('puts memory-weight copies of each decision whose target the memory changes, and one of every other', () => {
    const mine: PoolOptions = { ...base, curriculum: [{ env: 'minesweeper-4x4-2', weight: 1 }] };
    const once = new ExamplePool(mine, model, tok, format, poolRng(8), 300);
    const thrice = new ExamplePool({ ...mine, memoryWeight: 3 }, model, tok, format, poolRng(8), 300);
    once.refill(false);
    thrice.refill(false);
    const count = (p: ExamplePool, f: (x: CompactExample) => boolean) => p.items.filter(f).length;
    const k1 = count(once, (x) => x.memoryMatters === true);
    expect(k1).toBeGreaterThan(0);
    expect(once.items.every((x) => x.memoryMatters !== true || x.kind === 'action')).toBe(true);
    // each such example is in the pool three times (the same object), every other once
    const distinct = new Set(thrice.items.filter((x) => x.memoryMatters));
    expect(count(thrice, (x) => x.memoryMatters === true)).toBe(3 * distinct.size);
    expect(distinct.size).toBeGreaterThan(0);
    expect(new Set(thrice.items.filter((x) => !x.memoryMatters)).size).toBe(count(thrice, (x) => !x.memoryMatters));
  });

  it('with push reflections, labels the Sokoban decisions whose memory names a dead push, weighted as memory decisions', () => {
    const soko: PoolOptions = { ...base, curriculum: [{ env: 'sokoban-5x5-1', weight: 1 }], memoryWeight: 3 };
    const off = new ExamplePool(soko, model, tok, format, poolRng(7), 300);
    off.refill(false);
    expect(off.deadPushExamples).toBe(0);
    expect(off.items.some((x) => x.deadMoves || x.memoryMatters)).toBe(false);
    const on = new ExamplePool({ ...soko, pushReflections: true }, model, tok, format, poolRng(7), 300);
    on.refill(false);
    const labelled = on.items.filter((x) => x.deadMoves);
    expect(on.deadPushExamples).toBeGreaterThan(0);
    // memoryWeight copies of each whose named push is one move away (memoryMatters), one of the others
    const near = new Set(labelled.filter((x) => x.memoryMatters));
    expect(near.size).toBeGreaterThan(0);
    expect(labelled.length).toBe(on.deadPushExamples + 2 * near.size);
    for (const x of labelled) {
      expect(x.memoryMatters === true).toBe(x.deadMoves![0]!.length > 0);
      expect(tok.decode(x.ids)).toMatch(/\nm box \(\d, \d\) (up|down|left|right) dead end\./);
      x.deadMoves!.forEach((set, k) => { for (const v of set) expect(x.targets[k]).not.toContain(v); });
    }
  });

  it('adds memory contrasts once DAgger runs: the memory names the cell the model clicks on that board', () => {
    const mine: PoolOptions = { ...base, curriculum: [{ env: 'minesweeper-4x4-2', weight: 1 }], daggerShare: 0, memoryContrast: 1 };
    const off = new ExamplePool(mine, model, tok, format, poolRng(9), 100);
    off.refill(false);
    expect(off.contrasts).toBe(0);
    const clicker = alwaysClicks('(2, 2)');
    const on = new ExamplePool(mine, clicker, tok, format, poolRng(9), 100);
    on.refill(true);
    clicker.dispose();
    expect(on.contrasts).toBeGreaterThan(0);
    // a contrast is an acting example whose prompt holds one memory line and which is marked
    const marked = on.items.filter((x) => x.memoryMatters && tok.decode(x.ids).includes('was a mine.'));
    expect(marked.length).toBeGreaterThanOrEqual(on.contrasts);
    expect(marked.every((x) => x.kind === 'action')).toBe(true);
    // each contrast's memory names the model's click, mapped by its trial's symmetry: some cell
    expect(marked.some((x) => /\(\d, \d\) was a mine\./.test(tok.decode(x.ids)))).toBe(true);
  });

  it('makes no memory contrasts from DAgger trials while the memory levers are off (--levers-from)', () => {
    const mine: PoolOptions = { ...base, curriculum: [{ env: 'minesweeper-4x4-2', weight: 1 }], daggerShare: 1, memoryContrast: 1, memoryShare: 0.25, memoryPairs: true };
    const clicker = alwaysClicks('(2, 2)');
    const pool = new ExamplePool(mine, clicker, tok, format, poolRng(9), 100);
    pool.refill(true, false);
    expect(pool.daggerTrials).toBeGreaterThan(0);
    expect([pool.contrasts, pool.memory.length]).toEqual([0, 0]);
    pool.items.length = 0;
    pool.refill(true, true);
    clicker.dispose();
    expect(pool.contrasts).toBeGreaterThan(0);
    expect(pool.memory.length).toBeGreaterThan(0);
  });

  it('with a memory share and pairs, keeps contrasts apart, each beside its no-memory twin, and draws that share of memory batches', () => {
    const mine: PoolOptions = { ...base, curriculum: [{ env: 'minesweeper-4x4-2', weight: 1 }], daggerShare: 0, memoryContrast: 1, memoryShare: 0.25, memoryPairs: true };
    const clicker = alwaysClicks('(1, 1)');
    const pool = new ExamplePool(mine, clicker, tok, format, poolRng(11), 300);
    pool.refill(true);
    expect(pool.contrasts).toBeGreaterThan(0);
    // contrasts and twins are in the ring only, two examples per contrast
    expect(pool.memory.length).toBe(2 * pool.contrasts);
    expect(pool.memory.length).toBeLessThanOrEqual(MEMORY_RING);
    expect(pool.items.some((x) => pool.memory.includes(x))).toBe(false);
    for (let i = 0; i < pool.memory.length; i += 2) {
      const [withMemory, twin] = [pool.memory[i]!, pool.memory[i + 1]!];
      expect(tok.decode(withMemory.ids)).toContain('was a mine.');
      expect(tok.decode(twin.ids)).not.toContain('was a mine.');
      // the named cell is the clicked cell mapped by the symmetry: out of the target with the memory,
      // among the targets of the same board without it
      const named = withMemory.namedMines!;
      expect(named).toHaveLength(1);
      expect(withMemory.targets[0]).not.toContain(named[0]);
      expect(twin.targets[0]).toContain(named[0]);
      expect(twin.namedMines).toBeUndefined();
    }
    const ring = new Set(pool.memory);
    let memoryBatches = 0;
    for (let t = 0; t < 400; t++) {
      const batch = pool.take(4);
      if (batch.every((x) => ring.has(x))) memoryBatches++;
      pool.refill(true);
      for (const x of pool.memory) ring.add(x);
    }
    clicker.dispose();
    // binomial(400, 0.25): mean 100, sd 8.7
    expect(memoryBatches).toBeGreaterThan(70);
    expect(memoryBatches).toBeLessThan(130);
  }, 120_000);

  it('without a reflection share, mixes both kinds in one pool and removes what it gives', () => {
    const pool = new ExamplePool(base, model, tok, format, poolRng(5), 200);
    pool.refill(false);
    expect(pool.reflections).toEqual([]);
    expect(pool.items.some((x) => x.kind === 'reflection')).toBe(true);
    const n = pool.items.length;
    const batch = pool.take(8);
    expect(pool.items).toHaveLength(n - batch.length);
  });
});

describe('DataThread', () => {
  it('gives the batches the pool gives in this thread for the same seed, with every field, and passes the trial counters on', async () => {
    const options = { ...base, balanceReflections: true, reflectionShare: 0.3 };
    const local = new ExamplePool(options, model, tok, format, poolRng(options.seed), 128);
    const thread = await DataThread.start(model.config, model.trainableVariables, options, format, 128);
    try {
      const fields = new Set<string>();
      for (let t = 0; t < 4; t++) {
        local.refill(false);
        const want = local.take(6);
        const got = await thread.take(6, false);
        expect(got.examples).toEqual(want);
        for (const x of got.examples) for (const k of Object.keys(x)) fields.add(k);
        expect(got.trials).toBe(local.trials);
        expect(got.daggerTrials).toBe(0);
        expect([got.deadPushExamples, got.pushMemoryTargets]).toEqual([local.deadPushExamples, local.pushMemoryTargets]);
        thread.publish(model.trainableVariables);
      }
      // the optional fields the unlikelihood terms read crossed the thread boundary too
      for (const k of ['invalid', 'invalidMoves', 'provableMines']) expect(fields).toContain(k);
      // DAgger trials in the thread play its copy of the weights (a refill plays trials once the pool is short)
      let dagger = 0;
      for (let t = 0; t < 20 && dagger === 0; t++) dagger = (await thread.take(32, true)).daggerTrials;
      expect(dagger).toBeGreaterThan(0);
    } finally {
      await thread.close();
    }
  }, 120_000);

  it('refuses a model the thread cannot copy (parameter count differs)', async () => {
    const other = initModel({ vocab_size: tok.vocabSize, block_size: 384, n_layer: 1, n_head: 2, n_embd: 32 }, 3);
    try {
      await expect(DataThread.start(model.config, other.trainableVariables, base, format, 16)).rejects.toThrow(/parameters, the trainer has/);
    } finally {
      other.dispose();
    }
  }, 60_000);
});
