/**
 * The experiment driver and the harness modes it needs: independent retries
 * regrouped for pass@k (exact values), the harness's `mode: 'train'` and
 * `independentAttempts` against a real server (test engine), and two LaMer iterations plus one
 * GiGPO iteration against a server with the builtin engine on a tiny GPT (rollouts -> job on
 * exactly those sessions -> activation -> next rollouts on the new version).
 */
import { join } from 'node:path';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { saveCheckpoint } from '../../src/model/checkpoint.js';
import { initModel } from '../../src/model/gpt.js';
import { loadConfig } from '../../src/config.js';
import { DEFAULT_MODEL_IO } from '../../src/training/run/worker.js';
import { runEval } from '../../src/eval/harness.js';
import type { AttemptRecord, SessionRecord } from '../../src/eval/metrics.js';
import { summarize } from '../../src/eval/metrics.js';
import { asIndependentRetries, runExperiment, type CurvePoint } from '../../src/eval/experiment.js';
import { startTestServer, tmpDir, type TestServer } from '../helpers/index.js';

const att = (success: boolean, ret: number): AttemptRecord => ({ attempt: 0, success, return: ret, actions: 1, invalidActions: 0, endReason: 'done', trajectory: ['(1, 1)'] });
const single = (taskId: string, trial: number, success: boolean): SessionRecord => ({ taskId, trial, attempts: [att(success, success ? 10 : -1)] });

describe('asIndependentRetries', () => {
  it('reads 3G single-attempt sessions of a task as G triples, cut after the first success', () => {
    // task a: trials 0..5 = F F S | S F F ; task b: F F F | F S F
    const a = [false, false, true, true, false, false].map((s, i) => single('a', i, s));
    const b = [false, false, false, false, true, false].map((s, i) => single('b', i, s));
    const r = asIndependentRetries([...b.reverse(), ...a]);
    expect(r.map((s) => [s.taskId, s.trial, s.attempts.map((x) => `${x.attempt}${x.success ? 'S' : 'F'}`).join(' ')])).toEqual([
      ['b', 0, '0F 1F 2F'],
      ['b', 1, '0F 1S'],
      ['a', 0, '0F 1F 2S'],
      ['a', 1, '0S'],
    ]);
    expect(summarize(r, 3).passAtK).toEqual({ '1': 0.25, '2': 0.5, '3': 0.75 });
  });

  it('drops an incomplete last triple', () => {
    expect(asIndependentRetries([0, 1, 2, 3].map((i) => single('a', i, false))).length).toBe(1);
  });
});

let dir: string;
let gpt: TestServer;
let fake: TestServer;

beforeAll(async () => {
  dir = tmpDir('lamer-experiment-');
  const m = initModel({ vocab_size: 260, block_size: 384, n_layer: 1, n_head: 2, n_embd: 16 }, 9);
  await saveCheckpoint(m, join(dir, 'base-model'), { version: 'base' });
  m.dispose();
  const cfg = loadConfig({});
  gpt = await startTestServer({ dataDir: join(dir, 'gpt'), engine: 'builtin', tfjsBackend: 'wasm', baseModelDir: join(dir, 'base-model'), training: { ...cfg.training, modelIO: { ...DEFAULT_MODEL_IO, options: { backend: 'wasm' } } } });
  fake = await startTestServer({ dataDir: join(dir, 'fake') });
}, 60_000);
afterAll(async () => {
  await gpt?.close();
  await fake?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('harness modes', () => {
  it("mode 'train' plays training seeds and records train sessions", async () => {
    const r = await runEval({ env: 'minesweeper', params: { rows: 4, cols: 4, mines: 2 }, tasks: 2, attempts: 2, concurrency: 2, seed: 5, policy: 'model', server: fake.url, mode: 'train' });
    expect(r.sessions.map((s) => s.taskId)).toEqual(['minesweeper-4x4-2:seed=5', 'minesweeper-4x4-2:seed=6']);
    const list = await fake.call('GET', '/v1/sessions?mode=train');
    expect(list.body.items.length).toBe(2);
  });

  it('independentAttempts plays one single-attempt session per attempt, without reflections', async () => {
    const before = (await fake.call('GET', '/v1/sessions?mode=eval&limit=200')).body.items.length;
    const r = await runEval({ env: 'minesweeper', params: { rows: 4, cols: 4, mines: 2 }, tasks: 3, attempts: 3, concurrency: 3, seed: 0, policy: 'model', server: fake.url, independentAttempts: true });
    const played = r.sessions.reduce((a, s) => a + s.attempts.length, 0);
    for (const s of r.sessions) {
      expect(s.error).toBeUndefined();
      expect(s.attempts.map((a) => a.attempt)).toEqual(s.attempts.map((_, i) => i));
      // it stops at the first success
      expect(s.attempts.slice(0, -1).every((a) => !a.success)).toBe(true);
    }
    const after = (await fake.call('GET', '/v1/sessions?mode=eval&limit=200')).body.items;
    expect(after.length - before).toBe(played);
    const mine = after.slice(0, played);
    for (const s of mine) {
      expect(s.maxAttempts).toBe(1);
      expect(s.reflections ?? s.memory?.reflections ?? []).toEqual([]);
    }
  });
});

describe('runExperiment', () => {
  it('LaMer: rollouts, a job on exactly those sessions, activation, next iteration on the new version', async () => {
    const lines: string[] = [];
    const res = await runExperiment({
      env: 'minesweeper', params: { rows: 4, cols: 4, mines: 2 }, algorithm: 'lamer', iterations: 2, tasksPerIter: 2, group: 2,
      server: gpt.url, concurrency: 4, hyperparameters: { epochs: 1, minibatchSize: 64, lr: 1e-3 }, pollMs: 100, log: (l) => lines.push(l),
    });
    expect(res.points.length).toBe(2);
    const [p0, p1] = res.points as [CurvePoint, CurvePoint];
    expect(p0.rolloutVersion).toBe('base');
    expect(p0.sessions).toBe(4);
    for (const p of res.points) {
      if (p.jobStatus === 'succeeded') {
        expect(p.tokensTrained).toBeGreaterThan(0);
        const job = (await gpt.call('GET', `/v1/training/jobs/${p.jobId}`)).body;
        expect(job.dataStats).toMatchObject({ sessions: 4, tasks: 2 });
        // the point carries the job's output and reflection token counts and its entropy by kind
        expect(p.outputTokens).toBe(job.dataStats.outputTokens);
        expect(p.reflectionTokens).toBe(job.dataStats.reflectionTokens);
        expect(p.actionEntropy).toBeGreaterThan(0);
        if (p.reflectionTokens! > 0) expect(p.reflectionEntropy).toBeGreaterThan(0);
        else expect(p.reflectionEntropy).toBeNull();
        expect(job.data.taskIds).toEqual([0, 1].map((i) => `minesweeper-4x4-2:seed=${2 * p.iteration + i}`));
      } else {
        expect(p.jobStatus).toBe('failed'); // no training samples
      }
    }
    expect(p1.rolloutVersion).toBe(p0.trainedVersion ?? 'base');
    const models = (await gpt.call('GET', '/v1/models')).body;
    expect(models.active).toBe(p1.trainedVersion ?? p1.rolloutVersion);
    expect(Object.keys(p0.passAtK)).toEqual(['1', '2', '3']);
    // the KL to the start: 0 for the start's own rollouts, measured on the next version's
    expect(res.startVersion).toBe('base');
    expect(p0.klToStart).toBe(0);
    if (p1.rolloutVersion !== 'base') {
      expect(p1.klToStart).toBeGreaterThanOrEqual(0);
      expect(p1.klToStartTokens).toBeGreaterThan(0);
    }
    for (const p of res.points) if (p.jobStatus === 'succeeded') expect(p.approxKl).toBeGreaterThanOrEqual(0);
    // no held-out probe asked for
    expect(res.heldOutStart).toBeNull();
    expect(res.points.map((p) => p.heldOut)).toEqual([null, null]);
  }, 600_000); // two iterations and the KL replays, under a full test run on 2 cores

  it("resuming refuses a server whose active version is not the one the last point left, before any rollout", async () => {
    const active = (await gpt.call('GET', '/v1/models')).body.active;
    const before = (await gpt.call('GET', '/v1/sessions?limit=200')).body.items.length;
    const last = { iteration: 0, rolloutVersion: 'base', trainedVersion: 'not-this-one' } as CurvePoint;
    await expect(runExperiment({
      env: 'minesweeper', params: { rows: 4, cols: 4, mines: 2 }, algorithm: 'lamer', iterations: 2, tasksPerIter: 1, group: 1, server: gpt.url,
      resume: { points: [last], startVersion: 'base', heldOutStart: null },
    })).rejects.toThrow(`cannot resume: the server's active version is '${active}', iteration 0 left 'not-this-one'`);
    expect((await gpt.call('GET', '/v1/sessions?limit=200')).body.items.length).toBe(before);
  });

  it('GiGPO: 3G single-attempt sessions per task', async () => {
    const res = await runExperiment({
      env: 'minesweeper', params: { rows: 4, cols: 4, mines: 2 }, algorithm: 'gigpo', iterations: 1, tasksPerIter: 2, group: 1, seed: 100,
      server: gpt.url, concurrency: 6, hyperparameters: { epochs: 1, minibatchSize: 64 }, pollMs: 100,
    });
    const p = res.points[0]!;
    expect(p.sessions).toBe(6);
    if (p.jobStatus === 'succeeded') {
      // single-attempt sessions train no reflection: every trained token is an action's
      expect(p.reflectionTokens).toBe(0);
      expect(p.reflectionEntropy).toBeNull();
      expect(p.actionEntropy).toBeCloseTo(p.entropy!, 5);
    }
    const list = (await gpt.call('GET', '/v1/sessions?mode=train&limit=200')).body.items.filter((s: { taskId: string }) => /seed=10[01]$/.test(s.taskId));
    expect(list.length).toBe(6);
    expect(list.every((s: { maxAttempts: number }) => s.maxAttempts === 1)).toBe(true);
  }, 300_000);
});
