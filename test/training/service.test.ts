/**
 * TrainingService without HTTP: the body rules refuse mixed bodies by field and store nothing,
 * inline demonstrations are written under demos/inline and reported relative to demos/, listing
 * pages newest first with a `<createdAt>~<id>` cursor, and get / cancel refuse by kind. A real
 * SQLite file and the job manager with the tiny model I/O (jobs really run).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DomainError } from '../../src/agent/errors.js';
import { openDatabase, type DatabaseConnection } from '../../src/db/index.js';
import { sqliteAsyncRepositories, type AsyncRepositories } from '../../src/db/async-repositories.js';
import { models } from '../../src/db/schema.js';
import { TrainingJobManager, type VersionRegistry } from '../../src/training/run/manager.js';
import { TrainingService, type CreateJobBody } from '../../src/training/service.js';
import { TinyModel, writeTinyCheckpoint } from './tiny-model.js';
import { tmpDir } from '../helpers/index.js';

let dir: string;
let d: DatabaseConnection;
let repos: AsyncRepositories;
let service: TrainingService;

const demo = {
  env: 'doors', taskId: 'doors:seed=0', instructions: 'Open the door with the prize.', memory: 'reflection_only' as const,
  attempts: [{ steps: [{ observation: 'Three closed doors.', action: 'door 1', reward: 0, done: false, success: false }, { observation: 'Prize!', action: null, reward: 10, done: true, success: true }], reflection: null }],
};

function registry(): VersionRegistry {
  return {
    active: () => d.db.select().from(models).where(eq(models.status, 'active')).get()!,
    get: async (v) => d.db.select().from(models).where(eq(models.version, v)).get(),
    async activate() {},
  };
}

/** The DomainError `fn` throws or rejects with (fails the test when there is none or another error). */
async function refusal(fn: () => unknown): Promise<DomainError> {
  try {
    await fn();
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    return err as DomainError;
  }
  throw new Error('expected a DomainError');
}

beforeAll(async () => {
  dir = tmpDir('lamer-trainsvc-');
  d = openDatabase(dir);
  repos = sqliteAsyncRepositories(d);
  await writeTinyCheckpoint(join(dir, 'base'), TinyModel.init(300, 4, 16));
  d.db.insert(models).values({ version: 'base', parent: null, jobId: null, checkpointDir: join(dir, 'base'), status: 'active', metrics: {}, createdAt: 1 }).run();
  const manager = new TrainingJobManager({ repos, dataDir: dir, registry: registry(), modelIO: { module: new URL('./tiny-model.ts', import.meta.url).href, options: {} } });
  await manager.start();
  service = new TrainingService({ manager, jobs: repos.jobs, demosDir: join(dir, 'demos') });
});
afterAll(async () => {
  await service.close();
  d.close();
});

describe('TrainingService.create', () => {
  it.each<[string, CreateJobBody, string, string]>([
    ['sft with a data filter', { algorithm: 'sft', data: { env: 'doors' }, demonstrations: { sessions: [demo] } }, 'body/data', 'sft jobs train on demonstrations, not on recorded sessions'],
    ['RL with demonstrations', { algorithm: 'gigpo', demonstrations: { sessions: [demo] } }, 'body/demonstrations', 'only sft jobs take demonstrations, not gigpo'],
    ['random offsets on RL', { algorithm: 'grpo', hyperparameters: { positionOffset: 'random' } }, 'body/hyperparameters/positionOffset', "positionOffset 'random' is for sft jobs only (grpo trains at the positions the sampler served)"],
    ['warm-up without the cosine schedule', { algorithm: 'sft', demonstrations: { sessions: [demo] }, hyperparameters: { warmupSteps: 2 } }, 'body/hyperparameters/warmupSteps', "applies to lrSchedule 'cosine' only (lrSchedule is 'constant' by default)"],
    ['a path leaving demos/', { algorithm: 'sft', demonstrations: { path: 'a/../../x.jsonl' } }, 'body/demonstrations/path', 'must be relative to the demos folder, without ..'],
    ['since not a date', { algorithm: 'rloo', data: { since: 'yesterday' } }, 'body/data/since', 'must be a date-time'],
    ['reflectionGroup on a job that trains no reflection', { algorithm: 'gigpo', hyperparameters: { reflectionGroup: 'own' } }, 'body/hyperparameters/reflectionGroup', 'applies to lamer jobs only (gigpo trains no reflections)'],
  ])('%s is a validation error naming the field; no job, no file', async (_name, body, field, message) => {
    const e = await refusal(() => service.create(body));
    expect(e.kind).toBe('validation');
    expect(e.details.errors).toEqual([{ field, message }]);
    expect(await repos.jobs.list({ limit: 10 })).toEqual([]);
    expect(existsSync(join(dir, 'demos', 'inline'))).toBe(false);
  });

  it('writes inline demonstrations to demos/inline and names the file relative to demos/', async () => {
    const job = await service.create({ algorithm: 'sft', version: 'sft-inline', demonstrations: { sessions: [demo, { ...demo, taskId: 'doors:seed=1' }] }, hyperparameters: { epochs: 1 } });
    expect(job.demonstrations).toMatch(/^inline\/[0-9a-f-]{36}\.jsonl$/);
    expect(readdirSync(join(dir, 'demos', 'inline'))).toEqual([job.demonstrations!.slice('inline/'.length)]);
    const lines = readFileSync(join(dir, 'demos', job.demonstrations!), 'utf8').split('\n');
    expect(lines).toEqual([JSON.stringify(demo), JSON.stringify({ ...demo, taskId: 'doors:seed=1' }), '']);
    expect(job).toMatchObject({ algorithm: 'sft', baseVersion: 'base', version: 'sft-inline', data: null, activateWhenDone: false, hyperparameters: { epochs: 1 } });
    await service.whenIdle();
    expect(await service.get(job.id)).toMatchObject({ status: 'succeeded', resultVersion: 'sft-inline', dataStats: { sessions: 2 } });
  });
});

describe('TrainingService.list / get / cancel', () => {
  it('pages newest first (createdAt, then id) with a createdAt~id cursor and filters', async () => {
    await service.whenIdle();
    const row = (id: string, createdAt: number, status: 'succeeded' | 'failed' | 'cancelled') => repos.jobs.insert({
      id, algorithm: 'gigpo', status, config: { algorithm: 'gigpo', baseVersion: 'base' }, progress: 1, metrics: [], resultVersion: null, error: null, createdAt, startedAt: null, finishedAt: null,
    });
    await row('job_p1', 10, 'failed');
    await row('job_p2', 20, 'cancelled');
    await row('job_p3', 20, 'failed');
    const gigpo = { algorithm: 'gigpo' as const };
    const first = await service.list({ ...gigpo, limit: 2 });
    expect(first.items.map((j) => j.id)).toEqual(['job_p3', 'job_p2']);
    expect(first.nextCursor).toBe('20~job_p2');
    const second = await service.list({ ...gigpo, limit: 2, cursor: first.nextCursor! });
    expect(second.items.map((j) => j.id)).toEqual(['job_p1']);
    expect(second.nextCursor).toBeNull();
    expect((await service.list({ ...gigpo, status: 'failed' })).items.map((j) => j.id)).toEqual(['job_p3', 'job_p1']);
    expect(second.items[0]).toMatchObject({ createdAt: new Date(10).toISOString(), startedAt: null, iterations: 0, lastMetrics: null });
    expect(second.items[0]).not.toHaveProperty('metrics');
  });

  it('reads data counts stored under their earlier names (skippedGroups, skippedTurns) in the current shape', async () => {
    const common = { sessions: 4, tasks: 2, turns: 9, samples: 7, groups: 2, meanReturn: 1.5, passAtK: { 1: 0.5 }, outputTokens: 30 };
    const insert = (id: string, dataStats: Record<string, unknown>) => repos.jobs.insert({
      id, algorithm: 'lamer', status: 'succeeded', config: { algorithm: 'lamer', baseVersion: 'base', dataStats }, progress: 1, metrics: [], resultVersion: null, error: null, createdAt: 5, startedAt: null, finishedAt: null,
    });
    await insert('job_legacy', { ...common, skippedGroups: 1, skippedTurns: 2 });
    await insert('job_current', { ...common, zeroAdvantageGroups: 1, zeroAdvantageTurns: 2, droppedTurns: 0 });
    // earlier rows dropped zero-advantage groups: their turns were not trained
    expect((await service.get('job_legacy')).dataStats).toEqual({ ...common, zeroAdvantageGroups: 1, zeroAdvantageTurns: 2, droppedTurns: 2 });
    expect((await service.get('job_current')).dataStats).toEqual({ ...common, zeroAdvantageGroups: 1, zeroAdvantageTurns: 2, droppedTurns: 0 });
  });

  it('get of an unknown job is not-found; cancel of a finished job is a conflict, of a cancelled one a no-op', async () => {
    expect((await refusal(() => service.get('job_nope'))).kind).toBe('not-found');
    expect((await refusal(() => service.cancel('job_nope'))).kind).toBe('not-found');
    const e = await refusal(() => service.cancel('job_p1'));
    expect(e.kind).toBe('conflict');
    expect(e.message).toBe("training job 'job_p1' already failed");
    expect(await service.cancel('job_p2')).toEqual({ job: await service.get('job_p2'), running: false });
  });
});
