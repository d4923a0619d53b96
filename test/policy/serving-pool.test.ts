/**
 * The serving pool (LAMER_SERVE_WORKERS > 1): worker threads with one builtin engine each give the
 * same generations as the in-process engine, spread sessions over the workers and keep each on
 * its worker, apply versions (load, hot swap, LRU, pinning) in every worker, keep the errors'
 * classes and messages, recover from a backend fault inside a worker, keep tfjs memory flat, and
 * serve a real HTTP server.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBuiltinEngineInstance, type BuiltinEngine } from '../../src/policy/builtin-engine.js';
import { EngineError, EngineLimitError, type ActRequest, type PromptParts } from '../../src/policy/engine.js';
import { RoutingEngine } from '../../src/policy/routing-engine.js';
import { createServingPool, type ServingPool } from '../../src/policy/serving-pool.js';
import { startTestServer, tmpDir, writeTinyGptCheckpoint } from '../helpers/index.js';

const LIMITS = { maxActionTokens: 8, maxReflectionTokens: 16 };
const OPTS = { backend: 'wasm' as const, batchWindowMs: 0, limits: LIMITS, maxLoadedVersions: 2 };
let root: string;
let v1: string;
let v2: string;
let v3: string;
let local: BuiltinEngine;
let pool: ServingPool;
const fatal: Error[] = [];

beforeAll(async () => {
  root = tmpDir('lamer-pool-');
  [v1, v2, v3] = await Promise.all([1, 2, 3].map((seed) => writeTinyGptCheckpoint(join(root, `v${seed}`), seed)));
  [local, pool] = await Promise.all([
    createBuiltinEngineInstance(OPTS),
    createServingPool({ ...OPTS, workers: 2, testHooks: true, statePeriodMs: 10, onFatal: (e) => fatal.push(e) }),
  ]);
  await local.load('v1', v1);
  await pool.load('v1', v1);
}, 60_000);
afterAll(async () => {
  await Promise.all([local?.dispose(), pool?.dispose()]);
});

const S = (seed: number, temperature = 1) => ({ temperature, topP: 1, topK: 0, seed });
const prompt = (steps: string[]): PromptParts => ({ head: 'Find the exit. ', steps, tail: '> ' });

/** Plays `sessions` sessions of 3 steps each (two free-form, one constrained, then a reflection). */
async function play(e: { act(r: ActRequest): Promise<unknown>; reflect(r: ActRequest): Promise<unknown> }, sessions: string[], version = 'v1') {
  const out: unknown[] = [];
  for (const [i, sid] of sessions.entries()) {
    const steps: string[] = [];
    for (let k = 0; k < 3; k++) {
      const req: ActRequest = { sessionId: sid, modelVersion: version, prompt: prompt(steps), sampling: S(100 * i + k), ...(k === 2 ? { availableActions: ['north', 'south', 'east'] } : {}) };
      const g = (await e.act(req)) as { output: string };
      out.push(g);
      steps.push(`obs ${k}; did ${g.output}\n`);
    }
    out.push(await e.reflect({ sessionId: sid, modelVersion: version, prompt: prompt(steps), sampling: S(7 + i) }));
  }
  return out;
}

describe('a pool of 2 workers', () => {
  it('gives the same actions, token ids and logprobs as the in-process engine, with sessions spread over both workers', async () => {
    const sessions = ['a', 'b', 'c', 'd'];
    const want = await play(local, sessions);
    const got = await play(pool, sessions);
    expect(got).toEqual(want);
    expect(sessions.map((s) => pool.workerOf(s))).toEqual([0, 1, 0, 1]);
    const st = await pool.workerStats();
    expect(st.map((w) => w.cachedSessions)).toEqual([2, 2]);
    expect(st.every((w) => w.batchers.v1!.forwards > 0)).toBe(true);
    // release frees the assignment and the worker's KV cache
    for (const s of sessions) {
      pool.release(s);
      local.release(s);
    }
    expect(sessions.map((s) => pool.workerOf(s))).toEqual([undefined, undefined, undefined, undefined]);
    expect((await pool.workerStats()).map((w) => w.cachedSessions)).toEqual([0, 0]);
  }, 60_000);

  it('concurrent sessions stay on their worker and match the in-process engine', async () => {
    const sessions = Array.from({ length: 6 }, (_, i) => `p${i}`);
    const want = await Promise.all(sessions.map((s) => play(local, [s])));
    const got = await Promise.all(sessions.map((s) => play(pool, [s])));
    // other batch compositions (6 rows in one engine, 3 in each worker) round the last float bits
    // differently: the same tokens, logprobs within 1e-6
    const strip = (gs: unknown[][]) => gs.flat().map((g) => ({ ...(g as object), logprobs: [] }));
    expect(strip(got)).toEqual(strip(want));
    const lps = (gs: unknown[][]) => gs.flat().flatMap((g) => (g as { logprobs: number[] }).logprobs);
    const [a, b] = [lps(got), lps(want)];
    expect(a.length).toBe(b.length);
    expect(Math.max(...a.map((x, i) => Math.abs(x - b[i]!)))).toBeLessThan(1e-6);
    const per = [0, 1].map((w) => sessions.filter((s) => pool.workerOf(s) === w).length);
    expect(per).toEqual([3, 3]);
    for (const s of sessions) {
      pool.release(s);
      local.release(s);
    }
  }, 60_000);

  it('hot swap, version LRU and pinning work in every worker as in-process', async () => {
    // session 'old' is pinned to v1, 'new' to v2 after the swap
    await Promise.all([local.load('v2', v2), pool.load('v2', v2)]);
    expect(pool.isLoaded('v2') && pool.isLoaded('v1')).toBe(true);
    expect(pool.info().loadedVersions).toEqual(['v1', 'v2']);
    // 'old' runs on one worker, 'new' on the other: the version last used anywhere is the most recent everywhere
    const want = [...(await play(local, ['old'], 'v1')), ...(await play(local, ['new'], 'v2'))];
    const got = [...(await play(pool, ['old'], 'v1')), ...(await play(pool, ['new'], 'v2'))];
    expect(got).toEqual(want);
    // a third version evicts the oldest (cap 2) in every worker...
    await Promise.all([local.load('v3', v3), pool.load('v3', v3)]);
    expect(pool.isLoaded('v1')).toBe(false);
    expect(local.isLoaded('v1')).toBe(false);
    expect(pool.info().loadedVersions).toEqual(['v2', 'v3']);
    // ...and a session pinned to it steps again: reloaded transparently from its folder
    const w = await local.act({ sessionId: 'old', modelVersion: 'v1', prompt: prompt(['x\n']), sampling: S(9) });
    const g = await pool.act({ sessionId: 'old', modelVersion: 'v1', prompt: prompt(['x\n']), sampling: S(9) });
    expect(g).toEqual(w);
    for (const s of ['old', 'new']) {
      pool.release(s);
      local.release(s);
    }
  }, 60_000);

  it('an error thrown in a worker keeps its class, field and message', async () => {
    const long = { sessionId: 'bad', modelVersion: 'v3', prompt: prompt([]), availableActions: ['ok', 'x'.repeat(200)], sampling: S(1) };
    const want = await local.act(long).catch((e: unknown) => e);
    const got = await pool.act(long).catch((e: unknown) => e);
    expect(want).toBeInstanceOf(EngineLimitError);
    expect(got).toBeInstanceOf(EngineLimitError);
    expect({ field: (got as EngineLimitError).field, message: (got as Error).message }).toEqual({
      field: 'body/availableActions/1',
      message: 'is 201 tokens (its tokens + EOS); model version v3 takes candidates of at most 192 tokens (half its context of 384)',
    });
    const unknown = await pool.act({ ...long, modelVersion: 'nope', availableActions: undefined }).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(EngineError);
    expect((unknown as Error).message).toBe('model version nope is not loaded');
    const badDir = await pool.load('v9', join(root, 'missing')).catch((e: unknown) => e);
    expect(badDir).toBeInstanceOf(EngineError);
    // The message reaches clients: the version, not the folder (that is logged).
    expect((badDir as Error).message).toBe("model version 'v9' cannot be loaded (its checkpoint is missing or damaged); an operator must check the server log");
    pool.release('bad');
    local.release('bad');
  });

  it('replays a recorded call in a worker as the in-process engine does', async () => {
    const g = await local.act({ sessionId: 'r0', modelVersion: 'v1', prompt: prompt([]), sampling: S(4), availableActions: ['north', 'south', 'east'] });
    local.release('r0');
    const req = {
      modelVersion: 'v1', prompt: prompt([]), promptTokenIds: g.promptTokenIds, sampling: S(4, 0), candidates: ['north', 'south', 'east'],
      score: { tokenIds: g.outputTokenIds, sampling: S(4) },
    };
    const want = await local.replay(req);
    expect(await pool.replay(req)).toEqual(want);
    expect(want.scoredLogprobs).toHaveLength(g.outputTokenIds.length);
  });

  it('keeps tfjs memory flat in every worker over many calls', async () => {
    await play(pool, ['warm']);
    pool.release('warm');
    const before = (await pool.workerStats()).map((w) => w.numTensors);
    for (let r = 0; r < 3; r++) {
      const ids = [`m${r}a`, `m${r}b`, `m${r}c`];
      await Promise.all(ids.map((s) => play(pool, [s], 'v3')));
      await pool.score({ modelVersion: 'v3', prompt: prompt([]), candidates: ['north', 'south'] });
      await pool.complete({ modelVersion: 'v3', prompt: prompt([]), sampling: S(r), maxTokens: 5 });
      await pool.replay({ modelVersion: 'v3', prompt: prompt([]), sampling: S(r), score: { tokenIds: [110, 257], sampling: S(r) } });
      for (const s of ids) pool.release(s);
    }
    expect((await pool.workerStats()).map((w) => w.numTensors)).toEqual(before);
  }, 60_000);

  it('a backend fault in one worker is recovered there: readiness drops while it recovers, the retry succeeds', async () => {
    const req = { sessionId: 'f1', modelVersion: 'v3', prompt: prompt([]), sampling: S(3) };
    const want = await local.act({ ...req, sessionId: 'f0' });
    expect(pool.workerOf('f1')).toBeUndefined();
    await pool.act({ ...req, sessionId: 'f0' }); // f0 takes the first free worker, f1 the other
    const w = 1 - pool.workerOf('f0')!;
    await pool.poison(w, true);
    const failed = await pool.act(req).catch((e: unknown) => e);
    expect(pool.workerOf('f1')).toBe(w);
    expect(failed).toBeInstanceOf(EngineError);
    expect((failed as Error).message).toBe('model backend fault; the engine re-initialises its backend, retry the request');
    expect(pool.health().state).toBe('recovering');
    expect(pool.isLoaded('v3')).toBe(false);
    await pool.poison(w, false);
    for (let i = 0; i < 500 && pool.health().state !== 'ok'; i++) await new Promise((r) => setTimeout(r, 10));
    expect(pool.health()).toEqual({ state: 'ok', recoveries: 1 });
    expect(pool.isLoaded('v3')).toBe(true);
    expect(await pool.act(req)).toEqual({ ...want });
    for (const s of ['f0', 'f1']) pool.release(s);
    local.release('f0');
    expect(fatal).toEqual([]);
  }, 60_000);

  it('a worker thread that dies fails its calls with an EngineError, makes the pool failed and not ready, and calls onFatal once', async () => {
    await pool.act({ sessionId: 'c0', modelVersion: 'v3', prompt: prompt([]), sampling: S(1) });
    const w = pool.workerOf('c0')!;
    const crashed = await pool.crash(w).catch((e: unknown) => e);
    expect(crashed).toBeInstanceOf(EngineError);
    expect((crashed as Error).message).toBe(`serving worker ${w} exited with code 3; retry the request`);
    expect(pool.liveWorkers()).toBe(1);
    expect(pool.health()).toMatchObject({ state: 'failed', detail: 'serving worker exited with code 3' });
    expect(pool.isLoaded('v3')).toBe(false);
    expect(fatal.map((e) => e.message)).toEqual([`serving worker ${w} exited with code 3`]);
    // the session moves to the live worker meanwhile (the server is shutting down)
    await pool.act({ sessionId: 'c0', modelVersion: 'v3', prompt: prompt([]), sampling: S(1) });
    expect(pool.workerOf('c0')).toBe(1 - w);
    pool.release('c0');
    await pool.dispose();
    expect(pool.liveWorkers()).toBe(0);
    await expect(pool.act({ sessionId: 'c1', modelVersion: 'v3', prompt: prompt([]), sampling: S(1) })).rejects.toThrow('engine disposed');
    expect(fatal).toHaveLength(1);
  }, 60_000);
});

describe('LAMER_SERVE_WORKERS=2 over HTTP', () => {
  it('serves seeded sessions like the in-process engine, answers a too-large request 400, and is ready', async () => {
    const base = await writeTinyGptCheckpoint(join(root, 'http-base'), 4);
    const common = { engine: 'builtin' as const, tfjsBackend: 'wasm' as const, baseModelDir: base };
    const [one, two] = await Promise.all([startTestServer({ ...common, serveWorkers: 1 }), startTestServer({ ...common, serveWorkers: 2 })]);
    try {
      const routed = two.app.engine as RoutingEngine;
      const pooled = routed.local as ServingPool;
      expect(pooled.size).toBe(2);
      const playHttp = async (s: typeof one) => {
        const ids: string[] = [];
        const actions: unknown[] = [];
        for (let i = 0; i < 2; i++) {
          const c = await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'Pick a door.', maxAttempts: 1, maxSteps: 5, sampling: { temperature: 1, topP: 1, topK: 0, seed: 40 + i } });
          expect(c.status).toBe(201);
          ids.push(c.body.id as string);
        }
        for (let step = 0; step < 3; step++) {
          for (const id of ids) {
            const choices = step === 1 ? {} : { availableActions: ['left', 'right', 'wait'] };
            const r = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step, observation: `room ${step}`, ...choices });
            expect(r.status).toBe(200);
            actions.push([r.body.action, r.body.output]);
          }
        }
        for (const id of ids) {
          const t = await s.call('GET', `/v1/sessions/${id}/trajectory`);
          expect(t.status).toBe(200);
          actions.push(t.body.steps.map((x: { logprobs: number[] }) => x.logprobs));
        }
        return { ids, actions };
      };
      const a = await playHttp(one);
      const b = await playHttp(two);
      expect(b.actions).toEqual(a.actions);
      expect(b.ids.map((id) => pooled.workerOf(id)).sort()).toEqual([0, 1]);
      const ready = await two.call('GET', '/readyz');
      expect(ready.status).toBe(200);
      expect(ready.body.model).toEqual({ version: 'base', loaded: true });
      const tooLarge = await two.call('POST', `/v1/sessions/${b.ids[0]}/steps`, { attempt: 0, step: 3, observation: 'o', availableActions: ['ok', 'y'.repeat(300)] });
      expect(tooLarge.status).toBe(400);
      expect(tooLarge.body.errors).toEqual([{ field: 'body/availableActions/1', message: 'is 301 tokens (its tokens + EOS); model version base takes candidates of at most 192 tokens (half its context of 384)' }]);
      // shutdown terminates the workers
      await two.close();
      expect(pooled.liveWorkers()).toBe(0);
    } finally {
      await Promise.all([one.close(), two.close()]);
    }
  }, 90_000);
});
