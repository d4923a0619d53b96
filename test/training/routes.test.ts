/**
 * Training-job routes over real HTTP: create, list with filters and cursor
 * pagination, get with progress and per-iteration metrics, cancel (queued, running, finished),
 * validation errors that change nothing, admin-only access, a crashing job that fails without
 * taking the server down, and the schedule wired from the config.
 * Server A: builtin engine on a tiny GPT (1 layer, n_embd 16, wasm) so jobs really train.
 * Server B: test engine, API keys, a worker model I/O that exits at start (crash), a schedule.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { DEFAULT_MODEL_IO } from '../../src/training/run/worker.js';
import { dumpDb, startTestServer, tmpDir, writeTinyGptCheckpoint, type TestServer } from '../helpers/index.js';

const DOORS = ['door 1', 'door 2', 'door 3'];
const PROBLEM = 'https://lamer-server.dev/problems/';
let dir: string;
let a: TestServer;
let b: TestServer;

/** One door-game session (prize behind door (seed % 3) + 1), two attempts, `mode: train`. */
async function playDoors(s: TestServer, task: number, seed: number, headers: Record<string, string> = {}): Promise<void> {
  const created = await s.call('POST', '/v1/sessions', { taskId: `doors:seed=${task}`, instructions: 'Open the door with the prize.', env: 'doors', maxAttempts: 2, maxSteps: 2, sampling: { temperature: 1, topP: 1, topK: 0, seed } }, headers);
  expect(created.status).toBe(201);
  for (let attempt = 0; attempt < 2; attempt++) {
    const act = await s.call('POST', `/v1/sessions/${created.body.id}/steps`, { attempt, step: 0, observation: 'Three closed doors.', availableActions: DOORS }, headers);
    expect(act.status).toBe(200);
    const win = act.body.action === DOORS[task % 3];
    const done = await s.call('POST', `/v1/sessions/${created.body.id}/steps`, { attempt, step: 1, observation: win ? 'Prize!' : 'Empty.', reward: win ? 10 : -1, done: true, success: win }, headers);
    expect(done.status).toBe(200);
    if (done.body.session.status !== 'active') break;
  }
}

async function waitFor(s: TestServer, id: string, statuses: string[], headers: Record<string, string> = {}): Promise<any> {
  for (let i = 0; i < 1200; i++) {
    const r = await s.call('GET', `/v1/training/jobs/${id}`, undefined, headers);
    if (statuses.includes(r.body.status)) return r.body;
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error(`job ${id} never reached ${statuses.join('|')}`);
}

const demo = (seed: number) => ({
  env: 'doors', taskId: `doors:seed=${seed}`, instructions: 'Open the door with the prize.', memory: 'reflection_only',
  attempts: [{ steps: [{ observation: 'Three closed doors.', action: DOORS[seed % 3], reward: 0, done: false, success: false }, { observation: 'Prize!', action: null, reward: 10, done: true, success: true }], reflection: null }],
});

beforeAll(async () => {
  dir = tmpDir('lamer-trainroutes-');
  await writeTinyGptCheckpoint(join(dir, 'base-model'), 5);
  const cfg = loadConfig({});
  a = await startTestServer({ dataDir: join(dir, 'a'), engine: 'builtin', tfjsBackend: 'wasm', baseModelDir: join(dir, 'base-model'), training: { ...cfg.training, modelIO: { ...DEFAULT_MODEL_IO, options: { backend: 'wasm' } } } });
  b = await startTestServer({
    dataDir: join(dir, 'b'),
    apiKeys: [{ key: 'admin-key-1', tenant: 't1', admin: true }, { key: 'user-key-01', tenant: 't1', admin: false }],
    training: { ...cfg.training, everySessions: 2, algorithm: 'gigpo', modelIO: { module: new URL('./tiny-model.ts', import.meta.url).href, options: { crash: 'exit' } } },
  });
}, 60_000);
afterAll(async () => {
  await a?.close();
  await b?.close();
});

describe('POST /v1/training/jobs validation', () => {
  it.each([
    ['unknown algorithm', { algorithm: 'ppo' }, 'body/algorithm'],
    ['lr of 0', { algorithm: 'gigpo', hyperparameters: { lr: 0 } }, 'body/hyperparameters/lr'],
    ['lr above 1', { algorithm: 'gigpo', hyperparameters: { lr: 2 } }, 'body/hyperparameters/lr'],
    ['fractional epochs', { algorithm: 'gigpo', hyperparameters: { epochs: 1.5 } }, 'body/hyperparameters/epochs'],
    ['gammaTraj above 1', { algorithm: 'lamer', hyperparameters: { gammaTraj: 1.5 } }, 'body/hyperparameters/gammaTraj'],
    ['unknown returnMode', { algorithm: 'lamer', hyperparameters: { returnMode: 'other' } }, 'body/hyperparameters/returnMode'],
    ['unknown hyperparameter', { algorithm: 'lamer', hyperparameters: { momentum: 0.9 } }, 'body/hyperparameters/momentum'],
    ['pack not a boolean', { algorithm: 'lamer', hyperparameters: { pack: 'yes' } }, 'body/hyperparameters/pack'],
    ['unknown positionOffset', { algorithm: 'sft', demonstrations: { sessions: [demo(0)] }, hyperparameters: { positionOffset: 'sometimes' } }, 'body/hyperparameters/positionOffset'],
    ['unknown lrSchedule', { algorithm: 'lamer', hyperparameters: { lrSchedule: 'linear' } }, 'body/hyperparameters/lrSchedule'],
    ['negative warmupSteps', { algorithm: 'lamer', hyperparameters: { lrSchedule: 'cosine', warmupSteps: -1 } }, 'body/hyperparameters/warmupSteps'],
    ['warmupSteps with the constant schedule', { algorithm: 'lamer', hyperparameters: { warmupSteps: 5 } }, 'body/hyperparameters/warmupSteps'],
    ['minLrRatio with the constant schedule', { algorithm: 'sft', demonstrations: { sessions: [demo(0)] }, hyperparameters: { lrSchedule: 'constant', minLrRatio: 0.5 } }, 'body/hyperparameters/minLrRatio'],
    ['random position offsets on an RL job', { algorithm: 'lamer', hyperparameters: { positionOffset: 'random' } }, 'body/hyperparameters/positionOffset'],
    ['maxSessions 0', { algorithm: 'grpo', data: { maxSessions: 0 } }, 'body/data/maxSessions'],
    ['since not a date', { algorithm: 'rloo', data: { since: 'yesterday' } }, 'body/data/since'],
    ['sft without demonstrations', { algorithm: 'sft' }, 'body/demonstrations'],
    ['sft with both path and sessions', { algorithm: 'sft', demonstrations: { path: 'x.jsonl', sessions: [demo(0)] } }, 'body/demonstrations'],
    ['sft with a data filter', { algorithm: 'sft', data: { env: 'doors' }, demonstrations: { sessions: [demo(0)] } }, 'body/data'],
    ['RL with demonstrations', { algorithm: 'gigpo', demonstrations: { sessions: [demo(0)] } }, 'body/demonstrations'],
    ['a path leaving the demos folder', { algorithm: 'sft', demonstrations: { path: '../lamer.db' } }, 'body/demonstrations/path'],
    ['a missing demos file', { algorithm: 'sft', demonstrations: { path: 'none.jsonl' } }, 'body/demonstrations/path'],
    ['an unknown base version', { algorithm: 'lamer', baseVersion: 'nope' }, 'body/baseVersion'],
    ['a bad version name', { algorithm: 'lamer', version: '../v' }, 'body/version'],
  ])('%s is a 400 naming the field, and stores nothing', async (_name, body, field) => {
    const before = dumpDb(a.dataDir);
    const r = await a.call('POST', '/v1/training/jobs', body);
    expect(r.status).toBe(400);
    expect(r.type).toMatch(/application\/problem\+json/);
    expect(r.body.type).toBe(`${PROBLEM}validation`);
    expect(r.body.errors[0].field).toBe(field);
    expect(dumpDb(a.dataDir)).toBe(before);
  });

  it('an enum 400 lists the allowed values', async () => {
    const r = await a.call('POST', '/v1/training/jobs', { algorithm: 'lamer', hyperparameters: { lrSchedule: 'linear' } });
    expect(r.status).toBe(400);
    expect(r.body.errors).toContainEqual({ field: 'body/hyperparameters/lrSchedule', message: 'must be one of "constant", "cosine"' });
  });

  it('a version name already taken is a 409', async () => {
    const r = await a.call('POST', '/v1/training/jobs', { algorithm: 'lamer', version: 'base' });
    expect(r.status).toBe(409);
    expect(r.body.type).toBe(`${PROBLEM}conflict`);
  });
});

describe('training jobs on a serving server', () => {
  it('creates a LaMer job, reports progress and metrics, registers and activates the version', async () => {
    for (let i = 0; i < 6; i++) await playDoors(a, i % 2, i);
    const created = await a.call('POST', '/v1/training/jobs', { algorithm: 'lamer', version: 'v1', activateWhenDone: true, data: { env: 'doors' }, hyperparameters: { lr: 1e-3, epochs: 2, minibatchSize: 4, gammaTraj: 0.6 } });
    expect(created.status).toBe(201);
    expect(created.headers.get('location')).toBe(`/v1/training/jobs/${created.body.id}`);
    expect(created.body).toMatchObject({ algorithm: 'lamer', status: expect.stringMatching(/^(queued|running)$/), progress: 0, baseVersion: 'base', version: 'v1', resultVersion: null, activateWhenDone: true, data: { env: 'doors' }, hyperparameters: { lr: 1e-3, epochs: 2, minibatchSize: 4, gammaTraj: 0.6 }, metrics: [], error: null });
    expect(created.body.hyperparameters.pack).toBe(true); // the default, stored with the job
    const done = await waitFor(a, created.body.id, ['succeeded', 'failed', 'cancelled']);
    expect(done.error).toBeNull();
    expect(done).toMatchObject({ status: 'succeeded', progress: 1, resultVersion: 'v1' });
    expect(done.dataStats).toMatchObject({ sessions: 6, tasks: 2 });
    expect(done.dataStats.groups).toBe(2); // one advantage group per task
    expect(done.dataStats.zeroAdvantageGroups).toBeGreaterThanOrEqual(0);
    expect(done.dataStats.zeroAdvantageGroups).toBeLessThanOrEqual(2);
    expect(done.dataStats.droppedTurns).toBe(0);
    expect(done.metrics.length).toBe(done.iterations);
    expect(done.iterations).toBe(2 * Math.ceil(done.dataStats.samples / 4));
    expect(done.lastMetrics).toEqual(done.metrics[done.metrics.length - 1]);
    expect(done.metrics.map((m: { iteration: number }) => m.iteration)).toEqual(Array.from({ length: done.iterations }, (_, i) => i));
    for (const m of done.metrics) expect(Number.isFinite(m.loss) && m.tokens > 0 && m.lr === 1e-3).toBe(true); // constant schedule by default
    const model = await a.call('GET', '/v1/models/v1');
    expect(model.body).toMatchObject({ version: 'v1', parent: 'base', jobId: created.body.id, status: 'active' });
    // cancelling a finished job is a conflict; an unknown job is 404
    const again = await a.call('POST', `/v1/training/jobs/${created.body.id}/cancel`);
    expect(again.status).toBe(409);
    expect(again.body.type).toBe(`${PROBLEM}conflict`);
    expect((await a.call('POST', '/v1/training/jobs/job_nope/cancel')).status).toBe(404);
    expect((await a.call('GET', '/v1/training/jobs/job_nope')).status).toBe(404);
  }, 120_000);

  it('cancels a queued job at once and a running one after its iteration; SFT from inline demonstrations', async () => {
    const slow = await a.call('POST', '/v1/training/jobs', { algorithm: 'sft', demonstrations: { sessions: Array.from({ length: 12 }, (_, i) => demo(i)) }, hyperparameters: { epochs: 100, minibatchSize: 1 } });
    const queued = await a.call('POST', '/v1/training/jobs', { algorithm: 'gigpo' });
    expect([slow.status, queued.status]).toEqual([201, 201]);
    expect(slow.body.demonstrations).toMatch(/^inline\/[0-9a-f-]+\.jsonl$/);
    const c1 = await a.call('POST', `/v1/training/jobs/${queued.body.id}/cancel`);
    expect(c1.status).toBe(200);
    expect(c1.body.status).toBe('cancelled');
    expect((await a.call('POST', `/v1/training/jobs/${queued.body.id}/cancel`)).status).toBe(200); // idempotent
    await waitFor(a, slow.body.id, ['running']);
    const c2 = await a.call('POST', `/v1/training/jobs/${slow.body.id}/cancel`);
    expect(c2.status).toBe(202);
    const end = await waitFor(a, slow.body.id, ['cancelled', 'succeeded', 'failed']);
    expect(end.status).toBe('cancelled');
    expect(end.resultVersion).toBeNull();
    // a short SFT job succeeds and produces a candidate version
    const sft = await a.call('POST', '/v1/training/jobs', { algorithm: 'sft', version: 'sft1', demonstrations: { sessions: [demo(0), demo(1)] }, hyperparameters: { epochs: 1, minibatchSize: 2, positionOffset: 'random', lr: 0.002, lrSchedule: 'cosine', minLrRatio: 0.25 } });
    const sftDone = await waitFor(a, sft.body.id, ['succeeded', 'failed', 'cancelled']);
    expect(sftDone).toMatchObject({ status: 'succeeded', resultVersion: 'sft1', iterations: 1, dataStats: { sessions: 2, samples: 2 }, hyperparameters: { positionOffset: 'random', lrSchedule: 'cosine' } });
    expect(sftDone.metrics[0].lr).toBeCloseTo(0.0005, 12); // a one-step cosine job trains at lr x minLrRatio
    expect((await a.call('GET', '/v1/models/sft1')).body).toMatchObject({ status: 'candidate', parent: 'v1' });
  }, 120_000);

  it('lists jobs newest first with filters and cursor pagination', async () => {
    const all = await a.call('GET', '/v1/training/jobs');
    expect(all.status).toBe(200);
    expect(all.body.items.map((j: { status: string }) => j.status)).toEqual(['succeeded', 'cancelled', 'cancelled', 'succeeded']);
    expect(all.body.items.every((j: Record<string, unknown>) => !('metrics' in j))).toBe(true);
    expect(all.body.nextCursor).toBeNull();
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: any = await a.call('GET', `/v1/training/jobs?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(page.body.items.length).toBe(1);
      seen.push(page.body.items[0].id);
      cursor = page.body.nextCursor;
    } while (cursor);
    expect(seen).toEqual(all.body.items.map((j: { id: string }) => j.id));
    const cancelled = await a.call('GET', '/v1/training/jobs?status=cancelled');
    expect(cancelled.body.items.length).toBe(2);
    const sft = await a.call('GET', '/v1/training/jobs?algorithm=sft&status=succeeded');
    expect(sft.body.items.map((j: { resultVersion: string }) => j.resultVersion)).toEqual(['sft1']);
    expect((await a.call('GET', '/v1/training/jobs?limit=0')).status).toBe(400);
    expect((await a.call('GET', '/v1/training/jobs?cursor=nope')).status).toBe(400);
  });
});

describe('admin keys, crashes, schedule', () => {
  const admin = { authorization: 'Bearer admin-key-1' };
  const user = { authorization: 'Bearer user-key-01' };

  it('needs an admin key', async () => {
    expect((await b.call('GET', '/v1/training/jobs')).status).toBe(401);
    const r = await b.call('POST', '/v1/training/jobs', { algorithm: 'sft', demonstrations: { sessions: [demo(0)] } }, user);
    expect(r.status).toBe(403);
    expect(r.body.type).toBe(`${PROBLEM}forbidden`);
    expect((await b.call('GET', '/v1/training/jobs', undefined, admin)).body.items).toEqual([]);
  });

  it('a worker that crashes fails its job; the server keeps serving', async () => {
    const r = await b.call('POST', '/v1/training/jobs', { algorithm: 'sft', demonstrations: { sessions: [demo(0)] } }, admin);
    expect(r.status).toBe(201);
    const done = await waitFor(b, r.body.id, ['failed', 'succeeded', 'cancelled'], admin);
    expect(done.status).toBe('failed');
    expect(done.error).toMatch(/exited with code 3/);
    expect((await b.call('GET', '/healthz')).status).toBe(200);
    await playDoors(b, 0, 1, user);
  }, 60_000);

  it('starts a job by itself after LAMER_TRAIN_EVERY_SESSIONS completed training sessions', async () => {
    expect(b.app.trainingScheduler).not.toBeNull();
    await playDoors(b, 1, 2, user); // the crash test above played the first
    // the scheduler polls every 5 s; call its check directly instead of waiting
    const id = (await b.app.trainingScheduler!.check()) ?? b.app.trainingScheduler!.started[0] ?? null;
    expect(id).not.toBeNull();
    const job = await b.call('GET', `/v1/training/jobs/${id}`, undefined, admin);
    expect(job.body).toMatchObject({ algorithm: 'gigpo', activateWhenDone: false });
    expect(typeof job.body.data.since).toBe('string');
  }, 30_000);
});
