import { tmpDir } from '../../helpers/index.js';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type DatabaseConnection } from '../../../src/db/index.js';
import { sqliteAsyncRepositories } from '../../../src/db/async-repositories.js';
import { sessions, steps } from '../../../src/db/schema.js';
import { behaviourOf, buildRlSamples } from '../../../src/training/data/data.js';
import { selectTrainingRecords, writeTurnScores } from '../../../src/training/data/select.js';

let dir: string;
let d: DatabaseConnection;
const data = () => sqliteAsyncRepositories(d).trainingData;

function addSession(id: string, o: { taskId?: string; env?: string; mode?: 'train' | 'eval'; status?: 'completed' | 'active'; createdAt?: number; modelVersion?: string; sampling?: Record<string, unknown> }, rows: Array<[number, number, 'action' | 'reflection', string, number, boolean, boolean, number[] | null]>) {
  d.db.insert(sessions).values({
    id, tenant: 'default', taskId: o.taskId ?? 'T', env: o.env ?? 'minesweeper', mode: o.mode ?? 'train', status: o.status ?? 'completed',
    instructions: 'Play.', maxAttempts: 3, maxSteps: 7, memory: 'reflection_only', sampling: o.sampling ?? {}, modelVersion: o.modelVersion ?? 'base',
    metadata: {}, nextAttempt: 0, nextStep: 0, attempts: [], createdAt: o.createdAt ?? 1000, updatedAt: 1000,
  }).run();
  for (const [attempt, step, kind, observation, reward, done, success, out] of rows) {
    d.db.insert(steps).values({
      sessionId: id, attempt, step, kind, observation, reward, done, success, invalidAction: false,
      promptTokenIds: out ? [256, 1] : null, outputTokenIds: out, logprobs: out ? out.map(() => -1) : null,
      modelVersion: o.modelVersion ?? 'base', requestHash: `${id}-${attempt}-${step}-${kind}`, createdAt: 1000,
    }).run();
  }
}

beforeAll(() => {
  dir = tmpDir('lamer-select-');
  d = openDatabase(dir);
  // a: fails then succeeds (reflection between); b: succeeds at once; both task T
  addSession('a', {}, [[0, 0, 'action', 'A', 0, false, false, [65]], [0, 1, 'action', 'C', -1, true, false, null], [0, 1, 'reflection', 'C', 0, true, false, [66, 67]],
    [1, 0, 'action', 'A', 0, false, false, [68]], [1, 1, 'action', 'W', 10, true, true, null]]);
  addSession('b', { createdAt: 5000 }, [[0, 0, 'action', 'A', 0, false, false, [69]], [0, 1, 'action', 'W', 10, true, true, null]]);
  addSession('c', { mode: 'eval' }, [[0, 0, 'action', 'A', 0, false, false, [70]]]);
  addSession('d', { status: 'active' }, [[0, 0, 'action', 'A', 0, false, false, [71]]]);
  addSession('e', { env: 'sokoban', taskId: 'S', modelVersion: 'v2' }, [[0, 0, 'action', 'X', 0, false, false, [72]]]);
});
afterAll(() => { d.close(); });

describe('selectTrainingRecords', () => {
  it('takes completed training sessions only, ordered by task, seed, creation time, session, then attempt, step, kind', async () => {
    const recs = await selectTrainingRecords(data());
    expect([...new Set(recs.map((r) => r.sessionId))]).toEqual(['e', 'a', 'b']);
    expect(recs.filter((r) => r.sessionId === 'a').map((r) => `${r.attempt}/${r.step}/${r.kind}`)).toEqual(['0/0/action', '0/1/action', '0/1/reflection', '1/0/action', '1/1/action']);
    expect(recs[3].outputTokenIds).toEqual([66, 67]);
  });
  it('filters by since, env, task ids, model version and count', async () => {
    const ids = async (f: Parameters<typeof selectTrainingRecords>[1]) => [...new Set((await selectTrainingRecords(data(), f)).map((r) => r.sessionId))];
    expect(await ids({ since: 2000 })).toEqual(['b']);
    expect(await ids({ env: 'sokoban' })).toEqual(['e']);
    expect(await ids({ taskIds: ['T'] })).toEqual(['a', 'b']);
    expect(await ids({ taskIds: [] })).toEqual([]);
    expect(await ids({ modelVersion: 'v2' })).toEqual(['e']);
    expect(await ids({ maxSessions: 1 })).toEqual(['b']);
  });
  it('LaMer advantages computed from the table are written back to the step rows', async () => {
    const recs = await selectTrainingRecords(data(), { taskIds: ['T'] });
    const { scores, stats } = buildRlSamples(recs, { algorithm: 'lamer', returns: { gammaStep: 0.95, gammaTraj: 0.6 } });
    expect(stats.passAtK).toEqual({ 1: 0.5, 2: 1 });
    await writeTurnScores(data(), scores);
    const rows = d.db.select().from(steps).all().filter((r) => r.sessionId === 'a' && r.outputTokenIds !== null);
    // a: attempt 0 turn reward -1, G = -1 + 0.6*10 = 5; reflection G = 10; attempt 1 G = 10
    expect(rows.map((r) => r.return)).toEqual([5, 10, 10]);
    // scores: -1, 0 (the reflection's own), 10, 10 (b) -> mean 4.75; anchor A: {5, 10, 10} mean 25/3
    expect(rows[0].advantage).toBeCloseTo(-5.75 + (5 - 25 / 3), 6);
    expect(rows[1].advantage).toBeCloseTo(-4.75, 6);
  });
  it("carries the session's sampling settings (defaults for missing keys) and the step's availableActions", async () => {
    const recs = await selectTrainingRecords(data(), { taskIds: ['T'] });
    expect(recs[0].sampling).toEqual({ temperature: 1, topP: 1, topK: 0 });
    expect(recs[0].availableActions).toBeNull();
  });
  it("gives a turn of the session's OpenAI endpoint the sampling it was served with, not the session's", async () => {
    // the agent asked for temperature 0.5 and top_k 5 in its request; the session samples at 0.7
    addSession('turns', { taskId: 'TT', sampling: { temperature: 0.7, topP: 0.9, topK: 0, seed: 1 } }, [
      [0, 0, 'action', 'Board.', 0, false, false, [80]], [0, 1, 'action', 'Board 2.', 0, false, false, [81]], [0, 2, 'action', '', 1, true, true, null],
    ]);
    const turn = { api: 'chat', request: { messages: [], temperature: 0.5, top_k: 5 }, memory: null, sampling: { temperature: 0.5, topP: 0.9, topK: 5, seed: 9, maxTokens: 8 },
      latencyMs: 1, finishReason: 'stop', toolCalls: null, stream: false };
    d.db.update(steps).set({ turn }).where(and(eq(steps.sessionId, 'turns'), eq(steps.step, 0))).run();
    const recs = await selectTrainingRecords(data(), { taskIds: ['TT'] });
    expect(recs.map((r) => r.sampling)).toEqual([{ temperature: 0.5, topP: 0.9, topK: 5 }, { temperature: 0.7, topP: 0.9, topK: 0 }, { temperature: 0.7, topP: 0.9, topK: 0 }]);
    // the job's behaviour policy of that turn is the one it was sampled from
    expect(behaviourOf(recs[0])).toEqual({ temperature: 0.5, topP: 0.9, topK: 5 });
  });
});

describe('selectTrainingRecords order', () => {
  // The same seeded rollouts recorded twice, their sessions started in another order (so their
  // time-ordered ids and creation times differ): the records, and so the samples, come out the same.
  const play = (seed: number, first: number) => [[0, 0, 'action', 'A', 0, false, false, [first]], [0, 1, 'action', seed % 2 ? 'W' : 'C', seed % 2 ? 10 : -1, true, seed % 2 === 1, null]] as Array<[number, number, 'action', string, number, boolean, boolean, number[] | null]>;
  const runs = [
    // run 1: sessions start in seed order
    [['s1', 'U', 7, 100], ['s2', 'U', 8, 101], ['s3', 'T', 7, 102], ['s4', 'T', 8, 103], ['s5', 'T', null, 104]],
    // run 2: reversed start order, other ids, two sessions started in the same millisecond
    [['r1', 'T', null, 200], ['r3', 'T', 8, 201], ['r2', 'T', 7, 201], ['r4', 'U', 8, 202], ['r5', 'U', 7, 203]],
  ] as const;
  it('does not depend on session ids or start times when the sessions are seeded', async () => {
    const orders: string[][] = [];
    const samples: unknown[] = [];
    for (const run of runs) {
      const dbDir = tmpDir('lamer-select-order-');
      d = openDatabase(dbDir);
      for (const [id, task, seed, at] of run) {
        addSession(id, { taskId: task, createdAt: at, sampling: seed === null ? {} : { seed, temperature: 0.7 } }, play(seed ?? 3, 60 + (seed ?? 0) + (task === 'T' ? 10 : 0)));
      }
      const recs = await selectTrainingRecords(data());
      orders.push(recs.map((r) => `${r.taskId}/${r.observation}/${r.outputTokenIds?.[0] ?? '-'}`));
      const built = buildRlSamples(recs, { algorithm: 'gigpo', returns: { gammaStep: 0.95, gammaTraj: 0 } });
      samples.push(built.samples.map((s) => [s.taskId, s.outputTokenIds, s.advantage]));
      d.close();
    }
    // task T before U; within a task seed 7, seed 8, then the unseeded session
    expect(orders[0]).toEqual(['T/A/77', 'T/W/-', 'T/A/78', 'T/C/-', 'T/A/70', 'T/W/-', 'U/A/67', 'U/W/-', 'U/A/68', 'U/C/-']);
    expect(orders[1]).toEqual(orders[0]);
    expect(samples[1]).toEqual(samples[0]);
  });
});
