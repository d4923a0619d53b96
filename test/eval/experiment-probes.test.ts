/**
 * The experiment's probes: the k3 estimate of KL with hand-computed values (and its independence
 * of the order of the tokens), which rollout sessions the KL replays, the cadence of the probes,
 * and both probes against a real server with the builtin engine on a tiny GPT: the KL of a version
 * from itself is ~0 and from another version is > 0; the held-out probe plays eval seeds and
 * reads the baselines as independent retries.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { heldOutProbe, k3Estimate, klSessions, klToStart } from '../../src/eval/experiment-probes.js';
import { probesAt } from '../../src/eval/experiment.js';
import { runEval } from '../../src/eval/harness.js';
import type { SessionRecord } from '../../src/eval/metrics.js';
import { DEFAULT_MODEL_IO } from '../../src/training/run/worker.js';
import { startTestServer, tmpDir, writeTinyGptCheckpoint, type TestServer } from '../helpers/index.js';

describe('k3Estimate', () => {
  it('is the mean of exp(d) - 1 - d over tokens, d = start - recorded (hand-computed)', () => {
    // d = 0 -> 0; d = ln 2 -> 2 - 1 - ln 2 = 0.306853; d = -ln 2 -> 0.5 - 1 + ln 2 = 0.193147
    const ln2 = Math.log(2);
    expect(k3Estimate([[-1, -1]])).toBe(0);
    expect(k3Estimate([[-1, -1 + ln2]])).toBeCloseTo(1 - ln2, 12);
    expect(k3Estimate([[-1, -1 + ln2], [-2, -2 - ln2], [-3, -3]])).toBeCloseTo((1 - ln2 + (ln2 - 0.5)) / 3, 12);
    expect(k3Estimate([])).toBe(0);
  });

  it('gives the same number whatever the order of the tokens', () => {
    const pairs: Array<[number, number]> = Array.from({ length: 200 }, (_, i) => [-((i * 7919) % 13) / 5, -((i * 104729) % 17) / 7]);
    const reversed = [...pairs].reverse();
    expect(k3Estimate(reversed)).toBe(k3Estimate(pairs));
    expect(k3Estimate(pairs)).toBeGreaterThan(0);
  });
});

describe('klSessions', () => {
  const rec = (taskId: string, trial: number, sessionId?: string, error?: string): SessionRecord => ({ taskId, trial, attempts: [], ...(sessionId ? { sessionId } : {}), ...(error ? { error } : {}) });
  const played = [rec('a', 0, 's0'), rec('a', 1, 's1'), rec('a', 2, 's2'), rec('a', 3, 's3'), rec('b', 0, 's4', 'boom'), rec('b', 1, 's5'), rec('c', 0)];
  it('LaMer: the first trial of each task; baselines: the first three sessions (those with an id, played to the end)', () => {
    expect(klSessions(played, true)).toEqual(['s0']);
    expect(klSessions(played, false)).toEqual(['s0', 's1', 's2', 's5']);
  });
});

describe('probesAt', () => {
  it('every E-th iteration (1-based) and the last; 0 never', () => {
    const at = (every: number, n: number) => Array.from({ length: n }, (_, i) => i).filter((i) => probesAt(i, every, n));
    expect(at(1, 4)).toEqual([0, 1, 2, 3]);
    expect(at(2, 5)).toEqual([1, 3, 4]);
    expect(at(3, 6)).toEqual([2, 5]);
    expect(at(0, 4)).toEqual([]);
  });
});

let dir: string;
let srv: TestServer;

beforeAll(async () => {
  dir = tmpDir('lamer-probes-');
  await writeTinyGptCheckpoint(join(dir, 'base-model'), 9);
  const cfg = loadConfig({});
  srv = await startTestServer({
    dataDir: join(dir, 'data'), engine: 'builtin', tfjsBackend: 'wasm', baseModelDir: join(dir, 'base-model'),
    training: { ...cfg.training, modelIO: { ...DEFAULT_MODEL_IO, options: { backend: 'wasm' } } },
  });
}, 60_000);
afterAll(async () => {
  await srv?.close();
});

describe('probes against a server (tiny GPT)', () => {
  const env = { env: 'minesweeper' as const, params: { rows: 4, cols: 4, mines: 2 } };
  it('KL from the start: ~0 on its own rollouts, > 0 once a job has moved the weights', async () => {
    const t = { ...env, server: srv.url, concurrency: 4 };
    const play = () => runEval({ ...env, tasks: 2, attempts: 3, trials: 1, concurrency: 4, seed: 0, policy: 'model', server: srv.url, sampling: { temperature: 1, topP: 1, topK: 0 }, mode: 'train' });
    const first = await play();
    const own = await klToStart(t, klSessions(first.sessions, true), 'base');
    expect(own.sessions).toBe(2);
    expect(own.tokens).toBeGreaterThan(0);
    expect(own.outsideSupport).toBe(0);
    expect(own.kl).toBeLessThan(1e-4);
    const job = await srv.call('POST', '/v1/training/jobs', { algorithm: 'lamer', activateWhenDone: true, version: 'moved', hyperparameters: { lr: 0.05, epochs: 4, minibatchSize: 4 } });
    expect(job.status).toBe(201);
    for (let i = 0; i < 600; i++) {
      const j = (await srv.call('GET', `/v1/training/jobs/${job.body.id}`)).body;
      if (j.status === 'succeeded') break;
      expect(['queued', 'running']).toContain(j.status);
      await new Promise((r) => setTimeout(r, 100));
    }
    const second = await play();
    expect(second.sessions.every((s) => s.modelVersion === 'moved')).toBe(true);
    const moved = await klToStart(t, klSessions(second.sessions, true), 'base');
    expect(moved.tokens).toBeGreaterThan(0);
    expect(moved.kl).toBeGreaterThan(1e-3);
    // an unknown start version is the server's refusal
    await expect(klToStart(t, klSessions(second.sessions, true), 'nope')).rejects.toThrow(/HTTP 400/);
  }, 300_000);

  it('held-out probe: eval seeds, the version asked for; baselines as chains of up to 3 single-attempt sessions', async () => {
    const t = { ...env, server: srv.url, concurrency: 4 };
    const h = { tasks: 3, every: 1, seed: 1_000_000, sampling: { temperature: 0.7, topP: 0.8, topK: 20 } };
    const lamer = await heldOutProbe(t, h, 'base', true);
    expect(lamer).toMatchObject({ version: 'base', tasks: 3, sessions: 3, errors: 0 });
    expect(Object.keys(lamer.passAtK)).toEqual(['1', '2', '3']);
    const before = (await srv.call('GET', '/v1/sessions?mode=eval&limit=200')).body.items.length;
    const single = await heldOutProbe(t, h, 'base', false);
    expect(single.sessions).toBe(3);
    const after = (await srv.call('GET', '/v1/sessions?mode=eval&limit=200')).body.items;
    const made = after.slice(0, after.length - before); // newest first
    expect(made.length).toBeGreaterThanOrEqual(3);
    expect(made.every((s: { maxAttempts: number; taskId: string; modelVersion: string }) => s.maxAttempts === 1 && /seed=1001000\d{3}$/.test(s.taskId) && s.modelVersion === 'base')).toBe(true);
  }, 300_000);
});
