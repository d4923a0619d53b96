/**
 * The statistics writes of a completion on PostgreSQL (src/db/pg/stats-aggregates.ts
 * recordCompletion) against a real server on loopback (test/helpers/postgres.ts; skipped, saying
 * why, where none can start): a single-attempt session's completion that waited for its group's
 * lock while another completion of the group committed reads its task's chain again, after that
 * one, and places itself behind it; the statements that costs.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionStats, statsFromGroups } from '../../../src/agent/session-stats.js';
import type { AsyncRepositories } from '../../../src/db/async-repositories.js';
import { openPgDatabase, type PgConnection } from '../../../src/db/pg/connection.js';
import { pgRepositories } from '../../../src/db/pg/repositories.js';
import { recordCompletion } from '../../../src/db/pg/stats-aggregates.js';
import { runStepCommit } from '../../../src/db/pg/step-commit.js';
import type { StepCommit } from '../../../src/db/queries.js';
import type { SessionRow } from '../../../src/db/schema.js';
import { postgresForTests, recordStatements, untilWaitingOnLock } from '../../helpers/postgres.js';

const server = await postgresForTests();
const T0 = 1_800_000_000_000;

function session(id: string): SessionRow {
  return {
    id, tenant: 't', taskId: 'task-a', env: 'alfworld', mode: 'eval', status: 'active', instructions: 'i', maxAttempts: 1, maxSteps: 10,
    memory: 'reflection_only', memoryPlacement: 'system', sampling: {}, modelVersion: 'v1', metadata: {}, nextAttempt: 0, nextStep: 0,
    attempts: [], createdAt: T0, updatedAt: T0,
  };
}

/** The commit that completes single-attempt session `id` with its one attempt succeeded or failed. */
function completing(id: string, success: boolean, at: number): StepCommit {
  return {
    rows: [
      {
        sessionId: id, attempt: 0, step: 0, kind: 'action', observation: 'o', reward: success ? 1 : 0, done: true, success, invalidAction: false,
        availableActions: null, info: null, prompt: null, output: null, action: null, promptTokenIds: null, outputTokenIds: null, logprobs: null,
        droppedSteps: null, modelVersion: 'v1', requestHash: `h-${id}`, answer: null, createdAt: at,
      },
    ],
    reflection: null,
    session: {
      id, status: 'completed', nextAttempt: 0, nextStep: 0, updatedAt: at,
      attempts: [{ attempt: 0, status: success ? 'succeeded' : 'failed', steps: 1, return: success ? 1 : 0, success, endReason: 'done' }],
    },
  };
}

describe.skipIf(!server)('completion statistics on PostgreSQL', () => {
  let url = '';
  let conn: PgConnection;
  let r: AsyncRepositories;
  beforeAll(async () => {
    url = await server!.freshDatabase();
    conn = await openPgDatabase(url);
    r = pgRepositories(conn);
  });
  afterAll(async () => {
    await conn?.close();
  });

  it('a completion that waited on its group while another of the group committed reads the chain again, and places itself after that one', async () => {
    for (const id of ['ses_1', 'ses_2', 'ses_3', 'ses_4']) await r.sessions.insert(session(id));
    const rec = recordStatements();
    try {
      // a success ends the task's chain: the next attempted session starts a new one (streak 0)
      await r.hot.commitStep(completing('ses_1', true, T0 + 1));
      expect(rec.sent()).toEqual(['BEGIN', '[lamer_step_commit_v2_1c]', '[lamer_stats_lock_group_1]', '[lamer_stats_write_completion_1]', 'COMMIT']);
    } finally {
      rec.stop();
    }
    const holder = new pg.Client({ connectionString: url });
    const poller = new pg.Client({ connectionString: url });
    await holder.connect();
    await poller.connect();
    try {
      // ses_2 fails (streak 0) in a transaction held open with the group's lock
      await holder.query('BEGIN');
      const o = await runStepCommit(holder as pg.PoolClient, completing('ses_2', false, T0 + 2));
      await recordCompletion(holder as pg.PoolClient, o.completed!);
      const waited = recordStatements([holder, poller]);
      try {
        const pending = r.hot.commitStep(completing('ses_3', false, T0 + 3));
        await untilWaitingOnLock(poller);
        await holder.query('COMMIT');
        expect((await pending).recorded).toBe(true);
        // in its first read's snapshot ses_2 was missing: ses_3 would have taken streak 0 after ses_1's success
        expect(waited.sent()).toEqual([
          'BEGIN', '[lamer_step_commit_v2_1c]', '[lamer_stats_lock_group_1]', '[lamer_stats_lock_group_1]', '[lamer_stats_write_completion_1]', 'COMMIT',
        ]);
      } finally {
        waited.stop();
      }
    } finally {
      await holder.end();
      await poller.end();
    }
    await r.hot.commitStep(completing('ses_4', false, T0 + 4));
    const streaks = await conn.pool.query('SELECT session_id, streak FROM stats_retries ORDER BY session_id');
    expect(streaks.rows).toEqual([
      { session_id: 'ses_1', streak: 0 }, { session_id: 'ses_2', streak: 0 }, { session_id: 'ses_3', streak: 1 }, { session_id: 'ses_4', streak: 2 },
    ]);
    const groups = await r.sessions.statsGroups('t');
    for (const retries of [1, 2, 3]) expect(statsFromGroups(groups, {}, retries)).toEqual(sessionStats(await r.sessions.completed('t', {}), retries));
    expect(await r.sessions.completionsBetween('t', 0, 10)).toEqual(['ses_1', 'ses_2', 'ses_3', 'ses_4']);
  });
});
