import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { countParams, forward, initModel, modelFromTensors, tokenEntropy, tokenLogprobs, type GPT } from '../../src/model/gpt.js';
import { block, layerNorm } from '../../src/model/layers.js';
import { disposeCache, forwardCached } from '../../src/model/gpt-cached.js';
import { loadCheckpoint, saveCheckpoint } from '../../src/model/checkpoint.js';
import { TINY, useWasm } from './setup.js';

let model: GPT;
beforeAll(async () => {
  expect(await useWasm()).toBe('wasm');
  model = initModel(TINY, 7);
});
afterAll(() => model.dispose());

function logitsOf(m: GPT, ids: number[]): Float32Array {
  return tf.tidy(() => forward(m, tf.tensor2d([ids], [1, ids.length], 'int32')).dataSync() as Float32Array);
}

describe('GPT model', () => {
  it('has the documented shapes and parameter count', () => {
    const seq = [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]];
    const logits = forward(model, tf.tensor2d(seq, [2, 5], 'int32'));
    expect(logits.shape).toEqual([2, 5, 260]);
    logits.dispose();
    const lp = tokenLogprobs(model, tf.tensor2d(seq, [2, 5], 'int32'));
    expect(lp.shape).toEqual([2, 4]);
    const ent = tokenEntropy(model, tf.tensor2d(seq, [2, 5], 'int32'));
    expect(ent.shape).toEqual([2, 4]);
    // An untrained model is near uniform: entropy close to ln(260) = 5.56.
    for (const e of ent.dataSync()) expect(Math.abs(e - Math.log(260))).toBeLessThan(0.05);
    lp.dispose();
    ent.dispose();
    // wte 260*32 + wpe 64*32 + 2 * (12,448 per block) + ln_f 64
    expect(countParams(TINY)).toBe(260 * 32 + 64 * 32 + 2 * (4 * 32 + 32 * 96 + 96 + 32 * 32 + 32 + 32 * 128 + 128 + 128 * 32 + 32) + 64);
  });

  it('is causal: changing a future token never changes an earlier logit', () => {
    const a = [256, 10, 20, 30, 40, 50, 60, 70];
    const base = logitsOf(model, a);
    for (const t of [1, 4, 7]) {
      const b = a.slice();
      b[t] = (b[t] + 101) % 256;
      const changed = logitsOf(model, b);
      const V = 260;
      expect(Array.from(changed.subarray(0, t * V))).toEqual(Array.from(base.subarray(0, t * V)));
      // ...while the logits at the changed position do change.
      let diff = 0;
      for (let i = t * V; i < (t + 1) * V; i++) diff = Math.max(diff, Math.abs(changed[i] - base[i]));
      expect(diff).toBeGreaterThan(1e-4);
    }
  });

  it('KV-cached generation gives the same logprobs as a full recompute', () => {
    const ids = [256, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100];
    const full = tf.tidy(() => tf.logSoftmax(forward(model, tf.tensor2d([ids], [1, ids.length], 'int32')), -1).dataSync() as Float32Array);
    const V = 260;
    // Prefill 5 tokens, then one token at a time, then 3 at once.
    let r = forwardCached(model, [{ cache: null, tokens: ids.slice(0, 5), allPositions: true, keepCache: true }])[0];
    const got: number[] = Array.from(r.logprobs);
    let cache = r.cache;
    let pos = 5;
    for (const n of [1, 1, 1, 1, 3, 1]) {
      r = forwardCached(model, [{ cache, tokens: ids.slice(pos, pos + n), allPositions: true, keepCache: true }])[0];
      disposeCache(cache);
      cache = r.cache;
      got.push(...r.logprobs);
      pos += n;
    }
    disposeCache(cache);
    expect(pos).toBe(ids.length);
    expect(got.length).toBe(ids.length * V);
    let maxDiff = 0;
    for (let i = 0; i < got.length; i++) maxDiff = Math.max(maxDiff, Math.abs(got[i] - full[i]));
    expect(maxDiff).toBeLessThan(1e-4);
  });

  it('batched rows with different cache and token lengths equal their unbatched results', () => {
    const seqs = [[256, 1, 2, 3, 4, 5, 6], [256, 9, 8], [256, 40, 41, 42, 43, 44, 45, 46, 47, 48]];
    const splits = [4, 1, 6];
    const prefills = seqs.map((s, i) => forwardCached(model, [{ cache: null, tokens: s.slice(0, splits[i]), allPositions: false, keepCache: true }])[0]);
    const single = seqs.map((s, i) => forwardCached(model, [{ cache: prefills[i].cache, tokens: s.slice(splits[i]), allPositions: true, keepCache: false }])[0]);
    const batched = forwardCached(model, seqs.map((s, i) => ({ cache: prefills[i].cache, tokens: s.slice(splits[i]), allPositions: true, keepCache: false })));
    for (let i = 0; i < seqs.length; i++) {
      expect(batched[i].logprobs.length).toBe(single[i].logprobs.length);
      let d = 0;
      for (let j = 0; j < single[i].logprobs.length; j++) d = Math.max(d, Math.abs(batched[i].logprobs[j] - single[i].logprobs[j]));
      expect(d).toBeLessThan(1e-5);
      disposeCache(prefills[i].cache);
    }
  });

  it('a tiny model overfits a fixed sequence in a few dozen Adam steps (one training step runs on wasm)', () => {
    const m = initModel(TINY, 3);
    const text = [256, ...Array.from(Buffer.from('the cat sat on the mat.')), 257];
    const tokens = tf.tensor2d([text], [1, text.length], 'int32');
    const opt = tf.train.adam(1e-2);
    const before = tf.memory().numTensors;
    let first = 0;
    let last = 0;
    for (let step = 0; step < 40; step++) {
      const { value, grads } = tf.variableGrads(() => tf.neg(tf.mean(tokenLogprobs(m, tokens))) as tf.Scalar, m.trainableVariables);
      if (step === 0) {
        // every parameter gets a finite, non-zero gradient (forward and backward ops all ran on wasm)
        for (const v of m.trainableVariables) {
          const g = grads[v.name].dataSync();
          expect(g.every(Number.isFinite)).toBe(true);
          expect([v.name, g.some((x) => x !== 0)]).toEqual([v.name, true]);
        }
      }
      opt.applyGradients(grads as Parameters<typeof opt.applyGradients>[0]);
      const loss = value.dataSync()[0];
      if (step === 0) first = loss;
      last = loss;
      value.dispose();
      tf.dispose(grads);
    }
    expect(first).toBeGreaterThan(5); // ~ln(260)
    expect(last).toBeLessThan(0.5);
    // no tensor leak per step beyond the optimizer's fixed state (2 moments per variable + 2 scalars)
    expect(tf.memory().numTensors - before).toBeLessThanOrEqual(2 * m.trainableVariables.length + 4);
    opt.dispose();
    tokens.dispose();
    m.dispose();
  });

  it('checkpoint save/load round-trip gives identical logits', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'lamer-ckpt-'));
    try {
      await saveCheckpoint(model, dir, { version: 'v-test', seed: 7 });
      expect((await stat(path.join(dir, 'weights.bin'))).size).toBe(countParams(TINY) * 4);
      const { model: m2, metadata } = await loadCheckpoint(dir);
      expect(metadata.version).toBe('v-test');
      expect(metadata.config).toEqual(TINY);
      expect(metadata.meta).toEqual({ seed: 7 });
      expect(metadata.tokenizer.vocabSize).toBe(260);
      const ids = [256, 5, 6, 7, 200, 100];
      expect(Array.from(logitsOf(m2, ids))).toEqual(Array.from(logitsOf(model, ids)));
      m2.dispose();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('initModel is reproducible for a fixed seed', () => {
    const a = initModel(TINY, 11);
    const b = initModel(TINY, 11);
    const c = initModel(TINY, 12);
    const ids = [256, 1, 2];
    expect(Array.from(logitsOf(a, ids))).toEqual(Array.from(logitsOf(b, ids)));
    expect(Array.from(logitsOf(a, ids))).not.toEqual(Array.from(logitsOf(c, ids)));
    a.dispose(); b.dispose(); c.dispose();
  });
});

/**
 * The forward pass written out by hand (nanoGPT's model.py), with every row's positions given:
 * x = wte[ids] + wpe[offsets[b] + t], the blocks, ln_f, the tied head. `[B, T]` -> logits `[B, T, V]`.
 */
function referenceLogits(m: GPT, ids: number[][], offsets: number[]): Float32Array {
  return tf.tidy(() => {
    const B = ids.length;
    const T = ids[0].length;
    const C = m.config.n_embd;
    const pos = ids.flatMap((_, b) => Array.from({ length: T }, (_, t) => offsets[b] + t));
    let x = tf.add(tf.gather(m.wte, tf.tensor1d(ids.flat(), 'int32')), tf.gather(m.wpe, tf.tensor1d(pos, 'int32'))) as tf.Tensor2D;
    const maskValues = new Float32Array(T * T);
    for (let i = 0; i < T; i++) for (let j = i + 1; j < T; j++) maskValues[i * T + j] = -1e9;
    const mask = tf.tensor4d(maskValues, [1, 1, T, T]);
    for (const layer of m.layers) x = block(x, layer, null, mask, { B, N: T, H: m.config.n_head, hd: C / m.config.n_head, C }).x;
    return tf.matMul(layerNorm(x, m.lnF) as tf.Tensor2D, m.wte, false, true).dataSync() as Float32Array;
  });
}

/** A copy of `m` whose position embedding is shifted by k rows: wpe'[p] = wpe[(p + k) mod block_size]. */
function shiftedModel(m: GPT, k: number): GPT {
  const tensors = new Map<string, tf.Tensor>();
  for (const [name, v] of m.params) {
    tensors.set(name, name === 'wpe' ? tf.concat([tf.slice(v, [k, 0], [-1, -1]), tf.slice(v, [0, 0], [k, -1])]) : tf.clone(v));
  }
  return modelFromTensors(m.config, tensors);
}

function forwardRows(m: GPT, ids: number[][], offsets: number[] | null): Float32Array {
  return tf.tidy(() => {
    const idx = tf.tensor2d(ids, [ids.length, ids[0].length], 'int32');
    return forward(m, idx, offsets && tf.tensor1d(offsets, 'int32')).dataSync() as Float32Array;
  });
}

describe('position offsets of the training forward', () => {
  const rows = [[256, 10, 20, 30, 40, 50, 60, 70], [256, 99, 98, 97, 96, 95, 94, 93], [256, 1, 2, 3, 4, 5, 6, 7]];

  it('without offsets (as served) and with offsets 0 the logits are the hand-built forward at positions 0..T-1', () => {
    const ref = referenceLogits(model, rows, [0, 0, 0]);
    // up to float rounding, as above: a BLAS matmul's summation order is not fixed between calls
    for (const got of [forwardRows(model, rows, null), forwardRows(model, rows, [0, 0, 0])]) {
      expect(got.length).toBe(ref.length);
      expect(Math.max(...Array.from(got, (x, i) => Math.abs(x - ref[i]!)))).toBeLessThan(1e-5);
    }
  });

  it('with offset k a row\'s logits are those of the hand-built forward at k..k+T-1, and of a model whose wpe is shifted by k', () => {
    const offsets = [5, 0, TINY.block_size - rows[2].length]; // the last row ends at the last position
    const got = forwardRows(model, rows, offsets);
    const reference = referenceLogits(model, rows, offsets);
    expect(got.length).toBe(reference.length);
    expect(Math.max(...Array.from(got, (x, i) => Math.abs(x - reference[i]!)))).toBeLessThan(1e-5);
    const V = TINY.vocab_size;
    const T = rows[0].length;
    rows.forEach((row, b) => {
      const shifted = shiftedModel(model, offsets[b]);
      // one row against three: equal up to float rounding (a BLAS matmul, src/model/blas.ts, may sum
      // in another order when the number of rows or the heap's alignment changes); a wrong offset
      // moves logits by ~1e-1
      const alone = forwardRows(shifted, [row], null);
      const mine = got.subarray(b * T * V, (b + 1) * T * V);
      expect(Math.max(...Array.from(mine, (x, i) => Math.abs(x - alone[i]!))), `row ${b}`).toBeLessThan(1e-5);
      shifted.dispose();
    });
    // the offsets matter: row 0 at offset 5 differs from row 0 at offset 0
    expect(Array.from(got.subarray(0, T * V))).not.toEqual(Array.from(forwardRows(model, [rows[0]], null)));
  });

  it('right padding past the last position (clamped) leaves the row\'s own tokens\' logits unchanged', () => {
    // a 3-token row at the last 3 positions, padded to 8 tokens: its padding would sit past block_size
    const short = [256, 7, 9];
    const k = TINY.block_size - short.length;
    const padded = forwardRows(model, [rows[0], [...short, 0, 0, 0, 0, 0]], [0, k]);
    const V = TINY.vocab_size;
    const alone = forwardRows(model, [short], [k]);
    const T = rows[0].length;
    // equal up to float rounding: a BLAS matmul (src/model/blas.ts) may sum a row's products in
    // another order when the number of rows changes; a wrong position would move logits by ~1e-1
    const own = padded.subarray(T * V, T * V + short.length * V);
    expect(own.length).toBe(alone.length);
    expect(Math.max(...Array.from(own, (x, i) => Math.abs(x - alone[i]!)))).toBeLessThan(1e-5);
  });

  it('refuses offsets that are not one per row; the training step with offsets keeps the tensor count', () => {
    const idx = tf.tensor2d(rows, [3, 8], 'int32');
    const bad = tf.tensor1d([0, 1], 'int32');
    expect(() => forward(model, idx, bad)).toThrow(/positionOffsets must be \[3\]/);
    const offsets = tf.tensor1d([3, 0, 11], 'int32');
    const before = tf.memory().numTensors;
    for (let i = 0; i < 3; i++) {
      const { value, grads } = tf.variableGrads(() => tf.mean(forward(model, idx, offsets)) as tf.Scalar, model.trainableVariables);
      // the position embedding gets gradient at the offset rows only: rows 3..10, 0..7 and 11..18
      const gw = tf.tidy(() => tf.sum(tf.abs(grads[model.wpe.name]), 1).dataSync());
      const touched = Array.from(gw).flatMap((g, p) => (g > 0 ? [p] : []));
      expect(touched).toEqual(Array.from({ length: 19 }, (_, p) => p));
      tf.dispose([value, ...Object.values(grads)]);
    }
    expect(tf.memory().numTensors).toBe(before);
    tf.dispose([idx, bad, offsets]);
  });
});
