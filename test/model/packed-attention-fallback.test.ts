/**
 * The packed attention (src/model/packed-attention.ts) on the wasm backend when the WebAssembly
 * SIMD kernels cannot be instantiated (a runtime without SIMD, a shared memory:
 * src/model/wasm-attention.ts `wasmAttention` returns null, stood in for here by a mock): the
 * kernel runs its JavaScript loops on the wasm heap instead, with the same results, and the
 * serving forward still packs its rows.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import * as tf from '@tensorflow/tfjs';

const wasmAttention = vi.hoisted(() => vi.fn(() => null));
vi.mock('../../src/model/wasm-attention.js', () => ({ wasmAttention }));

import { forward, initModel, type GPT } from '../../src/model/gpt.js';
import { disposeCache, forwardCached, forwardCachedStats } from '../../src/model/gpt-cached.js';
import { attendPacked, packedAttention, simdAttentionAvailable, type PackedLayout } from '../../src/model/packed-attention.js';
import { TINY, useWasm } from './setup.js';

let model: GPT;
beforeAll(async () => {
  expect(await useWasm()).toBe('wasm');
  model = initModel(TINY, 9);
});
afterAll(() => model.dispose());

/** Deterministic pseudo-random floats in [-1, 1). */
function rand(n: number, seed: number): Float32Array {
  let x = seed >>> 0 || 1;
  return Float32Array.from({ length: n }, () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x / 2 ** 31 - 1;
  });
}

describe('packed attention without WebAssembly SIMD', () => {
  it('reports no SIMD on wasm, and the kernel gives the JavaScript loops\' output on the heap (head size 8), leaving no tensor', () => {
    expect(simdAttentionAvailable()).toBe(false);
    const [C, H, nLayer, cap] = [32, 4, 2, 48];
    const rows: Array<[number, number]> = [[0, 9], [12, 3], [6, 1], [30, 14]];
    const ns = rows.map(([, n]) => n);
    const T = ns.reduce((a, b) => a + b, 0);
    const layout: PackedLayout = {
      ns, offsets: ns.map((_, i) => ns.slice(0, i).reduce((a, b) => a + b, 0)), cs: rows.map(([c]) => c),
      bufferOf: rows.map(([c], i) => (c > 0 ? i % 2 : -1)), capacities: [cap, cap], nLayer, nHead: H,
    };
    const qkvVals = rand(T * 3 * C, 5);
    const bufVals = [rand(nLayer * 2 * cap * C, 6), rand(nLayer * 2 * cap * C, 7)];
    const want = new Float32Array(T * C);
    attendPacked(qkvVals, bufVals, want, { ...layout, layer: 1 }); // checked against a plain softmax attention in packed-attention.test.ts
    const before = tf.memory().numTensors;
    const calls = wasmAttention.mock.calls.length;
    const qkv = tf.tensor2d(qkvVals, [T, 3 * C]);
    const bufs = bufVals.map((b) => tf.tensor4d(b, [nLayer, 2, cap, C]));
    const y = tf.tidy(() => packedAttention(qkv, bufs, layout, 1));
    // the kernel asked for the SIMD kernels and was refused
    expect(wasmAttention.mock.calls.length).toBeGreaterThan(calls);
    expect(Array.from(y.dataSync())).toEqual(Array.from(want));
    tf.dispose([qkv, y, ...bufs]);
    expect(tf.memory().numTensors).toBe(before);
  });

  it('forwardCached still packs rows on wasm and gives the logprobs of a full recompute', () => {
    const before = tf.memory().numTensors;
    const packed = forwardCachedStats.packed;
    const ids = Array.from({ length: 30 }, (_, j) => 4 + ((j * 29) % 250));
    const [base] = forwardCached(model, [{ cache: null, tokens: ids.slice(0, 20), allPositions: false, keepCache: true }]);
    const [r] = forwardCached(model, [{ cache: base.cache, tokens: ids.slice(20), allPositions: true, keepCache: false }]);
    expect(forwardCachedStats.packed).toBe(packed + 2);
    const full = tf.tidy(() => tf.logSoftmax(forward(model, tf.tensor2d([ids], [1, ids.length], 'int32')), -1).dataSync() as Float32Array);
    const want = full.slice(20 * TINY.vocab_size);
    let d = 0;
    for (let i = 0; i < want.length; i++) d = Math.max(d, Math.abs(r.logprobs[i] - want[i]));
    expect(d).toBeLessThan(1e-5);
    disposeCache(base.cache);
    expect(tf.memory().numTensors).toBe(before);
  });
});
