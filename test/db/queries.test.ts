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
import { HotQueries, jsonText, type StepCommit } from '../../src/db/queries.js';
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

describe('jsonText (JSON columns of a step)', () => {
  it('is JSON.stringify of the value, for arrays of numbers however V8 stores them', () => {
    const holey = new Array<number>(300);
    for (let i = 0; i < holey.length; i++) holey[i] = i % 256;
    const sparse: number[] = [];
    sparse[0] = 1;
    sparse[2] = 3;
    const values: unknown[] = [
      holey,
      Array.from({ length: 50 }, (_, i) => i),
      [0, 9, 10, 99, 100, 999, 1000, 65535, 2 ** 31 - 1, 2 ** 31, 7],
      [3, -1, 4],
      [3, 1.5, 4],
      Array.from({ length: 10_000 }, (_, i) => (i * 7919) % 100_003),
      [Math.log(1 / 256), -0.1, 1e21, 1.5e-7, -0, 0, 2 ** 53],
      [1, NaN, Infinity, -Infinity],
      [1, null, 2],
      sparse,
      ['up', 'down'],
      [1, '2'],
      [],
      { a: [1, 2], b: 'x' },
    ];
    for (const v of values) expect(jsonText(v)).toBe(JSON.stringify(v));
    expect(jsonText(null)).toBeNull();
    expect(jsonText(undefined)).toBeNull();
  });

  it('stores the token arrays of a committed step as their JSON text', async () => {
    d = openDatabase(tmpDir('lamer-q-'));
    const { sqlite } = d;
    session(sqlite, 'a');
    const hot = new HotQueries(sqlite);
    const ids = new Array<number>(1000);
    for (let i = 0; i < ids.length; i++) ids[i] = (i * 7) % 256;
    const c = commit('a', 'obs');
    Object.assign(c.rows[0]!, { promptTokenIds: ids, outputTokenIds: [117, 112], logprobs: [Math.log(1 / 256), -0.25], availableActions: ['up', 'down'] });
    await hot.commitStep(c);
    const row = sqlite.prepare('SELECT prompt_token_ids AS p, output_token_ids AS o, logprobs AS l, available_actions AS a FROM steps').get();
    expect(row).toEqual({ p: JSON.stringify(ids), o: '[117,112]', l: JSON.stringify([Math.log(1 / 256), -0.25]), a: '["up","down"]' });
  });
});
