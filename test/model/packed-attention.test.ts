/**
 * The packed attention kernel (src/model/packed-attention.ts) against a plain per-row, per-head
 * softmax attention written out here, on random packed rows over random KV buffers, as a pure
 * function and as the registered kernel of the wasm and cpu backends.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { attendPacked, packedAttention, simdAttentionAvailable, type PackedLayout } from '../../src/model/packed-attention.js';
import { useWasm } from './setup.js';

beforeAll(async () => {
  expect(await useWasm()).toBe('wasm');
});
afterAll(async () => {
  await tf.setBackend('wasm');
});

/** Deterministic pseudo-random floats in [-1, 1). */
function rand(n: number, seed: number): Float32Array {
  let x = seed >>> 0 || 1;
  return Float32Array.from({ length: n }, () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x / 2 ** 31 - 1;
  });
}

interface Case {
  layout: PackedLayout;
  layer: number;
  C: number;
  qkv: Float32Array;
  buffers: Float32Array[];
}

/** Rows (cached, new) on `nBuffers` buffers of `cap` positions; row i reads buffer i % nBuffers. */
function makeCase(rows: Array<[number, number]>, C: number, nHead: number, nLayer: number, cap: number, seed: number): Case {
  const nBuffers = 2;
  const ns = rows.map(([, n]) => n);
  const offsets = ns.map((_, i) => ns.slice(0, i).reduce((a, b) => a + b, 0));
  const T = ns.reduce((a, b) => a + b, 0);
  const layout: PackedLayout = {
    ns, offsets, cs: rows.map(([c]) => c), bufferOf: rows.map(([c], i) => (c > 0 ? i % nBuffers : -1)),
    capacities: [cap, cap], nLayer, nHead,
  };
  const buffers = [0, 1].map((b) => rand(nLayer * 2 * cap * C, seed + 10 + b));
  return { layout, layer: nLayer - 1, C, qkv: rand(T * 3 * C, seed), buffers };
}

/** softmax(q k^T / sqrt(hd)) v per row and head, keys = cached then new up to the query. */
function reference(k: Case): Float64Array {
  const { layout: a, C, qkv, buffers, layer } = k;
  const hd = C / a.nHead;
  const T = a.ns.reduce((x, y) => x + y, 0);
  const out = new Float64Array(T * C);
  a.ns.forEach((n, i) => {
    const c = a.cs[i];
    const cap = a.capacities[Math.max(0, a.bufferOf[i])];
    const key = (t: number, kv: number, d: number) =>
      t < c ? buffers[a.bufferOf[i]][((layer * 2 + kv) * cap + t) * C + d] : qkv[(a.offsets[i] + t - c) * 3 * C + (kv + 1) * C + d];
    for (let j = 0; j < n; j++) {
      for (let h = 0; h < a.nHead; h++) {
        const s: number[] = [];
        for (let t = 0; t <= c + j; t++) {
          let dot = 0;
          for (let d = 0; d < hd; d++) dot += qkv[(a.offsets[i] + j) * 3 * C + h * hd + d] * key(t, 0, h * hd + d);
          s.push(dot / Math.sqrt(hd));
        }
        const m = Math.max(...s);
        const e = s.map((x) => Math.exp(x - m));
        const z = e.reduce((x, y) => x + y, 0);
        for (let d = 0; d < hd; d++) {
          let y = 0;
          e.forEach((w, t) => (y += (w / z) * key(t, 1, h * hd + d)));
          out[(a.offsets[i] + j) * C + h * hd + d] = y;
        }
      }
    }
  });
  return out;
}

const CASES: Array<[string, Array<[number, number]>, number, number]> = [
  ['decode rows over caches', [[5, 1], [17, 1], [1, 1]], 32, 4],
  ['mixed prompts, decodes and first prompts', [[0, 9], [12, 3], [6, 1], [0, 1], [30, 14]], 32, 4],
  ['one head, odd sizes', [[3, 5], [0, 2], [7, 7]], 12, 1],
];

describe('attendPacked', () => {
  it.each(CASES)('equals per-row softmax attention: %s', (_name, rows, C, H) => {
    const k = makeCase(rows, C, H, 2, 48, 7);
    const out = new Float32Array(k.qkv.length / 3);
    attendPacked(k.qkv, k.buffers, out, { ...k.layout, layer: k.layer });
    const want = reference(k);
    let d = 0;
    for (let i = 0; i < out.length; i++) d = Math.max(d, Math.abs(out[i] - want[i]));
    expect(d).toBeLessThan(1e-6);
  });

  // the wasm backend runs head sizes that are multiples of 4 in WebAssembly SIMD, others in JS
  it.each([
    ['wasm', 32, 4, 1], ['wasm', 32, 4, 40], ['wasm', 12, 2, 1], ['cpu', 32, 4, 1], ['cpu', 32, 4, 40],
  ])('runs as the registered kernel of the %s backend (C %i, %i heads, queries x%i), tensors unchanged and none left', async (backend, C, H, qScale) => {
    await tf.setBackend(backend);
    expect(simdAttentionAvailable()).toBe(backend === 'wasm');
    const k = makeCase(CASES[1][1], C, H, 2, 48, 3);
    // large queries make scores span hundreds: the softmax must stay exact there too
    for (let t = 0; t < k.qkv.length; t += 3 * C) for (let d = 0; d < C; d++) k.qkv[t + d] *= qScale;
    const before = tf.memory().numTensors;
    const T = k.qkv.length / (3 * C);
    const qkv = tf.tensor2d(k.qkv, [T, 3 * C]);
    const bufs = k.buffers.map((b) => tf.tensor4d(b, [2, 2, 48, C]));
    const y = tf.tidy(() => packedAttention(qkv, bufs, k.layout, k.layer));
    expect(y.shape).toEqual([T, C]);
    const got = y.dataSync();
    const want = reference(k);
    let d = 0;
    for (let i = 0; i < got.length; i++) d = Math.max(d, Math.abs(got[i] - want[i]));
    expect(d).toBeLessThan(2e-6);
    expect(Array.from(bufs[0].dataSync())).toEqual(Array.from(k.buffers[0]));
    expect(Array.from(qkv.dataSync())).toEqual(Array.from(k.qkv));
    tf.dispose([qkv, y, ...bufs]);
    expect(tf.memory().numTensors).toBe(before);
  });
});
