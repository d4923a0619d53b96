/**
 * What the PostgreSQL repositories (src/db/pg/repositories.ts) add to the store contract
 * (test/db/async-repositories.test.ts): two replicas (two pools on one database) racing for the
 * same step positions record each once and answer alike, and failures reject as the DatabaseError
 * kinds the HTTP layer answers (a statement over its timeout is `busy`, a server that cannot be
 * reached is `io`); the SQLSTATE mapping itself.
 */
import pg from 'pg';
import { drizzle } from 'drizzle-orm/node-postgres';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { DatabaseError, StaleSessionError } from '../../../src/db/errors.js';
import { openPgDatabase, type PgConnection } from '../../../src/db/pg/connection.js';
import { pgDatabaseErrorOf, pgErrorKind, startupErrorOf } from '../../../src/db/pg/errors.js';
import { pgRepositories } from '../../../src/db/pg/repositories.js';
import * as pgSchema from '../../../src/db/pg/schema.js';
import type { StepCommit } from '../../../src/db/queries.js';
import type { SessionRow } from '../../../src/db/schema.js';
import { freePort, postgresForTests } from '../../helpers/postgres.js';

const server = await postgresForTests();

const opened: PgConnection[] = [];
afterAll(async () => {
  for (const c of opened.splice(0)) await c.close();
});

const T0 = 1_800_000_000_000;

function activeSession(id: string): SessionRow {
  return {
    id, tenant: 't', taskId: 'k', env: null, mode: 'train', status: 'active', instructions: 'i', maxAttempts: 1, maxSteps: 10,
    memory: 'reflection_only', memoryPlacement: 'system', sampling: {}, modelVersion: 'v1', metadata: {}, nextAttempt: 0, nextStep: 0,
    attempts: [], createdAt: T0, updatedAt: T0,
  };
}

function commit(sessionId: string, step: number, answer: string): StepCommit {
  return {
    rows: [
      {
        sessionId, attempt: 0, step, kind: 'action', observation: 'o', reward: 0, done: false, success: false, invalidAction: false,
        availableActions: null, info: null, prompt: 'p', output: 'a', action: 'a', promptTokenIds: [1], outputTokenIds: [2], logprobs: [-1],
        droppedSteps: 0, modelVersion: 'v1', requestHash: `h${step}`, answer, createdAt: T0 + step,
      },
    ],
    reflection: null,
    session: { id: sessionId, status: 'active', attempts: [], nextAttempt: 0, nextStep: step + 1, updatedAt: T0 + step },
  };
}

describe('SQLSTATE kinds', () => {
  it('maps the codes an operator or client can act on, and no others', () => {
    expect(['57014', '55P03', '40001', '40P01', '53300'].map(pgErrorKind)).toEqual(Array(5).fill('busy'));
    expect([pgErrorKind('53100'), pgErrorKind('08006'), pgErrorKind('57P01'), pgErrorKind('25006'), pgErrorKind('XX001')]).toEqual([
      'full', 'io', 'io', 'readonly', 'corrupt',
    ]);
    expect([pgErrorKind('23505'), pgErrorKind('23503'), pgErrorKind('42P01')]).toEqual([null, null, null]);
    expect(pgDatabaseErrorOf({ code: '23505', message: 'duplicate key' })).toBeNull();
    expect(pgDatabaseErrorOf(new Error('wrapped', { cause: { code: '57014', message: 'canceling statement' } }))).toMatchObject({ kind: 'busy', code: '57014' });
    expect(pgDatabaseErrorOf(new Error('timeout exceeded when trying to connect'))).toMatchObject({ kind: 'busy' });
    expect(pgDatabaseErrorOf(new Error('Connection terminated unexpectedly'))).toMatchObject({ kind: 'io' });
  });

  it('start-up errors are one line for each cause', () => {
    expect(startupErrorOf({ code: '28P01', message: 'password authentication failed\nfor user "x"' }, 'h:1', 'x', 'd').message).toBe(
      'database authentication failed for user "x" at h:1: password authentication failed for user "x"',
    );
    expect(startupErrorOf({ code: 'ENOTFOUND', message: 'getaddrinfo ENOTFOUND nohost' }, 'nohost:5432', 'x', 'd')).toMatchObject({
      reason: 'unreachable',
      message: 'database unreachable at nohost:5432 (ENOTFOUND)',
    });
  });
});

describe('a store that cannot be reached', () => {
  it('rejects every call as an `io` DatabaseError', async () => {
    const pool = new pg.Pool({ connectionString: `postgres://u:p@127.0.0.1:${await freePort()}/lamer`, connectionTimeoutMillis: 2000 });
    pool.on('error', () => {});
    const conn = { db: drizzle(pool, { schema: pgSchema }), pool } as unknown as PgConnection;
    try {
      const r = pgRepositories(conn);
      const err = await r.sessions.activeCount().then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(DatabaseError);
      expect([(err as DatabaseError).kind, (err as DatabaseError).code]).toEqual(['io', 'ECONNREFUSED']);
      const exportErr = await (async () => {
        for await (const _ of r.export.lines()) return null;
      })().then(() => null, (e: unknown) => e);
      expect(exportErr).toBeInstanceOf(DatabaseError);
    } finally {
      await pool.end();
    }
  });
});

describe.skipIf(!server)('PostgreSQL repositories', () => {
  const pgs = server!;

  it('two replicas racing for the same positions record each once and give both the same answer', async () => {
    const url = await pgs.freshDatabase();
    const a = await openPgDatabase(url);
    const b = await openPgDatabase(url);
    opened.push(a, b);
    const [ra, rb] = [pgRepositories(a), pgRepositories(b)];
    const ids = Array.from({ length: 16 }, (_, i) => `ses_${String(i).padStart(2, '0')}`);
    for (const id of ids) {
      await ra.sessions.insert(activeSession(id));
    }
    for (let step = 0; step < 3; step++) {
      const results = await Promise.all(
        ids.flatMap((id) => [ra.hot.commitStep(commit(id, step, `"a ${id} ${step}"`)), rb.hot.commitStep(commit(id, step, `"b ${id} ${step}"`))]),
      );
      for (let i = 0; i < ids.length; i++) {
        const [x, y] = [results[2 * i]!, results[2 * i + 1]!];
        expect([x.recorded, y.recorded].sort()).toEqual([false, true]);
        expect(x.answer).toBe(y.answer);
      }
    }
    const counts = await a.pool.query<{ n: number; positions: number }>('select count(*)::int as n, count(distinct (session_id, step))::int as positions from steps');
    expect(counts.rows[0]).toEqual({ n: 48, positions: 48 });
    for (const id of ids) expect((await rb.hot.session(id))?.nextStep).toBe(3);
  });

  it('a step of one row that completes nothing is one statement on the pool; its null values are stored as SQL NULL', async () => {
    const url = await pgs.freshDatabase();
    const c = await openPgDatabase(url);
    opened.push(c);
    const r = pgRepositories(c);
    await r.sessions.insert(activeSession('ses_one'));
    const query = vi.spyOn(c.pool, 'query');
    const connect = vi.spyOn(c.pool, 'connect');
    try {
      for (let step = 0; step < 3; step++) expect((await r.hot.commitStep(commit('ses_one', step, `"${step}"`))).recorded).toBe(true);
      expect([query.mock.calls.length, connect.mock.calls.length]).toEqual([3, 3]);
    } finally {
      query.mockRestore();
      connect.mockRestore();
    }
    const nulls = await c.pool.query<{ n: number }>(
      'select count(*)::int as n from steps where info is null and available_actions is null and engine_record is null and turn is null',
    );
    expect(nulls.rows[0]!.n).toBe(3);
    expect(await r.hot.stepAtPosition('ses_one', 0, 2)).toEqual({ requestHash: 'h2', answer: '"2"' });
    expect((await r.hot.session('ses_one'))?.nextStep).toBe(3);
  });

  it('a step commit waits for a transaction that holds its session, then finds the session changed and writes nothing', async () => {
    const url = await pgs.freshDatabase();
    const c = await openPgDatabase(url);
    opened.push(c);
    const r = pgRepositories(c);
    await r.sessions.insert(activeSession('ses_held'));
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query("select * from sessions where id = 'ses_held' for update");
      const step = commit('ses_held', 0, '"late"');
      step.session.expectedUpdatedAt = T0;
      const pending = r.hot.commitStep(step).then(() => null, (e: unknown) => e);
      // once the commit waits on the row lock, the holder changes the session and commits
      const waiting = "select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()";
      while ((await c.pool.query<{ n: number }>(waiting)).rows[0]!.n === 0) await new Promise((resolve) => setTimeout(resolve, 20));
      await holder.query(`update sessions set updated_at = ${T0 + 1} where id = 'ses_held'`);
      await holder.query('commit');
      expect(await pending).toBeInstanceOf(StaleSessionError);
      expect(await r.hot.stepAtPosition('ses_held', 0, 0)).toBeUndefined();
      expect((await r.hot.session('ses_held'))?.nextStep).toBe(0);
    } finally {
      await holder.end();
    }
  });

  it('a statement held past the statement timeout rejects as `busy` and writes nothing', async () => {
    const url = await pgs.freshDatabase();
    const c = await openPgDatabase(url, { statementTimeoutMs: 200 });
    opened.push(c);
    const r = pgRepositories(c);
    await r.jobs.insert({ id: 'job_1', algorithm: 'lamer', status: 'running', config: {}, metrics: [], createdAt: T0 });
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query("select * from training_jobs where id = 'job_1' for update");
      const err = await r.jobs.update('job_1', { progress: 0.5 }).then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(DatabaseError);
      expect([(err as DatabaseError).kind, (err as DatabaseError).code]).toEqual(['busy', '57014']);
      await holder.query('rollback');
      expect((await r.jobs.get('job_1'))?.progress).toBe(0);
    } finally {
      await holder.end();
    }
  });
});
