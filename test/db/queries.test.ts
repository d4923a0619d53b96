/**
 * Group commit of steps (src/db/queries.ts HotQueries.commitStep) when SQLite fails the whole
 * transaction: a step that hits SQLITE_FULL makes SQLite roll back everything of its batch, so
 * every step of the batch is refused (a `full` DatabaseError) and none is recorded, including the
 * steps queued after it (they must not commit on their own outside the lost transaction). After
 * space is back the same commits succeed once each.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase, type DatabaseConnection } from '../../src/db/index.js';
import { HotQueries, type StepCommit } from '../../src/db/queries.js';
import { DatabaseError } from '../../src/db/errors.js';
import { tmpDir } from '../helpers/index.js';

let d: DatabaseConnection | null = null;
afterEach(() => {
  if (d) {
    const dir = path.dirname(d.file);
    d.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  d = null;
});

function session(sqlite: DatabaseConnection['sqlite'], id: string): void {
  sqlite
    .prepare(
      `INSERT INTO sessions (id, tenant, task_id, env, mode, status, instructions, max_attempts, max_steps, memory, sampling,
        model_version, metadata, next_attempt, next_step, attempts, created_at, updated_at)
       VALUES (?, 't', 'task', NULL, 'train', 'active', 'i', 3, 20, 'reflection_only', '{}', 'test', '{}', 0, 0, '[]', 0, 0)`,
    )
    .run(id);
}

function commit(id: string, observation: string): StepCommit {
  return {
    rows: [
      {
        sessionId: id, attempt: 0, step: 0, kind: 'action', observation, reward: 0, done: false, success: false, invalidAction: false,
        availableActions: null, info: null, prompt: null, output: 'a', action: 'a', promptTokenIds: null, outputTokenIds: null,
        logprobs: null, droppedSteps: null, modelVersion: 'test', requestHash: 'h', answer: null, createdAt: 1,
      },
    ],
    reflection: null,
    session: { id, status: 'active', attempts: [], nextAttempt: 0, nextStep: 1, updatedAt: 1 },
  };
}

describe('HotQueries.commitStep', () => {
  it('refuses the whole batch and records nothing when SQLITE_FULL loses the transaction; records each once after', async () => {
    d = openDatabase(tmpDir('lamer-q-'));
    const { sqlite } = d;
    for (const id of ['a', 'b', 'c']) session(sqlite, id);
    const hot = new HotQueries(sqlite);
    sqlite.pragma(`max_page_count = ${sqlite.pragma('page_count', { simple: true }) as number}`);
    // One event-loop turn: one batch. Small rows fit in the pages there are; 'b' needs more.
    const outcomes = await Promise.allSettled([commit('a', 'small'), commit('b', 'x'.repeat(200_000)), commit('c', 'small')].map((c) => hot.commitStep(c)));
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected']);
    for (const o of outcomes) {
      const err = (o as PromiseRejectedResult).reason;
      expect(err).toBeInstanceOf(DatabaseError);
      expect([err.kind, err.code]).toEqual(['full', 'SQLITE_FULL']);
    }
    expect(sqlite.prepare('SELECT count(*) AS n FROM steps').get()).toEqual({ n: 0 });
    expect(sqlite.prepare('SELECT count(*) AS n FROM sessions WHERE next_step = 1').get()).toEqual({ n: 0 });
    expect(d.storage.state()).toMatchObject({ writable: false, kind: 'full', code: 'SQLITE_FULL' });
    expect(sqlite.inTransaction).toBe(false);

    sqlite.pragma('max_page_count = 1073741823');
    await Promise.all([commit('a', 'small'), commit('b', 'x'.repeat(200_000)), commit('c', 'small')].map((c) => hot.commitStep(c)));
    expect(sqlite.prepare('SELECT session_id AS s FROM steps ORDER BY session_id').all()).toEqual([{ s: 'a' }, { s: 'b' }, { s: 'c' }]);
    expect(d.storage.state().writable).toBe(true);
  });
});
