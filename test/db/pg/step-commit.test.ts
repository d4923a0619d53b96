/**
 * The step commit statements of the PostgreSQL store (src/db/pg/step-commit.ts, through
 * AsyncHot.commitStep) against a real server on loopback (test/helpers/postgres.ts; skipped,
 * saying why, where none can start): a step and an attempt's end with its reflection are one
 * statement each, a completion BEGIN, three statements and COMMIT; a commit whose second row or
 * reflection is already recorded fails and writes nothing; commits of more rows write all or
 * nothing; a completion counts the session as stored (free text read back exactly).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionStats, statsFromGroups } from '../../../src/agent/session-stats.js';
import type { AsyncRepositories } from '../../../src/db/async-repositories.js';
import { openPgDatabase, type PgConnection } from '../../../src/db/pg/connection.js';
import { pgRepositories } from '../../../src/db/pg/repositories.js';
import type { StepCommit, StepInsert } from '../../../src/db/queries.js';
import type { AttemptSummary, SessionRow } from '../../../src/db/schema.js';
import { postgresForTests, recordStatements } from '../../helpers/postgres.js';

const server = await postgresForTests();
const T0 = 1_800_000_000_000;

function session(id: string, over: Partial<SessionRow> = {}): SessionRow {
  return {
    id, tenant: 't', taskId: 'task-a', env: 'alfworld', mode: 'train', status: 'active', instructions: 'i', maxAttempts: 2, maxSteps: 10,
    memory: 'reflection_only', memoryPlacement: 'system', sampling: {}, modelVersion: 'v1', metadata: {}, nextAttempt: 0, nextStep: 0,
    attempts: [], createdAt: T0, updatedAt: T0, ...over,
  };
}

function row(sessionId: string, attempt: number, step: number, over: Partial<StepInsert> = {}): StepInsert {
  return {
    sessionId, attempt, step, kind: 'action', observation: `o${attempt}.${step}`, reward: 0.5, done: false, success: false, invalidAction: false,
    availableActions: ['a', 'b'], info: null, prompt: 'p', output: 'a', action: 'a', promptTokenIds: [1], outputTokenIds: [2], logprobs: [-1],
    droppedSteps: 0, modelVersion: 'v1', requestHash: `h${attempt}.${step}`, answer: JSON.stringify({ attempt, step }), createdAt: T0 + step, ...over,
  };
}

const ended = (attempt: number, success: boolean): AttemptSummary => ({
  attempt, status: success ? 'succeeded' : 'failed', steps: 1, return: success ? 1 : 0.5, success, endReason: 'done',
});

/**
 * The commit of step 0 of `attempt` that ends it: failed with a reflection (the next attempt
 * follows), or the session's completion, the attempt succeeded or failed.
 */
function ending(id: string, attempt: number, end: 'reflect' | 'succeed' | 'fail'): StepCommit {
  const completes = end !== 'reflect';
  const done = row(id, attempt, 0, { done: true, action: null, success: end === 'succeed' });
  const attempts = Array.from({ length: attempt + 1 }, (_, a) => ended(a, end === 'succeed' && a === attempt));
  return {
    rows: completes ? [done] : [done, row(id, attempt, 0, { kind: 'reflection', prompt: 'reflect', output: 'next time go left', answer: null })],
    reflection: completes ? null : { sessionId: id, attempt, text: 'next time go left', updatedAt: T0 + 10 + attempt },
    session: {
      id, status: completes ? 'completed' : 'active', attempts, nextAttempt: completes ? attempt : attempt + 1, nextStep: 0, updatedAt: T0 + 10 + attempt,
    },
  };
}

const positions = async (conn: PgConnection, id: string) =>
  (await conn.pool.query('SELECT attempt, step, kind FROM steps WHERE session_id = $1 ORDER BY attempt, step, kind', [id])).rows;

describe.skipIf(!server)('step commits on PostgreSQL', () => {
  let conn: PgConnection;
  let r: AsyncRepositories;
  beforeAll(async () => {
    conn = await openPgDatabase(await server!.freshDatabase());
    r = pgRepositories(conn);
  });
  afterAll(async () => {
    await conn?.close();
  });

  it('a step is one statement, an attempt\'s end with its reflection one, a completion BEGIN, three statements and COMMIT', async () => {
    await r.sessions.insert(session('ses_a'));
    const step: StepCommit = {
      rows: [row('ses_a', 0, 0)], reflection: null,
      session: { id: 'ses_a', status: 'active', attempts: [], nextAttempt: 0, nextStep: 1, updatedAt: T0 + 1, expectedUpdatedAt: T0 },
    };
    const rec = recordStatements();
    try {
      expect((await r.hot.commitStep(step)).recorded).toBe(true);
      expect(rec.sent()).toEqual(['[lamer_step_commit_v2_1]']);
      const end = ending('ses_a', 0, 'reflect');
      end.rows = end.rows.map((x) => ({ ...x, step: 1 }));
      expect((await r.hot.commitStep(end)).recorded).toBe(true);
      expect(rec.sent().slice(1)).toEqual(['[lamer_step_commit_v2_2r]']);
      expect((await r.hot.commitStep(ending('ses_a', 1, 'succeed'))).recorded).toBe(true);
      expect(rec.sent().slice(2)).toEqual([
        'BEGIN', '[lamer_step_commit_v2_1c]', '[lamer_stats_lock_group_1]', '[lamer_stats_write_completion_1]', 'COMMIT',
      ]);
    } finally {
      rec.stop();
    }
    expect(await positions(conn, 'ses_a')).toEqual([
      { attempt: 0, step: 0, kind: 'action' }, { attempt: 0, step: 1, kind: 'action' }, { attempt: 0, step: 1, kind: 'reflection' },
      { attempt: 1, step: 0, kind: 'action' },
    ]);
    expect(await r.hot.reflections('ses_a')).toEqual([{ sessionId: 'ses_a', attempt: 0, text: 'next time go left', source: 'policy', updatedAt: T0 + 10 }]);
    expect(await r.hot.session('ses_a')).toMatchObject({ status: 'completed', attempts: [ended(0, false), ended(1, true)], updatedAt: T0 + 11 });
    expect(await r.sessions.completionsBetween('t', 0, 5)).toEqual(['ses_a']);
  });

  it('an attempt\'s end whose reflection, or whose reflection\'s record, is already recorded fails and writes nothing', async () => {
    await r.sessions.insert(session('ses_b'));
    await r.sessions.insert(session('ses_c'));
    // rows no commit of the server would leave: written around it
    await conn.pool.query("INSERT INTO reflections (session_id, attempt, text, source, updated_at) VALUES ('ses_b', 0, 'human', 'human', $1)", [T0]);
    const clash = ending('ses_c', 0, 'reflect').rows[1]!;
    await conn.pool.query(
      `INSERT INTO steps (session_id, attempt, step, kind, observation, reward, done, success, invalid_action, model_version, request_hash, created_at)
       VALUES ('ses_c', 0, 0, 'reflection', 'x', 0, true, false, false, 'v1', $1, $2)`,
      [clash.requestHash, T0],
    );
    for (const id of ['ses_b', 'ses_c']) {
      await expect(r.hot.commitStep(ending(id, 0, 'reflect'))).rejects.toMatchObject({ code: '23505' });
      expect(await r.hot.stepAtPosition(id, 0, 0)).toBeUndefined();
      expect(await r.hot.session(id)).toMatchObject({ nextAttempt: 0, nextStep: 0, updatedAt: T0 });
    }
    expect((await r.hot.reflections('ses_b')).map((x) => x.source)).toEqual(['human']);
    expect(await r.hot.reflections('ses_c')).toEqual([]);
  });

  it('a commit of three rows writes them all with the session update, or nothing when one of them is recorded', async () => {
    await r.sessions.insert(session('ses_d'));
    const three = (kinds: Array<StepInsert['kind']>, step: number): StepCommit => ({
      rows: kinds.map((kind, i) => row('ses_d', 0, step + (i === 2 ? 1 : 0), { kind })),
      reflection: null,
      session: { id: 'ses_d', status: 'active', attempts: [], nextAttempt: 0, nextStep: step + 2, updatedAt: T0 + step },
    });
    expect((await r.hot.commitStep(three(['action', 'reflection', 'action'], 0))).recorded).toBe(true);
    expect(await positions(conn, 'ses_d')).toEqual([
      { attempt: 0, step: 0, kind: 'action' }, { attempt: 0, step: 0, kind: 'reflection' }, { attempt: 0, step: 1, kind: 'action' },
    ]);
    // the first two rows' positions (0, 2) are free, the third's (0, 1) is recorded: none of them is written
    const clash = three(['action', 'reflection', 'action'], 2);
    clash.rows[2] = { ...clash.rows[2]!, step: 1 };
    await expect(r.hot.commitStep(clash)).rejects.toMatchObject({ code: '23505' });
    expect(await positions(conn, 'ses_d')).toHaveLength(3);
    expect((await r.hot.session('ses_d'))?.nextStep).toBe(2);
  });

  it('a completion counts the session as stored: its free text (U+0000) in its group and chain, the answers those of the full computation', async () => {
    const over = { taskId: 'task\u0000b', env: 'web\u0000shop', maxAttempts: 1 };
    for (const id of ['ses_e1', 'ses_e2']) await r.sessions.insert(session(id, over));
    for (const id of ['ses_e1', 'ses_e2']) expect((await r.hot.commitStep(ending(id, 0, id === 'ses_e2' ? 'succeed' : 'fail'))).recorded).toBe(true);
    const groups = await r.sessions.statsGroups('t');
    expect(groups.find((g) => g.memory === 'none')).toMatchObject({ env: 'web\u0000shop', sessions: 2 });
    for (const f of [{}, { env: 'web\u0000shop' }, { memory: 'none' as const }]) {
      for (const retries of [1, 2]) expect(statsFromGroups(groups, f, retries)).toEqual(sessionStats(await r.sessions.completed('t', f), retries));
    }
  });
});
