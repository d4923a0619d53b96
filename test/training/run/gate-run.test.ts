/**
 * A job's promotion gate as the manager runs it (src/training/run/gate-run.ts), with the tiny
 * trainable model and gate runners that answer as told (the worker thread and its evaluator are
 * tested over HTTP in test/training/gate-routes.test.ts): a gate that passes activates the version
 * unless the active version changed meanwhile; one that fails, errs or is cancelled leaves it a
 * candidate; trained tasks among the gate's are refused; the rules at creation; gates a stopped
 * server left running end as errors at the next start.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type DatabaseConnection } from '../../../src/db/index.js';
import { sqliteAsyncRepositories } from '../../../src/db/async-repositories.js';
import { models, sessions, steps, trainingJobs } from '../../../src/db/schema.js';
import { resolveGate } from '../../../src/shared/promotion-gate.js';
import type { GateFigures, GateReport } from '../../../src/training/run/gate.js';
import { GateCancelledError, type GateRunner } from '../../../src/training/run/gate-worker.js';
import { TrainingJobManager, type VersionRegistry } from '../../../src/training/run/manager.js';
import { TinyModel, writeTinyCheckpoint } from '../tiny-model.js';
import { tmpDir } from '../../helpers/index.js';

let dir: string;
let d: DatabaseConnection;
const tiny = { module: new URL('../tiny-model.ts', import.meta.url).href };
const SPEC = resolveGate({ env: 'minesweeper', tasks: 4, attempts: 2 });
const ENGINE = { kind: 'builtin' as const, tfjsBackend: 'cpu' };

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

const figures = (status: GateFigures['status']): GateFigures => ({
  candidatePassAtK: { '1': 0.5, '2': 0.75 }, incumbentPassAtK: { '1': 0.25, '2': 0.5 },
  difference: { mean: 0.25, lo: 0, hi: 0.5, level: 0.95, resamples: 10_000, tasks: 4 },
  sessionErrors: { candidate: 0, incumbent: 0 }, status, reason: `figures say ${status}`,
});

/** A runner that reports half-way progress, runs `during` and then settles as `outcome` says. */
function runner(outcome: GateFigures | Error, during: () => void = () => {}, seen: { workDir?: string; incumbent?: string } = {}): GateRunner {
  return (req, onProgress) => {
    seen.workDir = req.workDir;
    seen.incumbent = req.incumbent.version;
    expect(existsSync(req.workDir)).toBe(true);
    onProgress(4, 8);
    during();
    return { done: outcome instanceof Error ? Promise.reject(outcome) : Promise.resolve(outcome), cancel: () => {} };
  };
}

/** A manager over the test database, started (as a server starts it: gates and jobs a stopped one left are ended). */
async function manager(run: GateRunner | null): Promise<TrainingJobManager> {
  const m = new TrainingJobManager({
    repos: sqliteAsyncRepositories(d), dataDir: dir, registry: registry(), modelIO: tiny, ...(run ? { gate: { engine: ENGINE, runner: run } } : {}),
  });
  await m.start();
  return m;
}
const gateOf = (version: string) => d.db.select().from(models).where(eq(models.version, version)).get()!.metrics.gate as GateReport;
const statusOf = (version: string) => d.db.select().from(models).where(eq(models.version, version)).get()!.status;

beforeAll(async () => {
  dir = tmpDir('lamer-gate-run-');
  d = openDatabase(dir);
  await writeTinyCheckpoint(join(dir, 'base'), TinyModel.init(300, 4, 16));
  d.db.insert(models).values({ version: 'base', parent: null, jobId: null, checkpointDir: join(dir, 'base'), status: 'active', metrics: {}, createdAt: 1 }).run();
  d.db.insert(sessions).values({
    id: 's1', tenant: 'default', taskId: 'T', env: 'doors', mode: 'train', status: 'completed', instructions: 'Play.', maxAttempts: 1, maxSteps: 7,
    memory: 'reflection_only', sampling: {}, modelVersion: 'base', metadata: {}, nextAttempt: 0, nextStep: 0, attempts: [], createdAt: 1000, updatedAt: 1000,
  }).run();
  for (const [t, out] of [[0, [10]], [1, null]] as const) {
    d.db.insert(steps).values({
      sessionId: 's1', attempt: 0, step: t, kind: 'action', observation: 'o', reward: t === 1 ? 10 : 0, done: t === 1, success: t === 1, invalidAction: false,
      promptTokenIds: out ? [5, 6] : null, outputTokenIds: out ? [...out] : null, logprobs: out ? [-5.7] : null, modelVersion: 'base', requestHash: `s1${t}`, createdAt: 1000,
    }).run();
  }
});
afterAll(() => d.close());

describe('a gated job', () => {
  it('passes: the version is activated, with the figures on the job and the version; the scratch folder is removed', async () => {
    const seen: { workDir?: string; incumbent?: string } = {};
    const m = await manager(runner(figures('passed'), undefined, seen));
    const job = await m.create({ algorithm: 'grpo', version: 'p1', gate: SPEC, hyper: { epochs: 1 } });
    await m.whenIdle();
    expect(await m.get(job.id)).toMatchObject({ status: 'succeeded', resultVersion: 'p1', error: null });
    expect(statusOf('p1')).toBe('active');
    const g = gateOf('p1');
    expect(g).toMatchObject({ status: 'passed', promoted: true, candidate: 'p1', incumbent: 'base', progress: 1, candidatePassAtK: { '1': 0.5 }, reason: 'figures say passed: activated' });
    expect(((await m.get(job.id))!.config as { gateReport: GateReport }).gateReport).toEqual(g);
    expect(seen.incumbent).toBe('base');
    expect(existsSync(seen.workDir!)).toBe(false);
    await m.close();
  });

  it('passes, but the active version changed during the gate: not activated', async () => {
    const m = await manager(runner(figures('passed'), () => void registry().activate('base')));
    const job = await m.create({ algorithm: 'grpo', version: 'p2', gate: SPEC, hyper: { epochs: 1 } });
    await m.whenIdle();
    expect(await m.get(job.id)).toMatchObject({ status: 'succeeded', error: null });
    expect(gateOf('p2')).toMatchObject({ status: 'passed', promoted: false, incumbent: 'p1', reason: expect.stringMatching(/active version changed during the gate \(to 'base'\): not activated$/) });
    expect(statusOf('p2')).toBe('candidate');
    expect(registry().active().version).toBe('base');
    await m.close();
  });

  it('fails, errs or is cancelled: the version stays a candidate', async () => {
    const failed = await manager(runner(figures('failed')));
    const j1 = await failed.create({ algorithm: 'grpo', version: 'f1', gate: SPEC, hyper: { epochs: 1 } });
    await failed.whenIdle();
    expect(await failed.get(j1.id)).toMatchObject({ status: 'succeeded', error: null });
    expect(gateOf('f1')).toMatchObject({ status: 'failed', promoted: false, reason: 'figures say failed' });
    await failed.close();

    const broken = await manager(runner(new Error('checkpoint unreadable')));
    const j2 = await broken.create({ algorithm: 'grpo', version: 'e1', gate: SPEC, hyper: { epochs: 1 } });
    await broken.whenIdle();
    expect(await broken.get(j2.id)).toMatchObject({ status: 'succeeded', resultVersion: 'e1', error: 'trained, but the gate failed: checkpoint unreadable' });
    expect(gateOf('e1')).toMatchObject({ status: 'error', promoted: false, reason: 'the evaluation failed: checkpoint unreadable' });
    await broken.close();

    const cancelled = await manager(runner(new GateCancelledError()));
    const j3 = await cancelled.create({ algorithm: 'grpo', version: 'c1', gate: SPEC, hyper: { epochs: 1 } });
    await cancelled.whenIdle();
    expect(await cancelled.get(j3.id)).toMatchObject({ status: 'cancelled', resultVersion: 'c1' });
    expect(gateOf('c1')).toMatchObject({ status: 'cancelled', promoted: false });
    for (const v of ['f1', 'e1', 'c1']) expect(statusOf(v)).toBe('candidate');
    expect(registry().active().version).toBe('base');
    await cancelled.close();
  }, 180_000); // three jobs, each in its own worker thread

  it('refuses to judge on tasks the job trained on (demonstrations read at run time)', async () => {
    const demo = {
      env: 'minesweeper', taskId: 'minesweeper-6x6-3:seed=1000000002', instructions: 'P', memory: 'reflection_only',
      attempts: [{ steps: [{ observation: 'o', action: 'a', reward: 0, done: false, success: false }, { observation: 'p', action: null, reward: 10, done: true, success: true }], reflection: null }],
    };
    writeFileSync(join(dir, 'leak.jsonl'), JSON.stringify(demo) + '\n');
    let ran = false;
    const m = await manager(() => { ran = true; throw new Error('not reached'); });
    const job = await m.create({ algorithm: 'sft', demosPath: join(dir, 'leak.jsonl'), version: 'leak1', gate: SPEC, hyper: { epochs: 1 } });
    await m.whenIdle();
    expect(ran).toBe(false);
    expect((await m.get(job.id))!.error).toMatch(/^trained, but the gate refused: the job trained on task 'minesweeper-6x6-3:seed=1000000002'/);
    expect(gateOf('leak1')).toMatchObject({ status: 'error', promoted: false });
    expect(statusOf('leak1')).toBe('candidate');
    await m.close();
  });

  it('is refused at creation without gates on the server, with activate, or with trained tasks among the gate\'s', async () => {
    const none = await manager(null);
    await expect(none.create({ algorithm: 'grpo', gate: SPEC })).rejects.toThrow(/runs no promotion gates/);
    await none.close();
    const m = await manager(runner(figures('passed')));
    await expect(m.create({ algorithm: 'grpo', gate: SPEC, activate: true })).rejects.toThrow(/leave activateWhenDone out/);
    d.db.update(sessions).set({ taskId: 'minesweeper-6x6-3:seed=1000000003' }).where(eq(sessions.id, 's1')).run();
    try {
      const before = (await m.list(1000)).length;
      await expect(m.create({ algorithm: 'grpo', gate: SPEC })).rejects.toThrow(/the training data holds task 'minesweeper-6x6-3:seed=1000000003'/);
      expect((await m.list(1000)).length).toBe(before);
      await expect(m.create({ algorithm: 'grpo', gate: { ...SPEC, seedStart: 1_000_000_004 }, hyper: { epochs: 1 } })).resolves.toMatchObject({ status: 'queued' });
      await m.whenIdle();
    } finally {
      d.db.update(sessions).set({ taskId: 'T' }).where(eq(sessions.id, 's1')).run();
      await m.close();
    }
  });
});

describe('a restart', () => {
  it('ends the gates a stopped server left pending or running as errors, on the version and the job', async () => {
    const report = { ...(gateOf('p1')), status: 'running', promoted: false, candidate: 'r1' };
    d.db.insert(models).values({ version: 'r1', parent: 'base', jobId: 'job_r1', checkpointDir: join(dir, 'base'), status: 'candidate', metrics: { gate: report }, createdAt: 5 }).run();
    d.db.insert(trainingJobs).values({
      id: 'job_r1', algorithm: 'grpo', status: 'running', config: { algorithm: 'grpo', baseVersion: 'base', gate: SPEC, gateReport: report },
      progress: 1, metrics: [], resultVersion: null, error: null, createdAt: 5, startedAt: 5, finishedAt: null,
    }).run();
    const m = await manager(runner(figures('passed')));
    expect(gateOf('r1')).toMatchObject({ status: 'error', reason: 'the server stopped while the gate ran: the version stays a candidate' });
    expect(await m.get('job_r1')).toMatchObject({ status: 'failed', config: { gateReport: { status: 'error' } } });
    await m.close();
  });
});
