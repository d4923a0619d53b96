import { tmpDir } from '../../helpers/index.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openDatabase, type DatabaseConnection } from '../../../src/db/index.js';
import { sqliteAsyncRepositories } from '../../../src/db/async-repositories.js';
import { sessions } from '../../../src/db/schema.js';
import type { CreateJobRequest } from '../../../src/training/run/manager.js';
import { TrainingScheduler } from '../../../src/training/run/scheduler.js';

let dir: string;
let d: DatabaseConnection;
let n = 0;
const addSession = (o: { mode?: 'train' | 'eval'; status?: 'completed' | 'active' } = {}) => d.db.insert(sessions).values({
  id: `s${n++}`, tenant: 'default', taskId: 'T', env: 'minesweeper', mode: o.mode ?? 'train', status: o.status ?? 'completed', instructions: 'P', maxAttempts: 3, maxSteps: 7,
  memory: 'reflection_only', sampling: {}, modelVersion: 'base', metadata: {}, nextAttempt: 0, nextStep: 0, attempts: [], createdAt: Date.now(), updatedAt: Date.now(),
}).run();

function fakeStarter() {
  const created: CreateJobRequest[] = [];
  let busy = false;
  return { created, setBusy: (b: boolean) => { busy = b; }, async create(req: CreateJobRequest) { created.push(req); return { id: `job${created.length}` }; }, busy: () => busy };
}

beforeAll(() => { dir = tmpDir('lamer-sched-'); d = openDatabase(dir); addSession(); });
afterAll(() => { d.close(); });

describe('TrainingScheduler', () => {
  it('starts a job every N newly completed training sessions, with the data window since the last trigger', async () => {
    const st = fakeStarter();
    const s = new TrainingScheduler(sqliteAsyncRepositories(d).trainingData, st, { everySessions: 3, job: { algorithm: 'lamer', version: 'fixed', activate: true } }, undefined, 12345);
    await s.start();
    s.stop(); // checked by hand below
    addSession(); addSession(); addSession({ mode: 'eval' }); addSession({ status: 'active' });
    expect(await s.check()).toBeNull(); // 2 new completed training sessions
    addSession();
    expect(await s.check()).toBe('job1');
    expect(st.created[0]).toEqual({ algorithm: 'lamer', activate: true, data: { since: 12345 } });
    expect(await s.check()).toBeNull(); // counter restarts
    addSession(); addSession(); addSession();
    st.setBusy(true);
    expect(await s.check()).toBeNull(); // one job at a time: skipped while busy
    st.setBusy(false);
    expect(await s.check()).toBe('job2');
    expect(st.created[1].data!.since).toBeGreaterThan(12345);
    expect(s.started).toEqual(['job1', 'job2']);
  });
  it('starts jobs on a cron expression (every second): one per second, none while a job runs, none after stop', async () => {
    // Fake timers and Date: croner's timer fires at each whole second of the fake clock, so the
    // number of jobs is exact whatever the load on this machine.
    vi.useFakeTimers({ now: new Date(2030, 0, 1, 0, 0, 0, 500) });
    try {
      const st = fakeStarter();
      const s = new TrainingScheduler(sqliteAsyncRepositories(d).trainingData, st, { cron: '* * * * * *', job: { algorithm: 'sft', demosPath: '/x.jsonl' } });
      expect(s.nextRun()).toEqual(new Date(2030, 0, 1, 0, 0, 1));
      await s.start();
      await vi.advanceTimersByTimeAsync(499);
      expect(st.created).toHaveLength(0);
      await vi.advanceTimersByTimeAsync(1); // 00:00:01
      expect(st.created).toHaveLength(1);
      expect(st.created[0]).toEqual({ algorithm: 'sft', demosPath: '/x.jsonl' });
      await vi.advanceTimersByTimeAsync(2000); // 00:00:02 and 00:00:03
      expect(st.created).toHaveLength(3);
      st.setBusy(true);
      await vi.advanceTimersByTimeAsync(1000); // 00:00:04 is skipped
      expect(st.created).toHaveLength(3);
      st.setBusy(false);
      await vi.advanceTimersByTimeAsync(1000); // 00:00:05
      expect(st.created).toHaveLength(4);
      s.stop();
      await vi.advanceTimersByTimeAsync(5000);
      expect(st.created).toHaveLength(4);
      expect(s.started).toEqual(['job1', 'job2', 'job3', 'job4']);
    } finally {
      vi.useRealTimers();
    }
  });
  it('logs a skipped trigger once while a job runs, not at every poll', async () => {
    const st = fakeStarter();
    const warnings: string[] = [];
    const logger = { info: () => {}, error: () => {}, warn: (_o: object, msg?: string) => void warnings.push(msg ?? '') };
    const s = new TrainingScheduler(sqliteAsyncRepositories(d).trainingData, st, { everySessions: 1, job: { algorithm: 'lamer' } }, logger);
    await s.start(); // counts the sessions there are now
    s.stop(); // checked by hand below
    addSession();
    st.setBusy(true);
    for (let i = 0; i < 5; i++) expect(await s.check()).toBeNull();
    expect(warnings).toEqual(['scheduled training skipped: a job is running (said once until the next job starts)']);
    st.setBusy(false);
    expect(await s.check()).toBe('job1');
    addSession();
    st.setBusy(true);
    expect(await s.check()).toBeNull();
    expect(warnings).toHaveLength(2);
  });
  it('rejects bad settings', () => {
    const st = fakeStarter();
    expect(() => new TrainingScheduler(sqliteAsyncRepositories(d).trainingData, st, { everySessions: 0, job: { algorithm: 'lamer' } })).toThrow(/everySessions/);
    expect(() => new TrainingScheduler(sqliteAsyncRepositories(d).trainingData, st, { cron: 'not a cron', job: { algorithm: 'lamer' } })).toThrow(/invalid cron/);
  });
});
