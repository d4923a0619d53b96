/**
 * One trainer among replicas (src/training/run/manager.ts over a PostgreSQL store): job managers
 * standing for replicas on one real database (test/helpers/postgres.ts; skipped, saying why, where
 * none can start), each with its own trainer lease (src/db/pg/trainer-lease.ts). At most one runs
 * jobs at a time; when its lease's connection breaks, another takes the queue and the job left
 * `running` is marked failed, as a restart of one server marks it; a server that does not run
 * jobs (LAMER_ROLE=server) only queues them; a cancel asked for on another replica stops the job;
 * a job's promotion gate (src/training/run/gate-run.ts, with a runner that answers as told) keeps
 * its report on the store, and the next holder of the lease ends a gate a dead trainer left running.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openPgDatabase, LOCK_CLASS, LOCKS, type PgConnection } from '../../../src/db/pg/connection.js';
import { pgRepositories } from '../../../src/db/pg/repositories.js';
import { pgTrainerLease } from '../../../src/db/pg/trainer-lease.js';
import type { AsyncRepositories } from '../../../src/db/async-repositories.js';
import { resolveGate } from '../../../src/shared/promotion-gate.js';
import type { GateFigures, GateReport } from '../../../src/training/run/gate.js';
import type { GateRunner } from '../../../src/training/run/gate-worker.js';
import { TrainingJobManager, type VersionRegistry } from '../../../src/training/run/manager.js';
import { TinyModel, writeTinyCheckpoint } from '../tiny-model.js';
import { tmpDir } from '../../helpers/index.js';
import { postgresForTests } from '../../helpers/postgres.js';

const pg = await postgresForTests();

let dir: string;
let url: string;
let conn: PgConnection;
let repos: AsyncRepositories;
const managers: TrainingJobManager[] = [];
const tiny = (options: Record<string, unknown> = {}) => ({ module: new URL('../tiny-model.ts', import.meta.url).href, options });

function registry(): VersionRegistry {
  return {
    active: () => ({ version: 'base' }) as ReturnType<VersionRegistry['active']>,
    get: (v) => repos.models.get(v),
    activate: async (v) => repos.models.activate(v),
  };
}

/** A replica's job manager on the database, started. */
async function replica(o: { runsJobs?: boolean; slowMs?: number; gate?: GateRunner } = {}): Promise<TrainingJobManager> {
  const m = new TrainingJobManager({
    repos, dataDir: dir, registry: registry(), modelIO: tiny(o.slowMs ? { slowMs: o.slowMs } : {}), runsJobs: o.runsJobs ?? true,
    lease: pgTrainerLease(url, 5000), pollMs: 100, ...(o.gate ? { gate: { engine: { kind: 'builtin' as const, tfjsBackend: 'cpu' }, runner: o.gate } } : {}),
  });
  await m.start();
  managers.push(m);
  return m;
}

const sft = (version: string, epochs = 1) => ({ algorithm: 'sft' as const, demosPath: join(dir, 'demos.jsonl'), version, hyper: { epochs } });
const status = async (id: string) => (await repos.jobs.get(id))!.status;

beforeAll(async () => {
  if (!pg) return;
  dir = tmpDir('lamer-trainer-pg-');
  url = await pg.freshDatabase();
  conn = await openPgDatabase(url);
  repos = pgRepositories(conn);
  await writeTinyCheckpoint(join(dir, 'base'), TinyModel.init(300, 4, 16));
  await repos.models.insert({ version: 'base', parent: null, jobId: null, checkpointDir: join(dir, 'base'), status: 'active', metrics: {}, createdAt: 1 });
  const steps = ['a', 'b', 'c', null].map((action, t) => ({ observation: `o${t}`, action, reward: 0, done: action === null, success: false }));
  writeFileSync(join(dir, 'demos.jsonl'), JSON.stringify({ env: 'minesweeper', taskId: 'm', instructions: 'P', memory: 'reflection_only', attempts: [{ steps, reflection: null }] }) + '\n');
});
afterAll(async () => {
  for (const m of managers.splice(0)) await m.close();
  await conn?.close();
});

describe.skipIf(!pg)('one trainer among replicas on PostgreSQL', () => {
  it('one replica holds the trainer lease and runs every job, one at a time, wherever they were queued; a server replica only queues', async () => {
    const a = await replica();
    const b = await replica();
    const server = await replica({ runsJobs: false });
    expect([a.holdsQueue(), b.holdsQueue(), server.holdsQueue()]).toEqual([true, false, false]);
    const jobs = [await server.create(sft('one')), await b.create(sft('two')), await a.create(sft('three'))];
    let most = 0;
    await vi.waitFor(async () => {
      const counts = await repos.jobs.countsByStatus();
      most = Math.max(most, counts.running ?? 0);
      expect(counts.succeeded ?? 0).toBe(3);
    }, { timeout: 120_000, interval: 25 });
    expect(most).toBeLessThanOrEqual(1);
    for (const j of jobs) expect((await repos.jobs.get(j.id))!.resultVersion).not.toBeNull();
    expect(b.busy()).toBe(false);
    expect(server.busy()).toBe(false);
  }, 180_000);

  it('when the holder\'s lease breaks, its job is failed and another replica takes the queue; a job left running by a dead trainer is failed', async () => {
    const [holder] = managers.filter((m) => m.holdsQueue());
    const other = managers.find((m) => m !== holder && (m as unknown as { opts: { runsJobs?: boolean } }).opts.runsJobs !== false)!;
    // a trainer that died mid-job left this row running
    await repos.jobs.insert({
      id: 'job_dead_trainer', algorithm: 'sft', status: 'running', config: { ...sft('dead'), baseVersion: 'base' }, progress: 0.5, metrics: [],
      resultVersion: null, error: null, createdAt: 5, startedAt: 5, finishedAt: null,
    });
    const slow = await replica({ slowMs: 20 });
    expect(slow.holdsQueue()).toBe(false);
    const job = await holder!.create(sft('long', 400));
    await vi.waitFor(async () => expect(await status(job.id)).toBe('running'), { timeout: 60_000, interval: 25 });
    // the holder's lock connection breaks (as when its host is lost)
    await pg!.query('SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = $1 AND classid = $2 AND objid = $3', ['advisory', LOCK_CLASS, LOCKS.trainer], new URL(url).pathname.slice(1));
    await vi.waitFor(async () => expect(await status(job.id)).toBe('failed'), { timeout: 60_000, interval: 25 });
    // by the holder itself, or first by the replica that took the lease over
    expect((await repos.jobs.get(job.id))!.error).toMatch(/lost the trainer lease|stopped while it was running/);
    expect(await repos.models.get('long')).toBeUndefined();
    await vi.waitFor(() => expect(managers.filter((m) => m.holdsQueue())).toHaveLength(1), { timeout: 30_000, interval: 25 });
    expect(holder!.holdsQueue() && other.holdsQueue()).toBe(false);
    // whoever took the lease marked the dead trainer's job failed, as a restart does
    expect(await repos.jobs.get('job_dead_trainer')).toMatchObject({ status: 'failed', error: 'the server running the job stopped while it was running' });
    const next = await holder!.create(sft('after'));
    await vi.waitFor(async () => expect(await status(next.id)).toBe('succeeded'), { timeout: 120_000, interval: 25 });
  }, 300_000);

  it('a cancel asked for on a replica that does not run the job stops it on the one that does', async () => {
    const runner = managers.find((m) => m.holdsQueue())!;
    const elsewhere = managers.find((m) => !m.holdsQueue())!;
    await vi.waitFor(() => expect(runner.busy()).toBe(false), { timeout: 60_000 });
    const job = await elsewhere.create(sft('cancelled-elsewhere', 2000));
    await vi.waitFor(async () => expect((await repos.jobs.get(job.id))!.metrics.length).toBeGreaterThan(0), { timeout: 60_000, interval: 25 });
    // a job queued behind the running one (which keeps it queued), cancelled on any replica, never runs
    const queued = await elsewhere.create(sft('never'));
    expect(await elsewhere.cancel(queued.id)).toMatchObject({ status: 'cancelled', startedAt: null });
    const answered = await elsewhere.cancel(job.id);
    expect(answered).toMatchObject({ status: 'running', cancelRequestedAt: expect.any(Number) });
    await vi.waitFor(async () => expect(await status(job.id)).toBe('cancelled'), { timeout: 60_000, interval: 25 });
    await vi.waitFor(() => expect(runner.busy()).toBe(false), { timeout: 60_000 });
    expect(await repos.jobs.get(queued.id)).toMatchObject({ status: 'cancelled', startedAt: null });
    expect(await repos.models.get('never')).toBeUndefined();
  }, 180_000);

  it('a gated job: the gate runs on the replica holding the lease, its report on the job and the version; a gate a dead trainer left running ends as an error', async () => {
    for (const m of managers.splice(0)) await m.close();
    const spec = resolveGate({ env: 'minesweeper', tasks: 4, attempts: 2 });
    // a trainer died during the gate of job_dead_gate: its version and job say `running`
    const running = { status: 'running', promoted: false, candidate: 'dead-gated', incumbent: 'base', progress: 0.5 };
    await repos.models.insert({
      version: 'dead-gated', parent: 'base', jobId: 'job_dead_gate', checkpointDir: join(dir, 'base'), status: 'candidate', metrics: { gate: running }, createdAt: 6,
    });
    await repos.jobs.insert({
      id: 'job_dead_gate', algorithm: 'sft', status: 'running', config: { ...sft('dead-gated'), baseVersion: 'base', gate: spec, gateReport: running },
      progress: 1, metrics: [], resultVersion: null, error: null, createdAt: 6, startedAt: 6, finishedAt: null,
    });
    const figures: GateFigures = {
      candidatePassAtK: { '1': 0.5, '2': 0.75 }, incumbentPassAtK: { '1': 0.25, '2': 0.5 },
      difference: { mean: 0.25, lo: 0, hi: 0.5, level: 0.95, resamples: 10_000, tasks: 4 },
      sessionErrors: { candidate: 0, incumbent: 0 }, status: 'passed', reason: 'figures say passed',
    };
    const progressed: number[] = [];
    const gated = await replica({
      gate: (req, onProgress) => {
        expect(req.incumbent.version).toBe('base');
        for (let i = 1; i <= 8; i++) onProgress(i, 8);
        progressed.push(8);
        return { done: Promise.resolve(figures), cancel: () => {} };
      },
    });
    expect(gated.holdsQueue()).toBe(true);
    const dead = (await repos.models.get('dead-gated'))!.metrics.gate as GateReport;
    expect(dead).toMatchObject({ status: 'error', reason: 'the server stopped while the gate ran: the version stays a candidate' });
    expect(await repos.jobs.get('job_dead_gate')).toMatchObject({ status: 'failed', config: { gateReport: { status: 'error' } } });

    const job = await gated.create({ ...sft('gated'), gate: spec });
    await vi.waitFor(async () => expect(await status(job.id)).toBe('succeeded'), { timeout: 120_000, interval: 25 });
    expect(progressed).toEqual([8]);
    const version = (await repos.models.get('gated'))!;
    expect(version.status).toBe('active');
    const report = version.metrics.gate as GateReport;
    expect(report).toMatchObject({ status: 'passed', promoted: true, candidate: 'gated', incumbent: 'base', progress: 1, reason: 'figures say passed: activated' });
    // the progress writes and the final one, one after another: the job ends with the final report
    expect(((await repos.jobs.get(job.id))!.config as { gateReport: GateReport }).gateReport).toEqual(report);
  }, 180_000);
});
