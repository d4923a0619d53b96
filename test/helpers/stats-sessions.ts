/**
 * Random sets of completed sessions for the statistics tests (fast-check arbitraries), and the
 * filters of `GET /v1/stats` as the SQL of src/db/sessions-repo.ts applies them, so that a test can
 * compute the full answer (sessionStats over the matching rows) beside the aggregate one; their
 * session rows and completing step commits, and a database from before the aggregates.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
import fc from 'fast-check';
import { ATTEMPT_STATUSES, MEMORY_MODES, SESSION_MODES, STATS_MEMORY } from '../../src/domain.js';
import { migrationsFolder } from '../../src/db/index.js';
import { migrationsUpTo } from './migrations.js';
import type { StepCommit, StepInsert } from '../../src/db/queries.js';
import type { AttemptSummary, SessionRow } from '../../src/db/schema.js';
import type { SessionFilters, StatsRow } from '../../src/db/sessions-repo.js';

/** A completed session's statistics columns, with its tenant and update time. */
export type StatsFixture = StatsRow & { tenant: string; updatedAt: number };

const ret = fc.oneof(
  fc.integer({ min: -3, max: 3 }),
  fc.constantFrom(0.1, 0.2, -0.3, 0.7, 1e-9, 2.5),
  fc.double({ min: -1e6, max: 1e6, noNaN: true, noDefaultInfinity: true }),
);

/** An attempt summary; `realistic` ones are ended, with success matching their status. */
function attempt(realistic: boolean): fc.Arbitrary<AttemptSummary> {
  const status = realistic ? fc.constantFrom('succeeded' as const, 'failed' as const) : fc.constantFrom(...ATTEMPT_STATUSES);
  return fc.record({ status, success: fc.boolean(), return: ret }).map(({ status, success, return: r }) => ({
    attempt: 0,
    status,
    success: realistic ? status === 'succeeded' : success,
    steps: 1,
    return: r,
    endReason: status === 'running' ? null : 'done',
  }));
}

/**
 * Completed sessions with unique time-ordered ids `ses_<n>`, few tasks, versions, envs (null too)
 * and modes, many single-attempt ones; `realistic: false` also gives sessions without attempts,
 * running attempts and successes that do not match the status, which the server never writes.
 */
export function statsSessions(opts: { realistic: boolean; minLength?: number; maxLength?: number; tenants?: string[] }): fc.Arbitrary<StatsFixture[]> {
  const one = fc
    .record({
      tenant: fc.constantFrom(...(opts.tenants ?? ['t1'])),
      taskId: fc.constantFrom('task-a', 'task-b', 'task-c'),
      modelVersion: fc.constantFrom('v1', 'v2'),
      env: fc.constantFrom('alfworld', 'webshop', null),
      mode: fc.constantFrom(...SESSION_MODES),
      memory: fc.constantFrom(...MEMORY_MODES),
      maxAttempts: fc.constantFrom(1, 1, 1, 2, 3),
      outcomes: fc.array(attempt(opts.realistic), { minLength: opts.realistic ? 1 : 0, maxLength: 3 }),
      updatedAt: fc.integer({ min: 1, max: 1_000_000 }),
    })
    .map(({ outcomes, ...s }) => {
      // a realistic session ends at its first success or after maxAttempts attempts
      let attempts = outcomes.slice(0, s.maxAttempts);
      if (opts.realistic) {
        const first = attempts.findIndex((a) => a.success);
        attempts = first >= 0 ? attempts.slice(0, first + 1) : attempts;
      }
      return { ...s, attempts: attempts.map((a, i) => ({ ...a, attempt: i })) };
    });
  return fc.array(one, { minLength: opts.minLength ?? 0, maxLength: opts.maxLength ?? 60 }).map((xs) => xs.map((s, i) => ({ id: `ses_${String(i).padStart(6, '0')}`, ...s })));
}

/** A filter of `GET /v1/stats` without a task (the fields the aggregates answer). */
export const statsFilter: fc.Arbitrary<Omit<SessionFilters, 'status' | 'taskId'>> = fc.record(
  {
    env: fc.constantFrom('alfworld', 'webshop', ''),
    mode: fc.constantFrom(...SESSION_MODES),
    modelVersion: fc.constantFrom('v1', 'v2', 'v3'),
    memory: fc.constantFrom(...STATS_MEMORY),
  },
  { requiredKeys: [] },
);

/** The rows of `tenant` matching `f` as src/db/sessions-repo.ts `completed` selects them, in id order. */
export function matching(rows: readonly StatsFixture[], tenant: string, f: Omit<SessionFilters, 'status'>): StatsRow[] {
  return rows
    .filter(
      (r) =>
        r.tenant === tenant &&
        (!f.taskId || r.taskId === f.taskId) &&
        (!f.env || r.env === f.env) &&
        (!f.mode || r.mode === f.mode) &&
        (!f.modelVersion || r.modelVersion === f.modelVersion) &&
        (!f.memory || (f.memory === 'none' ? r.maxAttempts === 1 : r.memory === f.memory && r.maxAttempts > 1)),
    )
    .sort((a, b) => (a.id < b.id ? -1 : 1))
    .map(({ tenant: _t, updatedAt: _u, ...r }) => r);
}

/** `xs` in an order drawn from `seed` (the order sessions complete in). */
export function shuffled<T>(xs: readonly T[], seed: number): T[] {
  const out = [...xs];
  let s = seed >>> 0 || 1;
  for (let i = out.length - 1; i > 0; i--) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** The session row of fixture `f`: active (no attempt yet), or completed as the fixture says. */
export function fixtureRow(f: StatsFixture, status: SessionRow['status'] = 'completed'): SessionRow {
  const done = status === 'completed';
  return {
    id: f.id, tenant: f.tenant, taskId: f.taskId, env: f.env, mode: f.mode, status, instructions: 'x', maxAttempts: f.maxAttempts, maxSteps: 10,
    memory: f.memory, memoryPlacement: 'system', sampling: {}, modelVersion: f.modelVersion, metadata: {},
    nextAttempt: done ? f.attempts.length : 0, nextStep: 0, attempts: done ? [...f.attempts] : [], createdAt: 1, updatedAt: done ? f.updatedAt : 1,
  };
}

/** The step commit that completes the active session of fixture `f`: one final step, and the fixture's attempts. */
export function completingCommit(f: StatsFixture): StepCommit {
  const row: StepInsert = {
    sessionId: f.id, attempt: Math.max(0, f.attempts.length - 1), step: 0, kind: 'action', observation: 'end', reward: 0, done: true, success: false,
    invalidAction: false, availableActions: null, info: null, prompt: null, output: null, action: null, promptTokenIds: null, outputTokenIds: null,
    logprobs: null, droppedSteps: null, modelVersion: f.modelVersion, requestHash: `end.${f.id}`, answer: null, createdAt: f.updatedAt,
  };
  const session = { id: f.id, status: 'completed', attempts: [...f.attempts], nextAttempt: f.attempts.length, nextStep: 0, updatedAt: f.updatedAt };
  return { rows: [row], reflection: null, session };
}

/**
 * A SQLite database in `dataDir` as the server left it before the statistics aggregates existed:
 * every migration up to the one that adds them (found by its tag), applied by drizzle as
 * `openDatabase` applies them, then `rows` written into `sessions`. The caller closes it.
 */
export function databaseBeforeAggregates(dataDir: string, rows: readonly SessionRow[]): Database.Database {
  const folder = migrationsUpTo(migrationsFolder, 'stats_aggregates', false);
  const sqlite = new Database(path.join(dataDir, 'lamer.db'));
  migrate(drizzle(sqlite), { migrationsFolder: folder });
  fs.rmSync(folder, { recursive: true, force: true });
  const insert = sqlite.prepare(
    `INSERT INTO sessions (id, tenant, task_id, env, mode, status, instructions, max_attempts, max_steps, memory, sampling,
      model_version, metadata, next_attempt, next_step, attempts, created_at, updated_at)
     VALUES (@id, @tenant, @taskId, @env, @mode, @status, @instructions, @maxAttempts, @maxSteps, @memory, @sampling,
      @modelVersion, @metadata, @nextAttempt, @nextStep, @attempts, @createdAt, @updatedAt)`,
  );
  sqlite.transaction(() => {
    for (const r of rows) {
      const { memoryPlacement: _m, ...cols } = r;
      insert.run({ ...cols, sampling: JSON.stringify(r.sampling), metadata: JSON.stringify(r.metadata), attempts: JSON.stringify(r.attempts) });
    }
  })();
  return sqlite;
}

/** What {@link finishTwice} needs of a server: its JSON call (test/helpers/index.ts TestServer). */
interface Caller {
  call(method: string, p: string, body?: unknown): Promise<{ status: number; body: any }>;
}

/**
 * Plays `n` sessions of task `taskId` over HTTP, one action and then the final step each, the
 * final step posted to `a` and `b` at once (two replicas, or one server twice) and then once more
 * to each, as a client that retries a step whose answer it did not see. Sessions alternate one
 * attempt and two (the latter succeed at their first attempt, so every session completes).
 * @returns the sessions' ids, after checking that every post of a final step got the same answer.
 */
export async function finishTwice(a: Caller, b: Caller, taskId: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const maxAttempts = i % 2 === 0 ? 1 : 2;
    const c = await a.call('POST', '/v1/sessions', { taskId, env: 'twice', instructions: 'x', maxAttempts, maxSteps: 5 });
    if (c.status !== 201) throw new Error(`create: ${c.status} ${JSON.stringify(c.body)}`);
    const id = c.body.id as string;
    const steps = `/v1/sessions/${id}/steps`;
    const first = await b.call('POST', steps, { attempt: 0, step: 0, observation: 'o', availableActions: ['go', 'stay'] });
    if (first.status !== 200) throw new Error(`step 0: ${first.status} ${JSON.stringify(first.body)}`);
    const end = { attempt: 0, step: 1, observation: 'end', reward: i % 3, done: true, success: maxAttempts === 2 || i % 4 === 0 };
    const answers = await Promise.all([a.call('POST', steps, end), b.call('POST', steps, end)]);
    answers.push(await b.call('POST', steps, end), await a.call('POST', steps, end));
    for (const x of answers) {
      if (x.status !== 200 || JSON.stringify(x.body) !== JSON.stringify(answers[0]!.body)) {
        throw new Error(`final step of ${id}: ${x.status} ${JSON.stringify(x.body)} differs from ${JSON.stringify(answers[0]!.body)}`);
      }
    }
    if (answers[0]!.body.session?.status !== 'completed') throw new Error(`${id} did not complete: ${JSON.stringify(answers[0]!.body)}`);
    ids.push(id);
  }
  return ids;
}
