/**
 * ForwardBatcher's forward sections: a group runs in sections of at most `maxSectionTokens` padded
 * tokens (a long row split along its tokens over the cache of its earlier part), the event loop
 * gets turns between sections, the results equal those of one unsplit forward, and no tensor is
 * left behind, also when a section fails or the batcher closes between sections. The section plan,
 * the turns and the time target's bound on their own: test/model/forward-sections.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { ForwardBatcher, MIN_TIMED_SECTION_TOKENS } from '../../src/model/batcher.js';
import { disposeCache, forwardCached, type CachedRow, type CachedRowResult } from '../../src/model/gpt-cached.js';
import { initModel, type GPT } from '../../src/model/gpt.js';
import { TINY, useWasm } from './setup.js';

let model: GPT;
beforeAll(async () => {
  expect(await useWasm()).toBe('wasm');
  model = initModel(TINY, 11);
});
afterAll(() => model.dispose());

const fakeRow = (n: number) => ({ cache: null, tokens: new Array<number>(n).fill(5), allPositions: false, keepCache: false }) as CachedRow;
const padded = (rows: CachedRow[]) => rows.length * Math.max(...rows.map((r) => r.tokens.length));
const seq = (seed: number, n: number) => Array.from({ length: n }, (_, j) => 4 + ((seed * 37 + j * 11) % 250));

describe('ForwardBatcher sections', () => {
  it('refuses a section bound below 1 and a negative time target', () => {
    expect(() => new ForwardBatcher(() => [], { windowMs: 0, maxBatchSize: 4, maxSectionTokens: 0 })).toThrow('maxSectionTokens must be >= 1, got 0');
    expect(() => new ForwardBatcher(() => [], { windowMs: 0, maxBatchSize: 1, sectionTargetMs: -1 })).toThrow(/sectionTargetMs/);
  });

  it('no forward goes over the bound, and callbacks queued meanwhile run between sections', async () => {
    const calls: CachedRow[][] = [];
    const order: string[] = [];
    const b = new ForwardBatcher(
      (rows) => {
        calls.push(rows);
        order.push('forward');
        return rows.map(() => ({ logprobs: new Float32Array(1), cache: null }));
      },
      { windowMs: 0, maxBatchSize: 32, maxSectionTokens: 16 },
    );
    // 6 requests of 6 tokens (2 fit a section) and one of 40 (split in 3 parts)
    const reqs = [...Array.from({ length: 6 }, () => [fakeRow(6)]), [fakeRow(40)]].map((rows) => b.submit(rows));
    let ticks = 0;
    const tick = () => {
      order.push('io');
      if (++ticks < 50) setImmediate(tick);
    };
    setImmediate(tick);
    await Promise.all(reqs);
    for (const rows of calls) expect(padded(rows)).toBeLessThanOrEqual(16);
    expect(calls.map((rows) => rows.map((r) => r.tokens.length))).toEqual([[6, 6], [6, 6], [6, 6], [13], [13], [14]]);
    // between two forwards the event loop turned at least once
    for (let i = 1; i < order.length; i++) if (order[i] === 'forward') expect(order[i - 1]).toBe('io');
    expect(b.stats.forwards).toBe(6);
  });


  it('with a time target, sections shrink as forwards get slower per token and grow back as they get faster', async () => {
    let clock = 0;
    let msPerToken = 0.1;
    const calls: number[] = [];
    const b = new ForwardBatcher(
      (rows) => {
        const tokens = rows.reduce((n, r) => n + r.tokens.length, 0);
        calls.push(tokens);
        clock += tokens * msPerToken; // the fake clock: the forward's cost
        return rows.map(() => ({ logprobs: new Float32Array(1), cache: null }));
      },
      { windowMs: 0, maxBatchSize: 64, maxSectionTokens: 512, sectionTargetMs: 40, packedRows: true, now: () => clock },
    );
    const run = (n: number) => Promise.all(Array.from({ length: n }, () => b.submit([fakeRow(10)])));
    await run(32); // 320 tokens at 0.1 ms each: one section (the bound is 400 tokens)
    expect(calls).toEqual([320]);
    expect(b.sectionBound).toBe(400);
    msPerToken = 1; // the machine got 10x slower
    for (let i = 0; i < 12; i++) await run(32);
    expect(b.sectionBound).toBe(MIN_TIMED_SECTION_TOKENS); // 40 ms / 1 ms per token, raised to the floor
    expect(Math.max(...calls.slice(-5))).toBeLessThanOrEqual(MIN_TIMED_SECTION_TOKENS);
    msPerToken = 0.05;
    for (let i = 0; i < 12; i++) await run(32);
    expect(b.sectionBound).toBe(512);
    expect(calls.at(-1)).toBe(320);
  });

  it('with packed rows, groups requests of every kind in queue order; padded, it keeps decode steps apart from prompts', async () => {
    const shapes = async (packedRows: boolean) => {
      const calls: number[][] = [];
      const b = new ForwardBatcher(
        (rows) => {
          calls.push(rows.map((r) => r.tokens.length));
          return rows.map(() => ({ logprobs: new Float32Array(1), cache: null }));
        },
        { windowMs: 0, maxBatchSize: 6, maxSectionTokens: 64, packedRows },
      );
      // decode steps, prompt deltas of different lengths, a request of two candidate rows
      await Promise.all([[1], [30], [1], [3], [2, 9], [1], [1]].map((lens) => b.submit(lens.map(fakeRow))));
      return calls;
    };
    // packed: 6 rows at most per group, one section of 46 real tokens; padded: 4 decode rows, then prompts while rows x longest <= 64
    expect(await shapes(true)).toEqual([[1, 30, 1, 3, 2, 9], [1, 1]]);
    expect(await shapes(false)).toEqual([[1, 1, 1, 1], [30, 3], [2, 9]]);
  });

  it('results equal one unsplit forward within 1e-5 (split rows, caches, every position or the last), and leave no tensor', async () => {
    const before = tf.memory().numTensors;
    const prefix = forwardCached(model, [{ cache: null, tokens: seq(1, 20), allPositions: false, keepCache: true }])[0].cache!;
    const rows: CachedRow[] = [
      { cache: prefix, tokens: seq(2, 30), allPositions: true, keepCache: true },
      { cache: null, tokens: seq(3, 7), allPositions: false, keepCache: true },
      { cache: null, tokens: seq(4, 41), allPositions: false, keepCache: true },
      { cache: prefix, tokens: seq(5, 3), allPositions: true, keepCache: false },
    ];
    const whole = forwardCached(model, rows);
    const b = new ForwardBatcher((r) => forwardCached(model, r), { windowMs: 0, maxBatchSize: 32, maxSectionTokens: 9 });
    const split = (await Promise.all([b.submit([rows[0], rows[1]]), b.submit([rows[2]]), b.submit([rows[3]])])).flat();
    expect(b.stats.forwards).toBeGreaterThan(8);
    split.forEach((r, i) => {
      expect(r.logprobs.length).toBe(whole[i].logprobs.length);
      let worst = 0;
      r.logprobs.forEach((x, k) => (worst = Math.max(worst, Math.abs(x - whole[i].logprobs[k]))));
      expect(worst).toBeLessThanOrEqual(1e-5);
      expect(r.cache?.length ?? 0).toBe(whole[i].cache?.length ?? 0);
    });
    // the kept caches continue alike: one more token over each
    for (const i of [0, 1, 2]) {
      const next = (c: CachedRowResult) => forwardCached(model, [{ cache: c.cache, tokens: [9], allPositions: false, keepCache: false }])[0].logprobs;
      const a = next(split[i]);
      const w = next(whole[i]);
      a.forEach((x, k) => expect(Math.abs(x - w[k])).toBeLessThanOrEqual(1e-5));
    }
    for (const r of [...split, ...whole]) disposeCache(r.cache);
    disposeCache(prefix);
    expect(tf.memory().numTensors).toBe(before);
  });

  it('a section that fails rejects the whole group and disposes the caches made for it', async () => {
    const before = tf.memory().numTensors;
    let n = 0;
    const b = new ForwardBatcher(
      (rows) => {
        if (++n === 3) throw new Error('backend broke');
        return forwardCached(model, rows);
      },
      { windowMs: 0, maxBatchSize: 32, maxSectionTokens: 8 },
    );
    const rows: CachedRow[] = [
      { cache: null, tokens: seq(6, 4), allPositions: false, keepCache: true },
      { cache: null, tokens: seq(7, 30), allPositions: true, keepCache: true },
    ];
    await expect(b.submit(rows)).rejects.toThrow('backend broke');
    expect(tf.memory().numTensors).toBe(before);
    // the batcher goes on with the next request
    const [r] = await b.submit([{ cache: null, tokens: seq(8, 3), allPositions: false, keepCache: false }]);
    expect(r.logprobs.length).toBe(TINY.vocab_size);
  });

  it('close between two sections rejects the running group with its error, leaving no tensor', async () => {
    const before = tf.memory().numTensors;
    const b = new ForwardBatcher((rows) => forwardCached(model, rows), { windowMs: 0, maxBatchSize: 32, maxSectionTokens: 4 });
    const running = b.submit([{ cache: null, tokens: seq(9, 40), allPositions: true, keepCache: true }]).catch((e: Error) => e);
    const queued = b.submit([{ cache: null, tokens: seq(10, 5), allPositions: false, keepCache: false }]).catch((e: Error) => e);
    await new Promise((r) => setImmediate(r));
    b.close(new Error('model unloaded'));
    expect(await running).toEqual(new Error('model unloaded'));
    expect(await queued).toEqual(new Error('model unloaded'));
    expect(b.stats.forwards).toBeGreaterThanOrEqual(1);
    expect(b.stats.forwards).toBeLessThan(10);
    expect(tf.memory().numTensors).toBe(before);
  });
});
