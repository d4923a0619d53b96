import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { forward, initModel, type GPT } from '../../src/model/gpt.js';
import { forwardCachedStats } from '../../src/model/gpt-cached.js';
import { loadCheckpoint, saveCheckpoint } from '../../src/model/checkpoint.js';
import { BOS, EOS, PAD, SEP, encodeCandidate, encodePrompt, utf8Support } from '../../src/model/tokenizer.js';
import { candidateSupport, samplingLogprobs } from '../../src/model/sampling.js';
import { createBuiltinEngineInstance, type BuiltinEngine } from '../../src/policy/builtin-engine.js';
import { EngineError, type PromptParts } from '../../src/policy/engine.js';
import { TINY } from './setup.js';

const LIMITS = { maxActionTokens: 6, maxReflectionTokens: 12 };
let dir: string;
let dir2: string;
let ref: GPT;
let engine: BuiltinEngine;

beforeAll(async () => {
  engine = await createBuiltinEngineInstance({ backend: 'wasm', batchWindowMs: 1, maxBatchSize: 32, limits: LIMITS });
  dir = await mkdtemp(path.join(os.tmpdir(), 'lamer-eng-'));
  dir2 = await mkdtemp(path.join(os.tmpdir(), 'lamer-eng2-'));
  const m = initModel(TINY, 21);
  await saveCheckpoint(m, dir, { version: 'v1' });
  m.dispose();
  const m2 = initModel(TINY, 22);
  await saveCheckpoint(m2, dir2, { version: 'v2' });
  m2.dispose();
  ref = (await loadCheckpoint(dir)).model;
  await engine.load('v1', dir);
});
afterAll(async () => {
  await engine.dispose();
  ref.dispose();
  await rm(dir, { recursive: true, force: true });
  await rm(dir2, { recursive: true, force: true });
});

/** Full log-softmax rows (temperature 1) predicting each output token, `[outLen][V]`. */
function refRows(prompt: number[], out: number[]): number[][] {
  const ids = [...prompt, ...out];
  return tf.tidy(() => {
    const lp = tf.logSoftmax(forward(ref, tf.tensor2d([ids], [1, ids.length], 'int32')), -1).arraySync() as number[][][];
    return out.map((_, j) => lp[0][prompt.length - 1 + j]);
  });
}

const prompt = (n: number): PromptParts => ({ head: 'Task: go. ', steps: Array.from({ length: n }, (_, i) => `s${i};`), tail: '> ' });
const S = (seed: number) => ({ temperature: 1, topP: 1, topK: 0, seed });

describe('builtin engine', () => {
  it('reports its backend and loaded versions', () => {
    expect(engine.info()).toEqual({ engine: 'builtin', backend: 'wasm', loadedVersions: ['v1'] });
    expect(engine.isLoaded('v1')).toBe(true);
    expect(engine.isLoaded('nope')).toBe(false);
  });

  it('act returns token ids and exact sampling logprobs (within the UTF-8 guard), within the action cap', async () => {
    const g = await engine.act({ sessionId: 'a1', modelVersion: 'v1', prompt: prompt(2), sampling: S(5) });
    expect(g.promptTokenIds).toEqual(encodePrompt(prompt(2), TINY.block_size - LIMITS.maxActionTokens).ids);
    expect(g.outputTokenIds.length).toBeGreaterThan(0);
    expect(g.outputTokenIds.length).toBeLessThanOrEqual(LIMITS.maxActionTokens);
    expect(g.logprobs.length).toBe(g.outputTokenIds.length);
    // free text is sampled within the UTF-8 guard (tokenizer.ts utf8Support): that is the support
    const rows = refRows(g.promptTokenIds, g.outputTokenIds);
    const support = utf8Support(g.outputTokenIds);
    g.logprobs.forEach((lp, i) => expect(lp).toBeCloseTo(samplingLogprobs(rows[i], S(5), support[i])[g.outputTokenIds[i]], 4));
    expect(g.droppedSteps).toBe(0);
    expect(g.modelVersion).toBe('v1');
  });

  it('is reproducible for a fixed seed, with or without a reused KV cache', async () => {
    const fresh1 = await engine.act({ sessionId: 'r1', modelVersion: 'v1', prompt: prompt(3), sampling: S(42) });
    const fresh2 = await engine.act({ sessionId: 'r2', modelVersion: 'v1', prompt: prompt(3), sampling: S(42) });
    expect(fresh2.outputTokenIds).toEqual(fresh1.outputTokenIds);
    // r1 steps again on an extended prompt (cache reused) vs a new session on the same prompt.
    const cached = await engine.act({ sessionId: 'r1', modelVersion: 'v1', prompt: prompt(4), sampling: S(43) });
    const uncached = await engine.act({ sessionId: 'r3', modelVersion: 'v1', prompt: prompt(4), sampling: S(43) });
    expect(cached.outputTokenIds).toEqual(uncached.outputTokenIds);
    cached.logprobs.forEach((lp, i) => expect(lp).toBeCloseTo(uncached.logprobs[i], 5));
    const other = await engine.act({ sessionId: 'r4', modelVersion: 'v1', prompt: prompt(3), sampling: { temperature: 1, topP: 1, topK: 0, seed: 999 } });
    expect(other.outputTokenIds).not.toEqual(fresh1.outputTokenIds);
    for (const s of ['r1', 'r2', 'r3', 'r4', 'a1']) engine.release(s);
  });

  it('with availableActions samples one of them down their trie, recording the constrained sampling logprobs', async () => {
    const actions = ['left', 'right', 'up', '(1, 2)', ''];
    const scores = await engine.score({ modelVersion: 'v1', prompt: prompt(1), candidates: actions });
    expect(scores.length).toBe(5);
    const params = [S(0), { temperature: 0.7, topP: 0.8, topK: 20 }, { temperature: 2, topP: 1, topK: 2 }];
    for (let seed = 0; seed < 8; seed++) {
      const sampling = { ...params[seed % 3], seed };
      const g = await engine.act({ sessionId: 'c1', modelVersion: 'v1', prompt: prompt(1), availableActions: actions, sampling });
      expect(actions).toContain(g.output);
      expect(g.output).toBe(actions[g.choiceIndex!]);
      expect(g.outputTokenIds).toEqual(encodeCandidate(g.output));
      expect(g.outputTokenIds.at(-1)).toBe(EOS);
      // per position: the sampling distribution over the tokens the candidates allow there
      const support = candidateSupport(actions.map(encodeCandidate), g.outputTokenIds);
      const rows = refRows(g.promptTokenIds, g.outputTokenIds);
      g.logprobs.forEach((lp, j) => {
        const want = support[j].length === 1 ? 0 : samplingLogprobs(rows[j], sampling, support[j])[g.outputTokenIds[j]];
        expect(lp).toBeCloseTo(want, 4);
      });
    }
    // greedy: the allowed argmax at every branching position
    const greedy = await engine.act({ sessionId: 'c1', modelVersion: 'v1', prompt: prompt(1), availableActions: actions, sampling: { temperature: 0, topP: 1, topK: 0 } });
    const rows = refRows(greedy.promptTokenIds, greedy.outputTokenIds);
    candidateSupport(actions.map(encodeCandidate), greedy.outputTokenIds).forEach((allowed, j) => {
      expect(greedy.outputTokenIds[j]).toBe(allowed.reduce((b, t) => (rows[j][t] > rows[j][b] ? t : b), allowed[0]));
    });
    engine.release('c1');
  });

  it('records the tempered, truncated sampling logprobs of free generations', async () => {
    const sampling = { temperature: 0.7, topP: 0.8, topK: 20, seed: 9 };
    const g = await engine.act({ sessionId: 'p1', modelVersion: 'v1', prompt: prompt(2), sampling });
    const rows = refRows(g.promptTokenIds, g.outputTokenIds);
    const support = utf8Support(g.outputTokenIds);
    g.logprobs.forEach((lp, j) => expect(lp).toBeCloseTo(samplingLogprobs(rows[j], sampling, support[j])[g.outputTokenIds[j]], 4));
    engine.release('p1');
  });

  it('drops the oldest steps to fit the context, reports it, and keeps the drop stable while the attempt goes on', async () => {
    const budget = TINY.block_size - LIMITS.maxActionTokens; // 58
    const long = prompt(20); // 'Task: go. ' + 20 steps of 3-4 bytes + '> ' = 80 bytes + BOS
    expect(encodePrompt(long, budget).droppedSteps).toBe(9); // the minimal drop: 9 steps of 3 bytes >= 83 - 58
    const g = await engine.act({ sessionId: 't1', modelVersion: 'v1', prompt: long, sampling: S(1) });
    // on overflow, steps are dropped until a quarter of the context (16 tokens) is free:
    // 83 - 42 = 41 tokens, i.e. 10 steps of 3 bytes and 3 of 4 bytes
    expect(g.droppedSteps).toBe(encodePrompt(long, budget - 16).droppedSteps);
    expect(g.droppedSteps).toBe(13);
    expect(g.promptTokenIds).toEqual(encodePrompt(long, budget, { minDroppedSteps: 13 }).ids);
    expect(g.promptTokenIds.length).toBeLessThanOrEqual(budget - 16);
    // the next steps of the attempt keep the same drop (same cached prefix) until it overflows again
    const next = await engine.act({ sessionId: 't1', modelVersion: 'v1', prompt: prompt(21), sampling: S(2) });
    expect(next.droppedSteps).toBe(13);
    expect(next.promptTokenIds.slice(0, g.promptTokenIds.length - 2)).toEqual(g.promptTokenIds.slice(0, -2));
    let d = 13;
    for (let n = 22; n < 40; n++) {
      const r = await engine.act({ sessionId: 't1', modelVersion: 'v1', prompt: prompt(n), sampling: S(n) });
      expect(r.droppedSteps).toBeGreaterThanOrEqual(d);
      expect(r.promptTokenIds.length).toBeLessThanOrEqual(budget);
      d = r.droppedSteps;
    }
    // a fresh session with a short prompt drops nothing
    const fresh = await engine.act({ sessionId: 't2', modelVersion: 'v1', prompt: prompt(2), sampling: S(1) });
    expect(fresh.droppedSteps).toBe(0);
    engine.release('t1');
    engine.release('t2');
  });

  it('reflect uses the reflection length cap', async () => {
    const g = await engine.reflect({ sessionId: 'f1', modelVersion: 'v1', prompt: prompt(1), sampling: { temperature: 1, topP: 1, topK: 0, seed: 3 } });
    expect(g.outputTokenIds.length).toBeLessThanOrEqual(LIMITS.maxReflectionTokens);
    expect(g.logprobs.length).toBe(g.outputTokenIds.length);
    engine.release('f1');
  });

  it('free generation never samples BOS, SEP or PAD; the recorded logprobs are those of the masked distribution', async () => {
    let masked = 0;
    for (let seed = 0; seed < 8; seed++) {
      const g = await engine.reflect({ sessionId: `m${seed}`, modelVersion: 'v1', prompt: prompt(1), sampling: S(seed) });
      engine.release(`m${seed}`);
      expect(g.outputTokenIds.filter((t) => [BOS, SEP, PAD].includes(t))).toEqual([]);
      const rows = refRows(g.promptTokenIds, g.outputTokenIds);
      const support = utf8Support(g.outputTokenIds);
      g.outputTokenIds.forEach((t, i) => {
        expect(g.logprobs[i]).toBeCloseTo(samplingLogprobs(rows[i], S(seed), support[i])[t], 4);
        if (!support[i].includes(EOS)) return; // inside a character: no special token is a candidate anyway
        // renormalised without the specials' mass: higher than the token's logprob with them unmasked
        const unmasked = samplingLogprobs(rows[i], S(seed), [...support[i], BOS, SEP, PAD])[t];
        expect(g.logprobs[i]).toBeGreaterThan(unmasked);
        masked++;
      });
    }
    expect(masked).toBeGreaterThan(20);
  });

  it('batched concurrent steps give the same results as unbatched ones', async () => {
    const unbatched = await createBuiltinEngineInstance({ backend: 'wasm', batchWindowMs: 0, maxBatchSize: 1, limits: LIMITS });
    await unbatched.load('v1', dir);
    const reqs = Array.from({ length: 12 }, (_, i) => ({ sessionId: `b${i}`, modelVersion: 'v1', prompt: prompt(i % 5), sampling: S(100 + i) }));
    const before = engine.stats().v1.maxRows;
    const packedBefore = forwardCachedStats.packed;
    const a = await Promise.all(reqs.map((r) => engine.act(r)));
    // on wasm the rows of every forward were packed (prefills and decode steps of any length)
    expect(forwardCachedStats.packed).toBeGreaterThan(packedBefore);
    const b = await Promise.all(reqs.map((r) => unbatched.act(r)));
    expect(engine.stats().v1.maxRows).toBeGreaterThan(Math.max(before, 1));
    expect(unbatched.stats().v1.maxRows).toBe(1);
    for (let i = 0; i < reqs.length; i++) {
      expect(a[i].outputTokenIds).toEqual(b[i].outputTokenIds);
      a[i].logprobs.forEach((lp, j) => expect(lp).toBeCloseTo(b[i].logprobs[j], 5));
    }
    for (const r of reqs) engine.release(r.sessionId);
    await unbatched.dispose();
  });

  it('forward sections (a tiny LAMER_FORWARD_SECTION_TOKENS) give the outputs of unsplit forwards: greedy exactly, logprobs and scores within 1e-5', async () => {
    // every prompt (30-60 tokens) is split into parts of at most 5 tokens and batches into sections
    const sectioned = await createBuiltinEngineInstance({ backend: 'wasm', batchWindowMs: 1, forwardSectionTokens: 5, limits: LIMITS });
    const whole = await createBuiltinEngineInstance({ backend: 'wasm', batchWindowMs: 1, forwardSectionTokens: 1 << 20, limits: LIMITS });
    await sectioned.load('v1', dir);
    await whole.load('v1', dir);
    const baseline = tf.memory().numTensors;
    const greedy = { temperature: 0, topP: 1, topK: 0 };
    const actions = ['left', 'right', 'up', '(1, 2)'];
    const play = (e: BuiltinEngine) =>
      Promise.all(
        Array.from({ length: 6 }, async (_, s) => {
          const out = [];
          // the session's prompt grows step by step: cached prefixes, then a refit that drops steps
          for (const n of [1, 2, 3, 12, 13]) {
            const req = { sessionId: `sec${s}`, modelVersion: 'v1', prompt: prompt(n + s), sampling: greedy };
            out.push(await e.act(s % 2 === 0 ? req : { ...req, availableActions: actions }));
            out.push(await e.reflect({ ...req, sampling: S(s * 10 + n) }));
          }
          return out;
        }),
      );
    const [a, b] = [await play(sectioned), await play(whole)];
    expect(sectioned.stats().v1.forwards).toBeGreaterThan(whole.stats().v1.forwards);
    expect(sectioned.stats().v1.maxRows).toBeLessThanOrEqual(5);
    let worst = 0;
    a.flat().forEach((g, i) => {
      const w = b.flat()[i];
      expect(g.outputTokenIds).toEqual(w.outputTokenIds);
      expect(g.promptTokenIds).toEqual(w.promptTokenIds);
      g.logprobs.forEach((lp, j) => (worst = Math.max(worst, Math.abs(lp - w.logprobs[j]))));
    });
    for (const n of [1, 7, 14]) {
      const req = { modelVersion: 'v1', prompt: prompt(n), candidates: [...actions, 'a much longer candidate action'] };
      const [x, y] = [await sectioned.score(req), await whole.score(req)];
      x.forEach((lp, j) => (worst = Math.max(worst, Math.abs(lp - y[j]))));
    }
    expect(worst).toBeLessThanOrEqual(1e-5);
    for (let s = 0; s < 6; s++) {
      sectioned.release(`sec${s}`);
      whole.release(`sec${s}`);
    }
    expect(tf.memory().numTensors).toBe(baseline);
    await sectioned.dispose();
    await whole.dispose();
  });

  it('keeps tf.memory().numTensors flat over 1,000 act calls', async () => {
    const baseline = tf.memory().numTensors;
    const packedBefore = forwardCachedStats.packed;
    const actions = ['a', 'bb', 'ccc'];
    let calls = 0;
    const mid: number[] = [];
    await Promise.all(
      Array.from({ length: 10 }, async (_, s) => {
        for (let step = 0; step < 100; step++) {
          const req = { sessionId: `m${s}`, modelVersion: 'v1', prompt: prompt(step % 12), sampling: S(step) };
          await engine.act(step % 2 === 0 ? { ...req, availableActions: actions } : req);
          if (++calls % 250 === 0) mid.push(tf.memory().numTensors);
        }
      }),
    );
    expect(calls).toBe(1000);
    // on wasm every forward packs its rows, and a session's cache is one heap KV buffer
    expect(forwardCachedStats.packed - packedBefore).toBeGreaterThan(0);
    // while sessions are alive: only their caches (one tensor each) are held
    for (const n of mid) expect(n - baseline).toBeLessThanOrEqual(10);
    for (let s = 0; s < 10; s++) engine.release(`m${s}`);
    expect(tf.memory().numTensors).toBe(baseline);
  });

  it('hot-swaps versions under an LRU cap without failing in-flight steps, and reloads on demand', async () => {
    const logs: Array<{ o: Record<string, unknown>; msg?: string }> = [];
    const logger = { info: (o: object, msg?: string) => logs.push({ o: o as Record<string, unknown>, msg }), warn: () => {} };
    // a 40-token reflection without stop tokens (40 sequential forwards, each held 10 ms as on a slow
    // machine) is still running while v2 loads, whose reads and warm-up need only a few turns of the event loop
    const slowForward = () => {
      const until = performance.now() + 10;
      while (performance.now() < until);
    };
    const e = await createBuiltinEngineInstance({
      backend: 'wasm', maxLoadedVersions: 1, limits: { ...LIMITS, maxReflectionTokens: 40, stopTokens: [] }, logger, beforeForward: slowForward,
    });
    await e.load('v1', dir);
    const inflight = e.reflect({ sessionId: 'h1', modelVersion: 'v1', prompt: prompt(2), sampling: S(9) });
    await e.load('v2', dir2); // evicts v1 while its step is running
    expect(e.info().loadedVersions).toEqual(['v2']);
    expect(logs.find((l) => l.msg === 'model version evicted (LRU cap)')?.o).toEqual({ version: 'v1', inFlight: 1 });
    const g = await inflight;
    expect(g.outputTokenIds.length).toBe(40);
    const rows = refRows(g.promptTokenIds, g.outputTokenIds);
    const support = utf8Support(g.outputTokenIds);
    g.logprobs.forEach((lp, i) => expect(lp).toBeCloseTo(samplingLogprobs(rows[i], S(9), support[i])[g.outputTokenIds[i]], 4));
    // a session pinned to v1 steps again: v1 is reloaded from its folder (and v2 evicted)
    const again = await e.reflect({ sessionId: 'h1', modelVersion: 'v1', prompt: prompt(2), sampling: S(9) });
    expect(again.outputTokenIds).toEqual(g.outputTokenIds);
    expect(e.info().loadedVersions).toEqual(['v1']);
    await expect(e.act({ sessionId: 'x', modelVersion: 'unknown', prompt: prompt(0), sampling: S(1) })).rejects.toBeInstanceOf(EngineError);
    await e.dispose();
  });
});
