import { writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type DatabaseConnection } from '../../../src/db/index.js';
import { sqliteAsyncRepositories } from '../../../src/db/async-repositories.js';
import { models, sessions, steps } from '../../../src/db/schema.js';
import { TrainingJobManager, type ManagerOptions, type VersionRegistry } from '../../../src/training/run/manager.js';
import { TinyModel, writeTinyCheckpoint } from '../tiny-model.js';
import { tmpDir } from '../../helpers/index.js';

let dir: string;
let d: DatabaseConnection;
const tiny = (options: Record<string, unknown> = {}) => ({ module: new URL('../tiny-model.ts', import.meta.url).href, options });

function registry(): VersionRegistry {
  return {
    active: () => d.db.select().from(models).where(eq(models.status, 'active')).get()!,
    get: async (v) => d.db.select().from(models).where(eq(models.version, v)).get(),
    async activate(v) {
      d.db.update(models).set({ status: 'retired' }).where(eq(models.status, 'active')).run();
      d.db.update(models).set({ status: 'active' }).where(eq(models.version, v)).run();
    },
  };
}

/** A manager over the test database, started (jobs left running are failed, queued ones taken). */
async function manager(opts: Omit<ManagerOptions, 'repos'>): Promise<TrainingJobManager> {
  const m = new TrainingJobManager({ repos: sqliteAsyncRepositories(d), ...opts });
  await m.start();
  return m;
}

function addSession(id: string, taskId: string, attempts: Array<Array<[string, number, number[] | null]>>, success: boolean) {
  d.db.insert(sessions).values({
    id, tenant: 'default', taskId, env: 'minesweeper', mode: 'train', status: 'completed', instructions: 'Play.', maxAttempts: 3, maxSteps: 7,
    memory: 'reflection_only', sampling: {}, modelVersion: 'base', metadata: {}, nextAttempt: 0, nextStep: 0, attempts: [], createdAt: 1000, updatedAt: 1000,
  }).run();
  attempts.forEach((rows, a) => rows.forEach(([obs, reward, out], t) => {
    const last = t === rows.length - 1;
    d.db.insert(steps).values({
      sessionId: id, attempt: a, step: t, kind: 'action', observation: obs, reward, done: last, success: last && success && a === attempts.length - 1,
      invalidAction: false, promptTokenIds: out ? [5, 6] : null, outputTokenIds: out, logprobs: out ? out.map(() => -5.7) : null,
      modelVersion: 'base', requestHash: `${id}${a}${t}`, createdAt: 1000,
    }).run();
  }));
}

beforeAll(async () => {
  dir = tmpDir('lamer-manager-');
  d = openDatabase(dir);
  await writeTinyCheckpoint(join(dir, 'base'), TinyModel.init(300, 4, 16));
  d.db.insert(models).values({ version: 'base', parent: null, jobId: null, checkpointDir: join(dir, 'base'), status: 'active', metrics: {}, createdAt: 1 }).run();
  addSession('s1', 'T', [[['A', 0, [10]], ['B', -1, null]], [['A', 0, [11]], ['W', 10, null]]], true);
  addSession('s2', 'T', [[['A', 0, [12]], ['W', 10, null]]], true);
  addSession('s3', 'U', [[['A', 0, [13]], ['B', 1, null]]], false);
  addSession('s4', 'U', [[['A', 0, [13]], ['B', 1, null]]], false);
  writeFileSync(join(dir, 'demos.jsonl'), JSON.stringify({ env: 'minesweeper', taskId: 'm', instructions: 'P', memory: 'reflection_only', attempts: [{ steps: [{ observation: 'o', action: 'a', reward: 0, done: false, success: false }, { observation: 'p', action: null, reward: 10, done: true, success: true }], reflection: null }] }) + '\n');
});
afterAll(() => { d.close(); });

describe('TrainingJobManager', () => {
  it('runs a lamer job: zero-advantage groups trained and reported, metrics recorded, new version registered and activated', async () => {
    const m = await manager({ dataDir: dir, registry: registry(), modelIO: tiny() });
    const job = await m.create({ algorithm: 'lamer', version: 'v1', activate: true, hyper: { lr: 0.01, epochs: 2, minibatchSize: 2 } });
    expect(job.status).toBe('queued'); // as created; the queue was empty: it starts at once
    await m.whenIdle();
    const done = (await m.get(job.id))!;
    expect(done.error).toBeNull();
    expect(done.status).toBe('succeeded');
    expect(done.resultVersion).toBe('v1');
    expect(done.progress).toBe(1);
    // 3 samples of task T + 2 of task U (every advantage 0, trained all the same), minibatch 2
    // (3 minibatches an epoch), 2 epochs
    expect(done.metrics).toHaveLength(6);
    const stats = (done.config as { dataStats: { zeroAdvantageGroups: number; zeroAdvantageTurns: number; groups: number; samples: number } }).dataStats;
    expect(stats).toMatchObject({ groups: 2, zeroAdvantageGroups: 1, zeroAdvantageTurns: 2, droppedTurns: 0, samples: 5 });
    const v1 = d.db.select().from(models).where(eq(models.version, 'v1')).get()!;
    expect(v1).toMatchObject({ parent: 'base', jobId: job.id, status: 'active', checkpointDir: join(dir, 'checkpoints', 'v1') });
    expect(existsSync(join(dir, 'checkpoints', 'v1', 'tiny.json'))).toBe(true);
    const adv = d.db.select().from(steps).where(eq(steps.sessionId, 's1')).all().filter((r) => r.outputTokenIds);
    expect(adv.every((r) => typeof r.advantage === 'number')).toBe(true);
    await m.close();
  });
  it('fails a job without data, cancels a queued one, runs sft, and survives a crashing worker', async () => {
    const m = await manager({ dataDir: dir, registry: registry(), modelIO: tiny() });
    const empty = await m.create({ algorithm: 'grpo', data: { taskIds: ['none'] } });
    const sft = await m.create({ algorithm: 'sft', demosPath: join(dir, 'demos.jsonl'), version: 'sft1', baseVersion: 'base', hyper: { epochs: 2 } });
    const queued = await m.create({ algorithm: 'rloo' });
    expect((await m.cancel(queued.id))!.status).toBe('cancelled');
    await m.whenIdle();
    expect(await m.get(empty.id)).toMatchObject({ status: 'failed', error: expect.stringMatching(/no training samples/) });
    expect(await m.get(sft.id)).toMatchObject({ status: 'succeeded', resultVersion: 'sft1' });
    expect(d.db.select().from(models).where(eq(models.version, 'sft1')).get()!.status).toBe('candidate');
    await expect(m.create({ algorithm: 'sft' })).rejects.toThrow(/demosPath/);
    await expect(m.create({ algorithm: 'lamer', version: 'sft1' })).rejects.toThrow(/already exists/);
    await expect(m.create({ algorithm: 'lamer', baseVersion: 'nope' })).rejects.toThrow(/unknown base version/);
    await m.close();

    const crashing = await manager({ dataDir: dir, registry: registry(), modelIO: tiny({ crash: 'exit' }) });
    const j = await crashing.create({ algorithm: 'lamer' });
    await crashing.whenIdle();
    expect(await crashing.get(j.id)).toMatchObject({ status: 'failed', error: expect.stringMatching(/exited with code 3/) });
    await crashing.close();
  });
  it('packs each attempt whose recorded prompts extend each other into one sample (pack: false: one per turn); scores stay per turn', async () => {
    // task P: two sessions of 3 acting turns; prompt(t+1) = prompt(t) + output(t) without its last token (EOS 257) + a tail
    for (const [id, rewards] of [['p1', [0, 1, 2, 5]], ['p2', [0, -1, 0, -2]]] as const) {
      d.db.insert(sessions).values({
        id, tenant: 'default', taskId: 'P', env: 'minesweeper', mode: 'train', status: 'completed', instructions: 'Play.', maxAttempts: 1, maxSteps: 7,
        memory: 'reflection_only', sampling: {}, modelVersion: 'base', metadata: {}, nextAttempt: 0, nextStep: 0, attempts: [], createdAt: 2000, updatedAt: 2000,
      }).run();
      let prompt = [256, 5, 6];
      rewards.forEach((reward, t) => {
        const out = t < 3 ? [40 + t, 257] : null;
        d.db.insert(steps).values({
          sessionId: id, attempt: 0, step: t, kind: 'action', observation: `o${t}`, reward, done: t === 3, success: false, invalidAction: false,
          promptTokenIds: out ? prompt : null, outputTokenIds: out, logprobs: out ? [-1, -0.5] : null, modelVersion: 'base', requestHash: `${id}${t}`, createdAt: 2000,
        }).run();
        if (out) prompt = [...prompt, out[0], 7, 8];
      });
    }
    const m = await manager({ dataDir: dir, registry: registry(), modelIO: tiny() });
    const packed = await m.create({ algorithm: 'gigpo', version: 'packed', data: { taskIds: ['P'] }, hyper: { lr: 0.01, minibatchSize: 3 } });
    const plain = await m.create({ algorithm: 'gigpo', version: 'unpacked', data: { taskIds: ['P'] }, hyper: { lr: 0.01, minibatchSize: 3, pack: false } });
    await m.whenIdle();
    const stats = async (id: string) => ((await m.get(id))!.config as { dataStats: { turns: number; samples: number; outputTokens: number } }).dataStats;
    expect(await m.get(packed.id)).toMatchObject({ status: 'succeeded', resultVersion: 'packed' });
    expect(await stats(packed.id)).toMatchObject({ turns: 6, samples: 2, outputTokens: 12 });
    expect(await stats(plain.id)).toMatchObject({ turns: 6, samples: 6, outputTokens: 12 });
    // minibatches of 3 turns: 2 steps either way
    expect((await m.get(packed.id))!.metrics).toHaveLength(2);
    expect((await m.get(plain.id))!.metrics).toHaveLength(2);
    const rows = d.db.select().from(steps).where(eq(steps.sessionId, 'p1')).all().filter((r) => r.outputTokenIds);
    expect(rows.map((r) => r.advantage === null)).toEqual([false, false, false]);
    // sft: a demonstration of 3 actions is one packed sequence, or 3 with pack: false
    const demoSteps = ['a', 'b', 'c', null].map((action, t) => ({ observation: `o${t}`, action, reward: 0, done: action === null, success: false }));
    writeFileSync(join(dir, 'demos3.jsonl'), JSON.stringify({ env: 'minesweeper', taskId: 'm', instructions: 'P', memory: 'reflection_only', attempts: [{ steps: demoSteps, reflection: null }] }) + '\n');
    const sftPacked = await m.create({ algorithm: 'sft', demosPath: join(dir, 'demos3.jsonl'), version: 'sft-packed', hyper: { epochs: 1 } });
    const sftPlain = await m.create({ algorithm: 'sft', demosPath: join(dir, 'demos3.jsonl'), version: 'sft-unpacked', hyper: { epochs: 1, pack: false } });
    await m.whenIdle();
    expect(await stats(sftPacked.id)).toMatchObject({ turns: 3, samples: 1 });
    expect(await stats(sftPlain.id)).toMatchObject({ turns: 3, samples: 3 });
    await m.close();
  }, 180_000); // four jobs, each in its own worker thread

  it("reflectionGroup 'own' reaches the advantages the job writes back: the reflection no longer centred against the attempts", async () => {
    // task R, one trial: attempt 0 A (r 0) -> B (r -1, done), a reflection, attempt 1 A (r 0) -> W (r 10, done, success).
    // Turns with a model output: attempt 0's acting turn (score -1: B's reward is its action's), the
    // reflection (0), attempt 1's acting turn (10). 'task': the reflection's episode term is
    // 0 - mean(-1, 0, 10) = -3; 'own': it is alone in its kind (mean 0): 0. Its anchor group has one turn
    // (step term 0), so its advantage is -3, then 0.
    d.db.insert(sessions).values({
      id: 'r1', tenant: 'default', taskId: 'R', env: 'minesweeper', mode: 'train', status: 'completed', instructions: 'Play.', maxAttempts: 3, maxSteps: 7,
      memory: 'reflection_only', sampling: {}, modelVersion: 'base', metadata: {}, nextAttempt: 0, nextStep: 0, attempts: [], createdAt: 3000, updatedAt: 3000,
    }).run();
    const row = (attempt: number, step: number, kind: 'action' | 'reflection', observation: string, reward: number, out: number[] | null, done = false, success = false) =>
      d.db.insert(steps).values({
        sessionId: 'r1', attempt, step, kind, observation, reward, done, success, invalidAction: false, promptTokenIds: out ? [5, 6] : null,
        outputTokenIds: out, logprobs: out ? out.map(() => -5.7) : null, modelVersion: 'base', requestHash: `r1${attempt}${step}${kind}`, createdAt: 3000,
      }).run();
    row(0, 0, 'action', 'A', 0, [20]);
    row(0, 1, 'action', 'B', -1, null, true);
    row(0, 1, 'reflection', 'B', 0, [21, 22]);
    row(1, 0, 'action', 'A', 0, [23]);
    row(1, 1, 'action', 'W', 10, null, true, true);
    const m = await manager({ dataDir: dir, registry: registry(), modelIO: tiny() });
    const reflectionAdvantage = async (hyper: Record<string, unknown>) => {
      const job = await m.create({ algorithm: 'lamer', data: { taskIds: ['R'] }, hyper: { lr: 0.01, ...hyper } });
      await m.whenIdle();
      expect((await m.get(job.id))!.status).toBe('succeeded');
      return d.db.select().from(steps).where(eq(steps.sessionId, 'r1')).all().find((r) => r.kind === 'reflection')!.advantage;
    };
    expect(await reflectionAdvantage({})).toBeCloseTo(-3, 6);
    expect(await reflectionAdvantage({ reflectionGroup: 'own' })).toBeCloseTo(0, 6);
    await m.close();
  });

  it('cancels a running job', async () => {
    const m = await manager({ dataDir: dir, registry: registry(), modelIO: tiny({ slowMs: 30 }) });
    const j = await m.create({ algorithm: 'lamer', version: 'slow', hyper: { epochs: 200, minibatchSize: 1 } });
    while ((await m.get(j.id))!.metrics.length < 1) await new Promise((r) => setTimeout(r, 20));
    expect((await m.get(j.id))!.status).toBe('running');
    await m.cancel(j.id);
    await m.whenIdle();
    expect((await m.get(j.id))!.status).toBe('cancelled');
    expect(d.db.select().from(models).where(eq(models.version, 'slow')).get()).toBeUndefined();
    await m.close();
  });
  it('a database refusing the job\'s bookkeeping writes (locked by another process) is logged, never an unhandled rejection', async () => {
    const errors: string[] = [];
    const logger = { info: () => {}, warn: () => {}, error: (_o: object, msg?: string) => errors.push(msg ?? '') };
    const m = await manager({ dataDir: dir, registry: registry(), modelIO: tiny(), logger });
    const holder = new Database(d.file);
    try {
      const job = await m.create({ algorithm: 'grpo', version: 'locked1' });
      while ((await m.get(job.id))!.status !== 'running') await new Promise((r) => setTimeout(r, 2));
      holder.exec('BEGIN IMMEDIATE'); // every later write of the job is refused as busy
      await expect(m.whenIdle()).resolves.toBeUndefined();
      expect(errors).toContain('training job could not record its state in the database');
      holder.exec('ROLLBACK');
      expect((await m.get(job.id))!.status).toBe('running'); // stale until the next start marks it failed
    } finally {
      if (holder.inTransaction) holder.exec('ROLLBACK');
      holder.close();
      await m.close();
    }
  });
});

describe('TrainingJobManager job rules at creation', () => {
  it('bounds the queue: past maxQueuedJobs a job is refused (too-many-jobs, Retry-After) and nothing is stored', async () => {
    const { DomainError } = await import('../../../src/agent/errors.js');
    const m = await manager({ dataDir: dir, registry: registry(), modelIO: tiny(), maxQueuedJobs: 2, queueRetryAfterSeconds: 30 });
    const req = { algorithm: 'grpo' as const, hyper: { epochs: 1 } };
    const jobs = [await m.create(req), await m.create(req), await m.create(req)];
    expect(jobs.map((j) => j.status)).toEqual(['queued', 'queued', 'queued']);
    expect((await m.get(jobs[0]!.id))!.status).toBe('running'); // the first started at once
    const stored = (await m.list(10_000)).length;
    let err: unknown = null;
    try {
      await m.create(req);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DomainError);
    expect(err).toMatchObject({ kind: 'too-many-jobs', details: { retryAfterSeconds: 30 } });
    expect((err as Error).message).toBe('2 training jobs are queued (limit 2, LAMER_TRAIN_MAX_QUEUED_JOBS); wait for them or cancel some, then send the job again');
    expect((await m.list(10_000)).length).toBe(stored);
    // cancelling a queued job frees its place
    await m.cancel(jobs[2]!.id);
    const again = await m.create(req);
    expect(again.status).toBe('queued');
    for (const j of [jobs[1]!, again]) await m.cancel(j.id);
    await m.close();
  });

  it('refuses an sft job on a remote base version when it is created (400 naming the field), storing nothing', async () => {
    d.db.insert(models).values({
      version: 'remote-base', parent: null, jobId: null, checkpointDir: '', status: 'candidate', metrics: {}, createdAt: 2, engine: 'openai',
      engineConfig: { baseUrl: 'http://127.0.0.1:1/v1', model: 'm', kind: 'plain', concurrency: 1, timeoutMs: 1000, maxRetries: 0, maxActionTokens: 8, maxReflectionTokens: 8 },
    }).run();
    const m = await manager({ dataDir: dir, registry: registry(), modelIO: tiny() });
    const stored = (await m.list(10_000)).length;
    let err: unknown = null;
    try {
      await m.create({ algorithm: 'sft', demosPath: join(dir, 'demos.jsonl'), baseVersion: 'remote-base' });
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ kind: 'validation', details: { errors: [{ field: 'body/baseVersion' }] } });
    expect((err as Error).message).toContain("base version 'remote-base' is remote");
    expect((await m.list(10_000)).length).toBe(stored);
    await m.close();
  });
});
