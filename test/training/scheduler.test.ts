import { tmpDir } from '../helpers/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type DatabaseConnection } from '../../src/db/index.js';
import { TrainingDataRepo } from '../../src/db/training-data.js';
import { sessions } from '../../src/db/schema.js';
import type { CreateJobRequest } from '../../src/training/manager.js';
import { TrainingScheduler } from '../../src/training/scheduler.js';

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
  return { created, setBusy: (b: boolean) => { busy = b; }, create(req: CreateJobRequest) { created.push(req); return { id: `job${created.length}` }; }, busy: () => busy };
}

beforeAll(() => { dir = tmpDir('lamer-sched-'); d = openDatabase(dir); addSession(); });
afterAll(() => { d.close(); });

describe('TrainingScheduler', () => {
  it('starts a job every N newly completed training sessions, with the data window since the last trigger', () => {
    const st = fakeStarter();
    const s = new TrainingScheduler(new TrainingDataRepo(d.db), st, { everySessions: 3, job: { algorithm: 'lamer', version: 'fixed', activate: true } }, undefined, 12345);
    addSession(); addSession(); addSession({ mode: 'eval' }); addSession({ status: 'active' });
    expect(s.check()).toBeNull(); // 2 new completed training sessions
    addSession();
    expect(s.check()).toBe('job1');
    expect(st.created[0]).toEqual({ algorithm: 'lamer', activate: true, data: { since: 12345 } });
    expect(s.check()).toBeNull(); // counter restarts
    addSession(); addSession(); addSession();
    st.setBusy(true);
    expect(s.check()).toBeNull(); // one job at a time: skipped while busy
    st.setBusy(false);
    expect(s.check()).toBe('job2');
    expect(st.created[1].data!.since).toBeGreaterThan(12345);
    expect(s.started).toEqual(['job1', 'job2']);
  });
  it('starts jobs on a cron expression (every second)', async () => {
    const st = fakeStarter();
    const s = new TrainingScheduler(new TrainingDataRepo(d.db), st, { cron: '* * * * * *', job: { algorithm: 'sft', demosPath: '/x.jsonl' } });
    expect(s.nextRun()).toBeInstanceOf(Date);
    s.start();
    await new Promise((r) => setTimeout(r, 2200));
    s.stop();
    expect(st.created.length).toBeGreaterThanOrEqual(1);
    expect(st.created.length).toBeLessThanOrEqual(3);
    expect(st.created[0]).toEqual({ algorithm: 'sft', demosPath: '/x.jsonl' });
  });
  it('rejects bad settings', () => {
    const st = fakeStarter();
    expect(() => new TrainingScheduler(new TrainingDataRepo(d.db), st, { everySessions: 0, job: { algorithm: 'lamer' } })).toThrow(/everySessions/);
    expect(() => new TrainingScheduler(new TrainingDataRepo(d.db), st, { cron: 'not a cron', job: { algorithm: 'lamer' } })).toThrow(/invalid cron/);
  });
});
