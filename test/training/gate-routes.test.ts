/**
 * Promotion gates over real HTTP: servers with the builtin engine on tiny GPTs (1 layer, n_embd 16,
 * wasm) record door-game training sessions; gated LaMer jobs train on them, then the gate plays
 * held-out MineSweeper tasks with the new and the active version in a worker thread of its own.
 * A margin of -1 promotes (the new version becomes active), a margin of 1 cannot be beaten (the
 * version stays a candidate); both carry the gate's figures on the job and on the version. Bad
 * gates are 400s that store nothing; a step is answered while a long gate runs (the gate is then
 * cancelled); a scheduled job carries the gate of its configuration (LAMER_TRAIN_GATE_*).
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import type { TrainingScheduler } from '../../src/training/run/scheduler.js';
import { DEFAULT_MODEL_IO } from '../../src/training/run/worker.js';
import { dumpDb, startTestServer, tmpDir, writeTinyGptCheckpoint, type TestServer } from '../helpers/index.js';

const DOORS = ['door 1', 'door 2', 'door 3'];
const PROBLEM = 'https://lamer-server.dev/problems/';
let dir: string;
let a: TestServer;

/** One door-game session (prize behind door (task % 3) + 1), two attempts, `mode: train`. */
async function playDoors(s: TestServer, task: number, seed: number): Promise<void> {
  const created = await s.call('POST', '/v1/sessions', { taskId: `doors:seed=${task}`, instructions: 'Open the door with the prize.', env: 'doors', maxAttempts: 2, maxSteps: 2, mode: 'train', sampling: { temperature: 1, topP: 1, topK: 0, seed } });
  expect(created.status).toBe(201);
  for (let attempt = 0; attempt < 2; attempt++) {
    const act = await s.call('POST', `/v1/sessions/${created.body.id}/steps`, { attempt, step: 0, observation: 'Three closed doors.', availableActions: DOORS });
    expect(act.status).toBe(200);
    const win = act.body.action === DOORS[task % 3];
    const done = await s.call('POST', `/v1/sessions/${created.body.id}/steps`, { attempt, step: 1, observation: win ? 'Prize!' : 'Empty.', reward: win ? 10 : -1, done: true, success: win });
    expect(done.status).toBe(200);
    if (done.body.session.status !== 'active') break;
  }
}

async function waitFor(s: TestServer, id: string, ok: (job: any) => boolean): Promise<any> {
  for (let i = 0; i < 6000; i++) {
    const r = await s.call('GET', `/v1/training/jobs/${id}`);
    if (ok(r.body)) return r.body;
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error(`job ${id} never reached the state waited for`);
}
const finished = (j: any) => ['succeeded', 'failed', 'cancelled'].includes(j.status);

/** A LaMer job on the door sessions with `gate` (short: 1 epoch). */
const gated = (gate: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  algorithm: 'lamer', data: { env: 'doors' }, hyperparameters: { lr: 1e-3, epochs: 1, minibatchSize: 8 }, gate, ...extra,
});
const SMALL = { env: 'minesweeper', tasks: 2, attempts: 1, concurrency: 2 };

beforeAll(async () => {
  dir = tmpDir('lamer-gate-');
  await writeTinyGptCheckpoint(join(dir, 'base-model'), 7);
  const cfg = loadConfig({});
  a = await startTestServer({ dataDir: join(dir, 'a'), engine: 'builtin', tfjsBackend: 'wasm', baseModelDir: join(dir, 'base-model'), training: { ...cfg.training, modelIO: { ...DEFAULT_MODEL_IO, options: { backend: 'wasm' } } } });
  for (let i = 0; i < 4; i++) await playDoors(a, i % 2, i);
}, 180_000);
afterAll(async () => {
  await a?.close();
});

describe('POST /v1/training/jobs with a bad gate', () => {
  it.each([
    ['an unknown env', { ...SMALL, env: 'chess' }, 'body/gate/env'],
    ['an env with impossible parameters', { ...SMALL, env: 'minesweeper-3x3-9' }, 'body/gate/env'],
    ['no tasks', { env: 'minesweeper' }, 'body/gate/tasks'],
    ['0 tasks', { ...SMALL, tasks: 0 }, 'body/gate/tasks'],
    ['too many tasks', { ...SMALL, tasks: 10_001 }, 'body/gate/tasks'],
    ['11 attempts', { ...SMALL, attempts: 11 }, 'body/gate/attempts'],
    ['seeds in the training range', { ...SMALL, seedStart: 5 }, 'body/gate/seedStart'],
    ['seeds past 2^32', { ...SMALL, seedStart: 2 ** 32 - 1 }, 'body/gate/seedStart'],
    ['a metric that is not pass@k', { ...SMALL, metric: 'return' }, 'body/gate/metric'],
    ['pass@k beyond the attempts', { ...SMALL, metric: 'pass@3' }, 'body/gate/metric'],
    ['a margin above 1', { ...SMALL, margin: 2 }, 'body/gate/margin'],
    ['an unknown decision', { ...SMALL, decision: 'median' }, 'body/gate/decision'],
    ['an unknown field', { ...SMALL, trials: 3 }, 'body/gate/trials'],
    ['bad sampling', { ...SMALL, sampling: { temperature: 0.7, topP: 0, topK: 20 } }, 'body/gate/sampling/topP'],
  ])('%s is a 400 naming the field, and stores nothing', async (_name, gate, field) => {
    const before = dumpDb(a.dataDir);
    const r = await a.call('POST', '/v1/training/jobs', gated(gate));
    expect(r.status).toBe(400);
    expect(r.body.type).toBe(`${PROBLEM}validation`);
    expect(r.body.errors[0].field).toBe(field);
    expect(dumpDb(a.dataDir)).toBe(before);
  });

  it('refuses activateWhenDone with a gate, and seeds a training session or demonstration played', async () => {
    const both = await a.call('POST', '/v1/training/jobs', gated(SMALL, { activateWhenDone: true }));
    expect(both.status).toBe(400);
    expect(both.body.errors[0].field).toBe('body/activateWhenDone');
    // a completed training session on held-out seed 1e9 + 1: a gate over seeds 1e9 .. 1e9 + 1 would judge on trained tasks
    const s = await a.call('POST', '/v1/sessions', { taskId: 'minesweeper-6x6-3:seed=1000000001', instructions: 'x', env: 'leak', maxAttempts: 1, mode: 'train' });
    expect((await a.call('POST', `/v1/sessions/${s.body.id}/steps`, { attempt: 0, step: 0, observation: 'o', availableActions: ['(1, 1)'] })).status).toBe(200);
    expect((await a.call('POST', `/v1/sessions/${s.body.id}/steps`, { attempt: 0, step: 1, observation: 'o', reward: 1, done: true, success: true })).status).toBe(200);
    const before = dumpDb(a.dataDir);
    const leak = await a.call('POST', '/v1/training/jobs', gated(SMALL, { data: { env: 'leak' } }));
    expect(leak.status).toBe(400);
    expect(leak.body.errors[0]).toMatchObject({ field: 'body/gate/seedStart', message: expect.stringContaining("'minesweeper-6x6-3:seed=1000000001'") });
    const demo = {
      env: 'minesweeper', taskId: 'minesweeper-6x6-3:seed=1000000000', instructions: 'x', memory: 'reflection_only',
      attempts: [{ steps: [{ observation: 'o', action: '(1, 1)', reward: 0, done: false, success: false }, { observation: 'o', action: null, reward: 10, done: true, success: true }], reflection: null }],
    };
    const sft = await a.call('POST', '/v1/training/jobs', { algorithm: 'sft', demonstrations: { sessions: [demo] }, gate: SMALL });
    expect(sft.status).toBe(400);
    expect(sft.body.errors[0].field).toBe('body/gate/seedStart');
    expect(dumpDb(a.dataDir)).toBe(before);
    // the same seeds shifted past the trained one are accepted (and the job is cancelled at once)
    const ok = await a.call('POST', '/v1/training/jobs', gated({ ...SMALL, seedStart: 1_000_000_002 }, { data: { env: 'leak' } }));
    expect(ok.status).toBe(201);
    expect(ok.body.gate).toMatchObject({ env: 'minesweeper-6x6-3', tasks: 2, seedStart: 1_000_000_002, metric: 'pass@1', margin: 0, decision: 'mean', status: 'pending', promoted: false });
    await a.call('POST', `/v1/training/jobs/${ok.body.id}/cancel`);
    await waitFor(a, ok.body.id, finished);
  });
});

describe('gated jobs', () => {
  it('a margin of -1 promotes: the new version is active, with the gate figures on the job and the version', async () => {
    const created = await a.call('POST', '/v1/training/jobs', gated({ ...SMALL, margin: -1 }, { version: 'g1' }));
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ activateWhenDone: false, gate: { status: 'pending', candidate: null } });
    const done = await waitFor(a, created.body.id, finished);
    expect(done.error).toBeNull();
    expect(done).toMatchObject({ status: 'succeeded', resultVersion: 'g1' });
    expect(done.gate).toMatchObject({ status: 'passed', promoted: true, candidate: 'g1', incumbent: 'base', progress: 1, sessionErrors: { candidate: 0, incumbent: 0 } });
    expect(done.gate.difference).toMatchObject({ tasks: 2, level: 0.95, resamples: 10_000 });
    expect(done.gate.difference.mean).toBeCloseTo(done.gate.candidatePassAtK['1'] - done.gate.incumbentPassAtK['1'], 12);
    expect(done.gate.difference.lo).toBeLessThanOrEqual(done.gate.difference.mean);
    expect(done.gate.reason).toMatch(/beats the margin -100\.0: activated$/);
    const models = await a.call('GET', '/v1/models');
    expect(models.body.active).toBe('g1');
    const g1 = models.body.items.find((m: { version: string }) => m.version === 'g1');
    expect(g1).toMatchObject({ status: 'active', parent: 'base', jobId: created.body.id });
    expect(g1.gate).toEqual(done.gate);
    expect(g1.metrics.gate).toEqual(done.gate);
    expect(models.body.items.find((m: { version: string }) => m.version === 'base')).toMatchObject({ status: 'retired', gate: null });
  }, 180_000);

  it('a margin of 1 cannot be beaten: the version stays a candidate and the active one stays', async () => {
    const created = await a.call('POST', '/v1/training/jobs', gated({ ...SMALL, margin: 1, decision: 'lower-bound' }, { version: 'g2' }));
    expect(created.status).toBe(201);
    const done = await waitFor(a, created.body.id, finished);
    expect(done).toMatchObject({ status: 'succeeded', resultVersion: 'g2', error: null });
    expect(done.gate).toMatchObject({ status: 'failed', promoted: false, candidate: 'g2', incumbent: 'g1', decision: 'lower-bound', margin: 1 });
    expect(done.gate.reason).toMatch(/the lower bound does not beat the margin \+100\.0$/);
    const v = await a.call('GET', '/v1/models/g2');
    expect(v.body).toMatchObject({ status: 'candidate', gate: { status: 'failed', promoted: false } });
    expect((await a.call('GET', '/v1/models')).body.active).toBe('g1');
  }, 180_000);

  it('answers steps while a long gate runs; cancelling the job stops the gate and keeps the version a candidate', async () => {
    const created = await a.call('POST', '/v1/training/jobs', gated({ env: 'minesweeper', tasks: 5000, attempts: 3, concurrency: 1, margin: -1 }, { version: 'g3' }));
    expect(created.status).toBe(201);
    await waitFor(a, created.body.id, (j) => j.gate?.status === 'running' || finished(j));
    // a session of the serving server: its steps are answered while the gate plays
    const s = await a.call('POST', '/v1/sessions', { taskId: 'doors:seed=9', instructions: 'Open the door with the prize.', env: 'doors', maxAttempts: 1, maxSteps: 2 });
    expect(s.status).toBe(201);
    const step = await a.call('POST', `/v1/sessions/${s.body.id}/steps`, { attempt: 0, step: 0, observation: 'Three closed doors.', availableActions: DOORS });
    expect(step.status).toBe(200);
    expect(DOORS).toContain(step.body.action);
    const during = await a.call('GET', `/v1/training/jobs/${created.body.id}`);
    expect(during.body.status).toBe('running');
    expect(during.body.gate).toMatchObject({ status: 'running', candidate: 'g3', incumbent: 'g1' });
    expect(during.body.gate.progress).toBeLessThan(1);
    const cancel = await a.call('POST', `/v1/training/jobs/${created.body.id}/cancel`);
    expect(cancel.status).toBe(202);
    const end = await waitFor(a, created.body.id, finished);
    expect(end).toMatchObject({ status: 'cancelled', resultVersion: 'g3', gate: { status: 'cancelled', promoted: false } });
    expect((await a.call('GET', '/v1/models/g3')).body).toMatchObject({ status: 'candidate', gate: { status: 'cancelled' } });
    expect((await a.call('GET', '/v1/models')).body.active).toBe('g1');
  }, 180_000);
});

describe('scheduled jobs with a gate from the configuration', () => {
  let b: TestServer;
  afterAll(async () => {
    await b?.close();
  });

  it('a LAMER_TRAIN_EVERY_SESSIONS job carries LAMER_TRAIN_GATE_* and is promoted by it', async () => {
    const cfg = loadConfig({
      LAMER_TRAIN_EVERY_SESSIONS: '2', LAMER_TRAIN_GATE_TASKS: '2', LAMER_TRAIN_GATE_ATTEMPTS: '1', LAMER_TRAIN_GATE_MARGIN: '-1', LAMER_TRAIN_GATE_ENV: 'minesweeper-5x5-2',
    });
    expect(cfg.training.gate).toMatchObject({ env: 'minesweeper-5x5-2', tasks: 2, attempts: 1, metric: 'pass@1', margin: -1 });
    b = await startTestServer({
      dataDir: join(dir, 'b'), engine: 'builtin', tfjsBackend: 'wasm', baseModelDir: join(dir, 'base-model'),
      training: { ...cfg.training, modelIO: { ...DEFAULT_MODEL_IO, options: { backend: 'wasm' } } },
    });
    for (let i = 0; i < 2; i++) await playDoors(b, i, i);
    const scheduler = (b.app as unknown as { trainingScheduler: TrainingScheduler }).trainingScheduler;
    const id = (await scheduler.check()) ?? scheduler.started[0];
    expect(id).toBeDefined();
    const done = await waitFor(b, id!, finished);
    expect(done).toMatchObject({ status: 'succeeded', activateWhenDone: false, gate: { env: 'minesweeper-5x5-2', tasks: 2, status: 'passed', promoted: true, incumbent: 'base' } });
    const models = await b.call('GET', '/v1/models');
    expect(models.body.active).toBe(done.resultVersion);
    expect(models.body.items.find((m: { version: string }) => m.version === done.resultVersion).gate).toMatchObject({ status: 'passed', promoted: true });
  }, 180_000);
});
