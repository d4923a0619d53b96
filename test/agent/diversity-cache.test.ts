/**
 * The diversity window (src/agent/diversity-window.ts) against diversityByVersion as sessions
 * enter and leave it, and the diversity cache (src/agent/diversity-cache.ts) over a real SQLite
 * database: sessions with actions complete in random order between calls, and every answer equals
 * a full read of the window (diversityByVersion of attemptTrajectories) for several filters and
 * window sizes, with a small limit so that answers are dropped and read again. Between calls the
 * cache reads nothing but the tenant's completion seq when no session completed, and only the new
 * sessions' rows when some did.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { DiversityCache, type DiversityReads } from '../../src/agent/diversity-cache.js';
import { diversityByVersion } from '../../src/agent/diversity.js';
import { DiversityWindow } from '../../src/agent/diversity-window.js';
import type { AttemptTrajectory } from '../../src/db/sessions-repo.js';
import { STATS_MEMORY } from '../../src/domain.js';
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
    completionSeq: async (t) => r.sessions.completionSeq(t),
    completionsBetween: async (t, a, b) => r.sessions.completionsBetween(t, a, b),
    attemptTrajectories: async (t, f, n) => {
      seen.trajectoryReads++;
      return r.sessions.attemptTrajectories(t, f, n);
    },
    trajectoriesOf: async (t, f, ids) => {
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

/** Rows of random sessions: ids ascending, tasks, groups, trajectories (null and '' too), several attempts. */
const sessionRows: fc.Arbitrary<AttemptTrajectory[][]> = fc
  .array(
    fc.record({
      // few groups, many tasks: the order a group's task entropies are summed in shows in the last bits
      modelVersion: fc.constantFrom('v1', 'v1', 'v1', 'v2'),
      env: fc.constantFrom('e', 'e', 'e', null),
      memory: fc.constantFrom('none', 'none', 'none', ...STATS_MEMORY),
      taskId: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g'),
      trajectories: fc.array(fc.option(fc.constantFrom('', 'up', 'up\ndown', 'left', 'down\nleft\nup', 'right', 'up\nup'), { freq: 8 }), {
        minLength: 1,
        maxLength: 3,
      }),
    }),
    { maxLength: 60 },
  )
  .map((xs) =>
    xs.map(({ trajectories, ...s }, i) => trajectories.map((trajectory) => ({ sessionId: `ses_${String(i).padStart(3, '0')}`, ...s, trajectory }))),
  );

describe('the diversity window', () => {
  it('answers as diversityByVersion over its rows, bit for bit, as sessions enter in any order and the oldest leave', () => {
    fc.assert(
      fc.property(sessionRows, fc.integer(), fc.integer({ min: 1, max: 40 }), (sessions, seed, max) => {
        const w = new DiversityWindow();
        const kept = new Map<string, AttemptTrajectory[]>();
        const expectSame = () => {
          const rows = [...kept.keys()].sort().flatMap((id) => kept.get(id)!);
          expect(w.answer()).toEqual(diversityByVersion(rows));
        };
        for (const rows of shuffled(sessions, seed)) {
          w.add(rows);
          kept.set(rows[0]!.sessionId, rows);
          while (w.size > max) {
            const oldest = w.ids[0]!;
            w.remove(oldest);
            kept.delete(oldest);
          }
          expectSame();
        }
        w.add(sessions[0] ?? []);
        w.remove('ses_none');
      }),
      { numRuns: 300 },
    );
  });
});

describe('the diversity cache', () => {
  for (const limits of [undefined, { answers: 3, sessions: 12 }]) {
    const what = limits ? 'answers dropped for lack of room and read again' : 'all answers kept';
    it(`answers as a full read of the window after every batch of completions, in any order (${what})`, async () => {
      await fc.assert(
        fc.asyncProperty(planned, fc.integer(), fc.integer({ min: 1, max: 6 }), async (plans, seed, batch) => {
          const conn = openDatabase(tmpDir('lamer-divcache-'));
          opened.push(conn);
          const r = createRepositories(conn);
          for (const p of plans) r.sessions.insert(row(p));
          const { reads, seen } = counting(r);
          const cache = new DiversityCache(reads, limits);
          const check = async () => {
            for (const [tenant, f, n] of QUERIES) {
              expect(await cache.answer(tenant, f, n)).toEqual(diversityByVersion(r.sessions.attemptTrajectories(tenant, f, n)));
            }
          };
          await check();
          const order = shuffled(plans, seed);
          for (let i = 0; i < order.length; i += batch) {
            for (const p of order.slice(i, i + batch)) await play(r, p);
            await check();
            // nothing completed: nothing read but the seq (when every answer is kept)
            const before = seen.trajectoryReads;
            for (const [tenant, f, n] of QUERIES) await cache.answer(tenant, f, n);
            if (!limits) expect(seen.trajectoryReads).toBe(before);
          }
        }),
        { numRuns: 20 },
      );
    });
  }

  it('reads only the rows of the sessions completed since that belong in the window', async () => {
    const conn = openDatabase(tmpDir('lamer-divcache-'));
    opened.push(conn);
    const r = createRepositories(conn);
    const plans = Array.from({ length: 40 }, (_, i): Planned => ({ id: `ses_${String(i).padStart(4, '0')}`, tenant: 't1', taskId: `k${i % 5}`, modelVersion: 'v1', maxAttempts: 1, attempts: [['up', i % 3 ? 'down' : 'left']] }));
    for (const p of plans) r.sessions.insert(row(p));
    for (const p of plans.slice(0, 30)) await play(r, p);
    const { reads, seen } = counting(r);
    const cache = new DiversityCache(reads);
    expect((await cache.answer('t1', {}, 20)).scanned).toBe(20);
    // completions out of creation order: ids older than the window's oldest are not read at all
    for (const p of plans.slice(30)) await play(r, p);
    const idsBefore = seen.idsRead;
    expect(await cache.answer('t1', {}, 20)).toEqual(diversityByVersion(r.sessions.attemptTrajectories('t1', {}, 20)));
    expect(seen.idsRead - idsBefore).toBe(10);
  });

  it('answers as a full read when sessions complete between its reads, and with calls at once on one query', async () => {
    const conn = openDatabase(tmpDir('lamer-divcache-'));
    opened.push(conn);
    const r = createRepositories(conn);
    const plans = Array.from({ length: 30 }, (_, i): Planned => ({ id: `ses_${String(i).padStart(4, '0')}`, tenant: 't1', taskId: `k${i % 4}`, modelVersion: 'v1', maxAttempts: 1, attempts: [['up', i % 3 ? 'down' : 'left']] }));
    for (const p of plans) r.sessions.insert(row(p));
    for (const p of plans.slice(0, 10)) await play(r, p);
    // as on a store shared by replicas: a completion commits after the seq is read, before the rows are
    const { reads } = counting(r);
    let pending = plans.slice(10, 20);
    const racing: DiversityReads = {
      ...reads,
      attemptTrajectories: async (t, f, n) => {
        for (const p of pending) await play(r, p);
        pending = [];
        return reads.attemptTrajectories(t, f, n);
      },
    };
    const cache = new DiversityCache(racing);
    const full = () => diversityByVersion(r.sessions.attemptTrajectories('t1', {}, 15));
    const first = await cache.answer('t1', {}, 15);
    expect(first.scanned).toBe(15);
    // the sessions it already held are followed from their seq again, and counted once
    expect(await cache.answer('t1', {}, 15)).toEqual(full());
    const later = plans.slice(20);
    const answers = await Promise.all([cache.answer('t1', {}, 15), (async () => {
      for (const p of later) await play(r, p);
      return cache.answer('t1', {}, 15);
    })(), cache.answer('t1', {}, 15)]);
    expect(answers[1]).toEqual(full());
    expect(await cache.answer('t1', {}, 15)).toEqual(full());
  });
});
