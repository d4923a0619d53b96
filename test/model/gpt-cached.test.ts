/**
 * The serving forward (src/model/gpt-cached.ts) in both layouts: packed rows over heap KV buffers
 * (wasm, cpu) and padded rows. Every row of a batch of mixed lengths, caches and outputs must give
 * the logprobs of a full recompute of its sequence; caches appended in place must never change
 * what another cache over the same buffer holds; no tensor is left behind.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { forward, initModel, type GPT } from '../../src/model/gpt.js';
import {
  disposeCache, forwardCached, forwardCachedStats, forwardPacked, forwardPadded, truncateCache, warmUpForward, type CachedRow,
  type CachedRowResult,
} from '../../src/model/gpt-cached.js';
import type { RowCache } from '../../src/model/kv-cache.js';
import { TINY, useWasm } from './setup.js';

let model: GPT;
beforeAll(async () => {
  expect(await useWasm()).toBe('wasm');
  model = initModel(TINY, 5);
});
afterAll(() => model.dispose());

const V = TINY.vocab_size;
const seq = (seed: number, n: number) => Array.from({ length: n }, (_, j) => 4 + ((seed * 37 + j * 11) % 250));
type Forward = (m: GPT, rows: CachedRow[]) => CachedRowResult[];

/** Log-softmax of a full forward of `ids`, `[ids.length, V]` row-major. */
function fullLogprobs(ids: number[]): Float32Array {
  return tf.tidy(() => tf.logSoftmax(forward(model, tf.tensor2d([ids], [1, ids.length], 'int32')), -1).dataSync() as Float32Array);
}

function maxDiff(a: Float32Array, b: Float32Array): number {
  expect(a.length).toBe(b.length);
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i] - b[i]));
  return d;
}

/** The cache of `ids` made by `f` (null for none). */
const prefix = (f: Forward, ids: number[]): RowCache | null =>
  ids.length === 0 ? null : f(model, [{ cache: null, tokens: ids, allPositions: false, keepCache: true }])[0].cache;

/** Checks result `r` of new tokens `seqIds[c..]` against the full recompute of `seqIds`. */
function expectExact(r: CachedRowResult, seqIds: number[], c: number, allPositions: boolean): void {
  const full = fullLogprobs(seqIds);
  const want = allPositions ? full.slice(c * V) : full.slice((seqIds.length - 1) * V);
  expect(maxDiff(r.logprobs, want)).toBeLessThan(1e-5);
}

// (cached, new) per row: decode steps, prompt deltas, a first prompt, a long row, one beyond 32 positions
const MIXED: Array<[number, number]> = [[9, 1], [0, 7], [20, 3], [5, 12], [30, 1], [0, 1], [12, 25], [33, 4]];

describe.each([
  ['packed', forwardPacked as Forward],
  ['padded', forwardPadded as Forward],
])('forward of mixed rows, %s layout', (_name, f) => {
  it('gives every row the logprobs of a full recompute (last position or every one), and continues from its caches', () => {
    const before = tf.memory().numTensors;
    const seqs = MIXED.map(([c, n], i) => seq(i, c + n + 2));
    const bases = MIXED.map(([c], i) => prefix(f, seqs[i].slice(0, c)));
    const rows = MIXED.map(([c, n], i) => ({ cache: bases[i], tokens: seqs[i].slice(c, c + n), allPositions: i % 2 === 1, keepCache: i !== 5 }));
    const out = f(model, rows);
    MIXED.forEach(([c, n], i) => {
      expectExact(out[i], seqs[i].slice(0, c + n), c, rows[i].allPositions);
      expect(out[i].cache === null).toBe(i === 5);
      if (out[i].cache) expect(out[i].cache!.length).toBe(c + n);
    });
    // one more forward of two tokens from every kept cache, batched again
    const next = f(model, MIXED.flatMap(([c, n], i) => (out[i].cache ? [{ cache: out[i].cache, tokens: seqs[i].slice(c + n), allPositions: true, keepCache: false }] : [])));
    let k = 0;
    MIXED.forEach(([c, n], i) => {
      if (out[i].cache) expectExact(next[k++], seqs[i], c + n, true);
    });
    for (const r of [...bases, ...out.map((o) => o.cache)]) disposeCache(r);
    expect(tf.memory().numTensors).toBe(before);
  });

  it('takes the other layout\'s caches and gives the same logprobs', () => {
    const other: Forward = f === (forwardPacked as Forward) ? forwardPadded : forwardPacked;
    const before = tf.memory().numTensors;
    const seqs = [seq(1, 14), seq(2, 6)];
    const bases = [prefix(other, seqs[0].slice(0, 10)), prefix(other, seqs[1].slice(0, 3))];
    const out = f(model, [
      { cache: bases[0], tokens: seqs[0].slice(10), allPositions: true, keepCache: true },
      { cache: bases[1], tokens: seqs[1].slice(3), allPositions: false, keepCache: true },
    ]);
    expectExact(out[0], seqs[0], 10, true);
    expectExact(out[1], seqs[1], 3, false);
    for (const r of [...bases, ...out.map((o) => o.cache)]) disposeCache(r);
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('packed forward over heap KV buffers', () => {
  it('forwardCached packs rows on wasm', () => {
    const n = forwardCachedStats.packed;
    forwardCached(model, [{ cache: null, tokens: [1, 2], allPositions: false, keepCache: false }]);
    expect(forwardCachedStats.packed).toBe(n + 1);
  });

  it('appends in place when nothing else holds the positions, and copies when something does', () => {
    const before = tf.memory().numTensors;
    const ids = seq(7, 40);
    const base = prefix(forwardPacked, ids.slice(0, 10))!;
    // alone on its buffer: the extension is written in place
    const [a] = forwardPacked(model, [{ cache: base, tokens: ids.slice(10, 12), allPositions: false, keepCache: true }]);
    expect(a.cache!.heapKV).toBe(base.heapKV);
    // `a` holds positions 10-11 of that buffer now: extending `base` again must not overwrite them
    const other = seq(8, 3);
    const [b] = forwardPacked(model, [{ cache: base, tokens: other, allPositions: false, keepCache: true }]);
    expect(b.cache!.heapKV).not.toBe(base.heapKV);
    expectExact(b, [...ids.slice(0, 10), ...other], 10, false);
    const [a2] = forwardPacked(model, [{ cache: a.cache, tokens: ids.slice(12, 13), allPositions: false, keepCache: false }]);
    expectExact(a2, ids.slice(0, 13), 12, false);
    // two rows extending the same cache in one forward, and a truncated cache sharing the buffer
    const cut = truncateCache(a.cache!, 6)!;
    expect(cut.heapKV).toBe(base.heapKV);
    const both = forwardPacked(model, [
      { cache: cut, tokens: ids.slice(6, 9), allPositions: true, keepCache: true },
      { cache: a.cache, tokens: ids.slice(12, 40), allPositions: true, keepCache: true }, // grows past 32 positions
      { cache: cut, tokens: other, allPositions: false, keepCache: true },
    ]);
    expectExact(both[0], ids.slice(0, 9), 6, true);
    expectExact(both[1], ids.slice(0, 40), 12, true);
    expectExact(both[2], [...ids.slice(0, 6), ...other], 6, false);
    expect(both[1].cache!.heapKV!.capacity).toBeGreaterThanOrEqual(40);
    // every cache still reads back what it held
    const checks: Array<[RowCache, number[]]> = [[base, ids.slice(0, 10)], [a.cache!, ids.slice(0, 12)], [b.cache!, [...ids.slice(0, 10), ...other]], [cut, ids.slice(0, 6)]];
    for (const [cache, held] of checks) {
      const [r] = forwardPacked(model, [{ cache, tokens: [99], allPositions: false, keepCache: false }]);
      expectExact(r, [...held, 99], held.length, false);
    }
    for (const c of [base, a.cache, b.cache, cut, ...both.map((r) => r.cache)]) disposeCache(c);
    expect(tf.memory().numTensors).toBe(before);
  });

  it('keeps tensors and bytes flat over 150 packed forwards of sessions that grow, refit, score candidates and restart', () => {
    const before = tf.memory();
    const packedBefore = forwardCachedStats.packed;
    const { n_layer, n_embd, block_size } = TINY;
    const bufferBytes = n_layer * 2 * block_size * n_embd * 4; // the largest heap buffer
    let x = 12345;
    const rnd = (k: number) => {
      x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
      return x % k;
    };
    // 8 sessions, each its tokens so far and the cache over them (what the engine keeps per session)
    const sessions = Array.from({ length: 8 }, () => ({ ids: [] as number[], cache: null as RowCache | null }));
    for (let round = 0; round < 150; round++) {
      const picked = sessions.filter(() => rnd(3) > 0);
      const rows: CachedRow[] = [];
      const updates: Array<() => void> = [];
      for (const s of picked) {
        const kind = rnd(4);
        if (kind === 0 && s.cache) {
          // candidate scoring: three rows over the same cache, none kept
          for (let k = 0; k < 3; k++) rows.push({ cache: s.cache, tokens: seq(round + k, 1 + k), allPositions: true, keepCache: false });
          continue;
        }
        // a refit: drop the last few positions, then extend from there
        if (kind === 1 && s.cache && s.cache.length > 4) {
          const cut = truncateCache(s.cache, s.cache.length - 3);
          disposeCache(s.cache);
          s.cache = cut;
          s.ids = s.ids.slice(0, s.ids.length - 3);
        }
        const add = seq(round * 8 + rnd(50), kind === 2 ? 1 : 2 + rnd(8));
        if (s.ids.length + add.length > block_size - 3) {
          // the session ends (room is kept for three candidate tokens); a new one starts on its slot
          disposeCache(s.cache);
          s.cache = null;
          s.ids = [];
        }
        const at = rows.push({ cache: s.cache, tokens: add, allPositions: false, keepCache: true }) - 1;
        updates.push(() => {
          disposeCache(s.cache);
          s.cache = out[at].cache;
          s.ids = [...s.ids, ...add];
        });
      }
      if (rows.length === 0) continue;
      const out = forwardPacked(model, rows);
      for (const u of updates) u();
      // held: at most one heap buffer per live cache, each at most a full-context buffer
      const live = sessions.filter((s) => s.cache).length;
      expect(tf.memory().numTensors - before.numTensors).toBeLessThanOrEqual(live);
      expect(tf.memory().numBytes - before.numBytes).toBeLessThanOrEqual(live * bufferBytes);
    }
    expect(forwardCachedStats.packed - packedBefore).toBeGreaterThanOrEqual(100);
    // after all those in-place appends, every live cache still holds its session's keys and values
    for (const s of sessions.filter((s) => s.cache)) {
      const [r] = forwardPacked(model, [{ cache: s.cache, tokens: [99], allPositions: false, keepCache: false }]);
      expectExact(r, [...s.ids, 99], s.ids.length, false);
    }
    for (const s of sessions) disposeCache(s.cache);
    expect(tf.memory().numTensors).toBe(before.numTensors);
    expect(tf.memory().numBytes).toBe(before.numBytes);
  });

  it('refuses rows without tokens or beyond block_size, leaving no tensor', () => {
    const before = tf.memory().numTensors;
    expect(() => forwardPacked(model, [{ cache: null, tokens: [], allPositions: false, keepCache: true }])).toThrow('a row needs at least one new token');
    expect(() => forwardPacked(model, [{ cache: null, tokens: seq(1, TINY.block_size + 1), allPositions: false, keepCache: true }])).toThrow(
      `${TINY.block_size + 1} positions exceed block_size ${TINY.block_size}`,
    );
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('warmUpForward', () => {
  it('runs the serving shapes once, leaves no tensor, and changes no later result', () => {
    const rows = [{ cache: null, tokens: seq(3, 9), allPositions: true, keepCache: false }];
    const before = forwardCached(model, rows)[0]!.logprobs;
    const tensors = tf.memory().numTensors;
    expect(warmUpForward(model)).toBeGreaterThanOrEqual(0);
    expect(warmUpForward(model, 3, TINY.block_size, TINY.block_size)).toBeGreaterThanOrEqual(0); // lengths fitted to the context
    expect(tf.memory().numTensors).toBe(tensors);
    expect(forwardCached(model, rows)[0]!.logprobs).toEqual(before);
  });
});
