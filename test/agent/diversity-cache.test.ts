/**
 * The diversity cache (src/agent/diversity-cache.ts) over a real SQLite database: sessions with
 * actions complete in random order between calls, and every answer equals a full read of the
 * window (diversityByVersion of attemptTrajectories) for several filters and window sizes, with a
 * small row store so that rows are dropped and read again. Between calls the cache reads nothing
 * but the tenant's completion seq when no session completed, and only the new sessions' rows when
 * some did.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { DiversityCache, type DiversityReads } from '../../src/agent/diversity-cache.js';
import { diversityByVersion } from '../../src/agent/diversity.js';
import { openDatabase, type DatabaseConnection } from '../../src/db/index.js';
import type { StepCommit, StepInsert } from '../../src/db/queries.js';
import { createRepositories, type Repositories } from '../../src/db/repositories.js';
import type { SessionRow } from '../../src/db/schema.js';
import type { SessionFilters } from '../../src/db/sessions-repo.js';
import { tmpDir } from '../helpers/index.js';
import { shuffled } from '../helpers/stats-sessions.js';

const opened: DatabaseConnection[] = [];
afterAll(() => {
  for (const c of opened) c.close();
});

interface Planned {
  id: string;
  tenant: string;
  taskId: string;
  modelVersion: string;
  maxAttempts: number;
  /** Actions per attempt. */
  attempts: string[][];
}

const planned: fc.Arbitrary<Planned[]> = fc
  .array(
    fc.record({
      tenant: fc.constantFrom('t1', 't1', 't2'),
      taskId: fc.constantFrom('a', 'b', 'c'),
      modelVersion: fc.constantFrom('v1', 'v2'),
      attempts: fc.array(fc.array(fc.constantFrom('up', 'down', 'left'), { maxLength: 3 }), { minLength: 1, maxLength: 3 }),
    }),
    { minLength: 1, maxLength: 30 },
  )
  .map((xs) => xs.map((x, i) => ({ ...x, id: `ses_${String(i).padStart(4, '0')}`, maxAttempts: x.attempts.length })));

function row(p: Planned): SessionRow {
  return {
    id: p.id, tenant: p.tenant, taskId: p.taskId, env: 'grid', mode: 'eval', status: 'active', instructions: 'x', maxAttempts: p.maxAttempts,
    maxSteps: 10, memory: 'reflection_only', memoryPlacement: 'system', sampling: {}, modelVersion: p.modelVersion, metadata: {},
    nextAttempt: 0, nextStep: 0, attempts: [], createdAt: 1, updatedAt: 1,
  };
}

function step(p: Planned, attempt: number, s: number, action: string | null): StepInsert {
  return {
    sessionId: p.id, attempt, step: s, kind: 'action', observation: 'o', reward: 0, done: action === null, success: false, invalidAction: false,
    availableActions: null, info: null, prompt: null, output: action, action, promptTokenIds: null, outputTokenIds: null, logprobs: null,
    droppedSteps: null, modelVersion: p.modelVersion, requestHash: `${attempt}.${s}`, answer: null, createdAt: 1,
  };
}

/** Record the session's steps; the last commit completes it. */
async function play(r: Repositories, p: Planned): Promise<void> {
  const summaries = p.attempts.map((acts, a) => ({ attempt: a, status: 'failed' as const, steps: acts.length + 1, return: 0, success: false, endReason: 'done' as const }));
  for (const [a, acts] of p.attempts.entries()) {
    const rows = [...acts.map((act, s) => step(p, a, s, act)), step(p, a, acts.length, null)];
    for (const [i, x] of rows.entries()) {
      const last = a === p.attempts.length - 1 && i === rows.length - 1;
      const commit: StepCommit = {
        rows: [x],
        reflection: null,
        session: { id: p.id, status: last ? 'completed' : 'active', attempts: last ? summaries : [], nextAttempt: a, nextStep: i + 1, updatedAt: 2 },
      };
      await r.hot.commitStep(commit);
    }
  }
}

/** The repositories' reads, counting the sessions whose rows are read. */
function counting(r: Repositories) {
  const seen = { trajectoryReads: 0, idsRead: 0 };
  const reads: DiversityReads = {
    completionSeq: (t) => r.sessions.completionSeq(t),
    completionsBetween: (t, a, b) => r.sessions.completionsBetween(t, a, b),
    attemptTrajectories: (t, f, n) => {
      seen.trajectoryReads++;
      return r.sessions.attemptTrajectories(t, f, n);
    },
    trajectoriesOf: (t, f, ids) => {
      seen.trajectoryReads++;
      seen.idsRead += ids.length;
      return r.sessions.trajectoriesOf(t, f, ids);
    },
  };
  return { reads, seen };
}

const QUERIES: Array<[string, Omit<SessionFilters, 'status'>, number]> = [
  ['t1', {}, 2000], ['t1', {}, 4], ['t1', { modelVersion: 'v2' }, 3], ['t1', { taskId: 'a' }, 2000], ['t2', { memory: 'none' }, 5], ['t2', {}, 1],
];

describe('the diversity cache', () => {
  it('answers as a full read of the window after every batch of completions, in any order', async () => {
    await fc.assert(
      fc.asyncProperty(planned, fc.integer(), fc.integer({ min: 1, max: 6 }), async (plans, seed, batch) => {
        const conn = openDatabase(tmpDir('lamer-divcache-'));
        opened.push(conn);
        const r = createRepositories(conn);
        for (const p of plans) r.sessions.insert(row(p));
        const { reads, seen } = counting(r);
        const cache = new DiversityCache(reads, { answers: 64, sessions: 8 });
        const check = () => {
          for (const [tenant, f, n] of QUERIES) expect(cache.answer(tenant, f, n)).toEqual(diversityByVersion(r.sessions.attemptTrajectories(tenant, f, n)));
        };
        check();
        const order = shuffled(plans, seed);
        for (let i = 0; i < order.length; i += batch) {
          const done = order.slice(i, i + batch);
          for (const p of done) await play(r, p);
          check();
          // nothing completed: nothing read but the seq
          const before = seen.trajectoryReads;
          for (const [tenant, f, n] of QUERIES) cache.answer(tenant, f, n);
          expect(seen.trajectoryReads).toBe(before);
        }
      }),
      { numRuns: 25 },
    );
  });

  it('reads only the rows of the sessions completed since, when its row store holds the window', async () => {
    const conn = openDatabase(tmpDir('lamer-divcache-'));
    opened.push(conn);
    const r = createRepositories(conn);
    const plans = Array.from({ length: 40 }, (_, i): Planned => ({ id: `ses_${String(i).padStart(4, '0')}`, tenant: 't1', taskId: `k${i % 5}`, modelVersion: 'v1', maxAttempts: 1, attempts: [['up', i % 3 ? 'down' : 'left']] }));
    for (const p of plans) r.sessions.insert(row(p));
    for (const p of plans.slice(0, 30)) await play(r, p);
    const { reads, seen } = counting(r);
    const cache = new DiversityCache(reads);
    expect(cache.answer('t1', {}, 20).scanned).toBe(20);
    // completions out of creation order: ids older than the window's oldest are not read at all
    for (const p of plans.slice(30)) await play(r, p);
    const idsBefore = seen.idsRead;
    expect(cache.answer('t1', {}, 20)).toEqual(diversityByVersion(r.sessions.attemptTrajectories('t1', {}, 20)));
    expect(seen.idsRead - idsBefore).toBe(10);
  });
});
