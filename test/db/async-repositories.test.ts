/**
 * The store contract (src/db/async-repositories.ts): the same cases against both stores, the
 * SQLite store through its adapter over a real database file and the PostgreSQL store against a
 * real server on loopback (test/helpers/postgres.ts; skipped, saying why, where none can start).
 * Sessions, steps, the step hot path with its exactly-once commit, models, jobs, training data and
 * the export answer alike on both, and so do the statistics aggregates: kept by the commit that
 * completes a session or by nothing (a completion whose aggregates fail commits nothing), rebuilt
 * at reopen when sessions were written around the store.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { openDatabase, type DatabaseConnection } from '../../src/db/index.js';
import { SessionNotActiveError, StaleSessionError, sqliteAsyncRepositories, type AsyncRepositories } from '../../src/db/async-repositories.js';
import { openPgDatabase, type PgConnection } from '../../src/db/pg/connection.js';
import { pgRepositories } from '../../src/db/pg/repositories.js';
import type { StepCommit, StepInsert } from '../../src/db/queries.js';
import type { AttemptSummary, SessionRow } from '../../src/db/schema.js';
import { sessionStats, statsFromGroups } from '../../src/agent/session-stats.js';
import { tmpDir } from '../helpers/index.js';
import { shuffled, statsSessions, type StatsFixture } from '../helpers/stats-sessions.js';
import { postgresForTests } from '../helpers/postgres.js';

const server = await postgresForTests();

interface Store {
  name: 'sqlite' | 'postgres';
  skip: boolean;
  /** Empty repositories for one test. */
  fresh(): Promise<AsyncRepositories>;
  /** Write completed sessions straight into the sessions table, past the repositories (as a copy or an import would). */
  writeAround(rows: SessionRow[]): Promise<void>;
  /** Open the store of the last `fresh()` again (a server restart): its repositories. */
  reopen(): Promise<AsyncRepositories>;
  /** Make the statistics aggregates of session `id` fail to write (its completion row) until the returned function (idempotent) runs. */
  breakCompletionOf(id: string): Promise<() => Promise<void>>;
  /**
   * The repositories of a second replica on the store of the last `fresh()`: on PostgreSQL a pool of
   * its own; on SQLite the same repositories (one process owns the file, so there is no other replica).
   */
  replica(): Promise<AsyncRepositories>;
}

let sqliteDir = '';
let sqliteConn: DatabaseConnection | null = null;
const sqliteStore: Store = {
  name: 'sqlite',
  skip: false,
  async fresh() {
    sqliteDir = tmpDir('lamer-contract-');
    const conn = openDatabase(sqliteDir);
    sqliteConn = conn;
    afterAllClose.push(async () => conn.close());
    return sqliteAsyncRepositories(conn);
  },
  async writeAround(rows) {
    const insert = sqliteConn!.sqlite.prepare(
      `INSERT INTO sessions (id, tenant, task_id, env, mode, status, instructions, max_attempts, max_steps, memory, sampling,
        model_version, metadata, next_attempt, next_step, attempts, created_at, updated_at)
       VALUES (@id, @tenant, @taskId, @env, @mode, @status, @instructions, @maxAttempts, @maxSteps, @memory, @sampling,
        @modelVersion, @metadata, @nextAttempt, @nextStep, @attempts, @createdAt, @updatedAt)`,
    );
    for (const r of rows) {
      const { memoryPlacement: _m, ...cols } = r;
      insert.run({ ...cols, sampling: JSON.stringify(r.sampling), metadata: JSON.stringify(r.metadata), attempts: JSON.stringify(r.attempts) });
    }
  },
  async breakCompletionOf(id) {
    sqliteConn!.sqlite.exec(`CREATE TRIGGER broken_completion BEFORE INSERT ON stats_completions WHEN NEW.session_id = '${id}'
      BEGIN SELECT RAISE(ABORT, 'stats_completions refused'); END`);
    return async () => void sqliteConn!.sqlite.exec('DROP TRIGGER IF EXISTS broken_completion');
  },
  async replica() {
    return sqliteAsyncRepositories(sqliteConn!);
  },
  async reopen() {
    sqliteConn!.close();
    const conn = openDatabase(sqliteDir);
    sqliteConn = conn;
    afterAllClose.push(async () => conn.close());
    return sqliteAsyncRepositories(conn);
  },
};

let pgConn: PgConnection | null = null;
let pgUrl = '';
const pgStore: Store = {
  name: 'postgres',
  skip: !server,
  async fresh() {
    pgUrl ||= await server!.freshDatabase();
    pgConn ??= await openPgDatabase(pgUrl);
    await pgConn.pool.query(`TRUNCATE stats_completions, stats_tenants, stats_retries, stats_groups, steps, reflections, sessions, models, training_jobs, replays
      RESTART IDENTITY`);
    return pgRepositories(pgConn);
  },
  async writeAround(rows) {
    for (const r of rows) {
      await pgConn!.pool.query(
        `INSERT INTO sessions (id, tenant, task_id, env, mode, status, instructions, max_attempts, max_steps, memory, sampling,
          model_version, metadata, next_attempt, next_step, attempts, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
        [r.id, r.tenant, r.taskId, r.env, r.mode, r.status, r.instructions, r.maxAttempts, r.maxSteps, r.memory, JSON.stringify(r.sampling),
          r.modelVersion, JSON.stringify(r.metadata), r.nextAttempt, r.nextStep, JSON.stringify(r.attempts), r.createdAt, r.updatedAt],
      );
    }
  },
  async breakCompletionOf(id) {
    await pgConn!.pool.query(`CREATE FUNCTION refuse_completion() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.session_id = '${id}' THEN RAISE EXCEPTION 'stats_completions refused'; END IF; RETURN NEW; END $$`);
    await pgConn!.pool.query('CREATE TRIGGER broken_completion BEFORE INSERT ON stats_completions FOR EACH ROW EXECUTE FUNCTION refuse_completion()');
    return async () => {
      await pgConn!.pool.query('DROP TRIGGER IF EXISTS broken_completion ON stats_completions');
      await pgConn!.pool.query('DROP FUNCTION IF EXISTS refuse_completion()');
    };
  },
  async replica() {
    const conn = await openPgDatabase(pgUrl);
    afterAllClose.push(() => conn.close());
    return pgRepositories(conn);
  },
  async reopen() {
    await pgConn!.close();
    pgConn = await openPgDatabase(pgUrl);
    return pgRepositories(pgConn);
  },
};

const afterAllClose: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const close of afterAllClose.splice(0)) await close();
  await pgConn?.close();
});

const T0 = 1_800_000_000_000;

function session(id: string, over: Partial<SessionRow> = {}): SessionRow {
  return {
    id,
    tenant: 't1',
    taskId: 'task-a',
    env: 'alfworld',
    mode: 'train',
    status: 'active',
    instructions: 'Find the key.',
    maxAttempts: 3,
    maxSteps: 10,
    memory: 'reflection_only',
    memoryPlacement: 'system',
    sampling: { temperature: 0.7, seed: 7, nested: { k: '"123"' } },
    modelVersion: 'v1',
    metadata: { user: 'ü', n: 1.5 },
    nextAttempt: 0,
    nextStep: 0,
    attempts: [],
    createdAt: T0,
    updatedAt: T0,
    ...over,
  };
}

function stepRow(sessionId: string, attempt: number, step: number, over: Partial<StepInsert> = {}): StepInsert {
  return {
    sessionId,
    attempt,
    step,
    kind: 'action',
    observation: `obs ${attempt}.${step}`,
    reward: step === 0 ? 0 : 0.5,
    done: false,
    success: false,
    invalidAction: false,
    availableActions: ['go north', 'take key'],
    info: { room: 3 },
    prompt: `prompt ${attempt}.${step}`,
    output: `out ${attempt}.${step}`,
    action: `act ${attempt}.${step}`,
    promptTokenIds: [1, 2, 3],
    outputTokenIds: [4, 5],
    logprobs: [-0.125, -1.0000000000000002],
    droppedSteps: 0,
    promptTruncatedChars: 0,
    engineRecord: null,
    turn: null,
    modelVersion: 'v1',
    requestHash: `hash ${attempt}.${step}`,
    answer: JSON.stringify({ action: `act ${attempt}.${step}`, attempt, step }),
    createdAt: T0 + attempt * 100 + step,
    ...over,
  };
}

/** The commit of one action step at (attempt, step) that moves the session on by one step. */
function commitAt(sessionId: string, attempt: number, step: number, over: Partial<StepInsert> = {}): StepCommit {
  const row = stepRow(sessionId, attempt, step, over);
  return {
    rows: [row],
    reflection: null,
    session: { id: sessionId, status: 'active', attempts: [], nextAttempt: attempt, nextStep: step + 1, updatedAt: row.createdAt },
  };
}

const summary = (attempt: number, success: boolean): AttemptSummary => ({
  attempt,
  status: success ? 'succeeded' : 'failed',
  steps: 2,
  return: success ? 1 : 0,
  success,
  endReason: success ? 'success' : 'done',
} as AttemptSummary);

/** A completed session `id` with attempts whose actions are given (one array of actions per attempt). */
async function completedSession(r: AsyncRepositories, id: string, actions: string[][], over: Partial<SessionRow> = {}): Promise<void> {
  await r.sessions.insert(session(id, { maxAttempts: Math.max(actions.length, 1), ...over }));
  for (const [a, acts] of actions.entries()) {
    for (const [s, act] of acts.entries()) await r.hot.commitStep(commitAt(id, a, s, { action: act }));
  }
  const attempts = actions.map((_, a) => summary(a, a === actions.length - 1));
  const last = commitAt(id, actions.length - 1, actions.at(-1)!.length, { action: null, done: true, success: true });
  last.session = { ...last.session, status: 'completed', attempts, updatedAt: T0 + 999 };
  await r.hot.commitStep(last);
}

for (const store of [sqliteStore, pgStore]) {
  describe.skipIf(store.skip)(`store contract: ${store.name}`, () => {
    let r: AsyncRepositories;
    beforeAll(async () => {
      r = await store.fresh();
      expect(r.store).toBe(store.name);
    });

    describe('sessions', () => {
      beforeAll(async () => {
        r = await store.fresh();
      });

      it('reads a session back exactly as written (JSON values, defaults), refuses a second insert of its id', async () => {
        const row = session('ses_a');
        await r.sessions.insert(row);
        expect(await r.hot.session('ses_a')).toEqual(row);
        expect(await r.hot.session('ses_none')).toBeUndefined();
        await expect(r.sessions.insert(row)).rejects.toThrow();
        expect(await r.sessions.list('t1', {}, 10)).toHaveLength(1);
      });

      it('lists a tenant\'s sessions newest id first, with filters, cursor and limit + 1', async () => {
        await r.sessions.insert(session('ses_b', { taskId: 'task-b', env: null, mode: 'eval' }));
        await r.sessions.insert(session('ses_c', { status: 'completed', maxAttempts: 1, modelVersion: 'v2' }));
        await r.sessions.insert(session('ses_d', { memory: 'history_only' }));
        await r.sessions.insert(session('ses_e', { tenant: 't2' }));
        const ids = async (f: Parameters<AsyncRepositories['sessions']['list']>[1], limit = 10, cursor?: string) =>
          (await r.sessions.list('t1', f, limit, cursor)).map((s) => s.id);
        expect(await ids({})).toEqual(['ses_d', 'ses_c', 'ses_b', 'ses_a']);
        expect(await ids({}, 1)).toEqual(['ses_d', 'ses_c']);
        expect(await ids({}, 2, 'ses_c')).toEqual(['ses_b', 'ses_a']);
        expect(await ids({ status: 'completed' })).toEqual(['ses_c']);
        expect(await ids({ taskId: 'task-b' })).toEqual(['ses_b']);
        expect(await ids({ env: 'alfworld' })).toEqual(['ses_d', 'ses_c', 'ses_a']);
        expect(await ids({ mode: 'eval' })).toEqual(['ses_b']);
        expect(await ids({ modelVersion: 'v2' })).toEqual(['ses_c']);
        expect(await ids({ memory: 'none' })).toEqual(['ses_c']);
        expect(await ids({ memory: 'reflection_only' })).toEqual(['ses_b', 'ses_a']);
        expect(await ids({ memory: 'history_only', status: 'active' })).toEqual(['ses_d']);
        expect((await r.sessions.list('t2', {}, 10)).map((s) => s.id)).toEqual(['ses_e']);
      });

      it('counts active sessions per tenant and in total', async () => {
        expect(await r.sessions.activeCount()).toBe(4);
        expect(await r.sessions.activeCount('t1')).toBe(3);
        expect(await r.hot.activeCount('t1')).toBe(3);
        expect(await r.hot.activeCount('nobody')).toBe(0);
      });

      it('inserts under the open-session cap: the count and the insert are one step, however many creates race', async () => {
        const rows = Array.from({ length: 6 }, (_, i) => session(`ses_cap${i}`, { tenant: 't-cap' }));
        const results = await Promise.all(rows.map((row) => r.sessions.insertUnderCap(row, 4)));
        expect(results.filter((x) => x.inserted)).toHaveLength(4);
        expect(results.filter((x) => !x.inserted).every((x) => x.open === 4)).toBe(true);
        expect(await r.sessions.activeCount('t-cap')).toBe(4);
        // no cap: inserted, nothing counted
        expect(await r.sessions.insertUnderCap(session('ses_cap9', { tenant: 't-cap' }), 0)).toEqual({ inserted: true, open: 0 });
        for (const row of rows) await r.sessions.abandon(row.id, [], T0);
        await r.sessions.abandon('ses_cap9', [], T0);
      });

      it('abandons, finds idle sessions and expires only active idle ones', async () => {
        await r.sessions.abandon('ses_b', [summary(0, false)], T0 + 50);
        expect(await r.hot.session('ses_b')).toMatchObject({ status: 'abandoned', attempts: [summary(0, false)], updatedAt: T0 + 50 });
        expect((await r.sessions.idleIds(T0 + 10)).sort()).toEqual(['ses_a', 'ses_d', 'ses_e']);
        expect(await r.sessions.idleIds(T0)).toEqual([]);
        expect(await r.sessions.expire('ses_a', [], T0 + 10, T0 + 60)).toBe(true);
        expect(await r.sessions.expire('ses_a', [], T0 + 10, T0 + 70)).toBe(false);
        expect(await r.sessions.expire('ses_b', [], T0 + 100, T0 + 70)).toBe(false);
        expect(await r.sessions.expire('ses_d', [], T0, T0 + 70)).toBe(false);
        expect(await r.hot.session('ses_a')).toMatchObject({ status: 'expired', updatedAt: T0 + 60 });
        expect(await r.sessions.activeCount('t1')).toBe(1);
      });
    });

    describe('completed sessions: statistics rows, change token, attempt trajectories', () => {
      beforeAll(async () => {
        r = await store.fresh();
      });

      it('answer alike', async () => {
        expect(await r.sessions.completedToken('t1')).toBe('0:0');
        await completedSession(r, 'ses_1', [['a', 'b'], ['c']]);
        await completedSession(r, 'ses_2', [['x']], { maxAttempts: 1, modelVersion: 'v2', env: null });
        await completedSession(r, 'ses_3', [[]]);
        await r.sessions.insert(session('ses_4'));
        expect(await r.sessions.completedToken('t1')).toBe(`3:${T0 + 999}`);
        const rows = await r.sessions.completed('t1', {});
        expect(rows.map((s) => s.id)).toEqual(['ses_1', 'ses_2', 'ses_3']);
        expect(rows[0]).toEqual({
          id: 'ses_1', taskId: 'task-a', attempts: [summary(0, false), summary(1, true)], maxAttempts: 2,
          modelVersion: 'v1', env: 'alfworld', mode: 'train', memory: 'reflection_only',
        });
        expect((await r.sessions.completed('t1', { memory: 'none' })).map((s) => s.id)).toEqual(['ses_2', 'ses_3']);
        expect((await r.sessions.completed('t1', { modelVersion: 'v2' })).map((s) => s.id)).toEqual(['ses_2']);
        expect(await r.sessions.attemptTrajectories('t1', {}, 10)).toEqual([
          { sessionId: 'ses_1', modelVersion: 'v1', env: 'alfworld', taskId: 'task-a', memory: 'reflection_only', trajectory: 'a\nb' },
          { sessionId: 'ses_1', modelVersion: 'v1', env: 'alfworld', taskId: 'task-a', memory: 'reflection_only', trajectory: 'c' },
          { sessionId: 'ses_2', modelVersion: 'v2', env: null, taskId: 'task-a', memory: 'none', trajectory: 'x' },
          // A session without any recorded action: one row whose trajectory is '' on both stores, though
          // src/db/sessions-repo.ts documents null and src/agent/diversity.ts skips only null.
          { sessionId: 'ses_3', modelVersion: 'v1', env: 'alfworld', taskId: 'task-a', memory: 'none', trajectory: '' },
        ]);
        expect((await r.sessions.attemptTrajectories('t1', {}, 1)).map((t) => t.sessionId)).toEqual(['ses_3']);
        // the rows of given sessions: completed ones of the tenant matching the filter, in (id, attempt) order
        const all = await r.sessions.attemptTrajectories('t1', {}, 10);
        expect(await r.sessions.trajectoriesOf('t1', {}, ['ses_3', 'ses_4', 'ses_1', 'ses_none'])).toEqual(all.filter((t) => t.sessionId !== 'ses_2'));
        expect(await r.sessions.trajectoriesOf('t1', { memory: 'none' }, ['ses_1', 'ses_2', 'ses_3'])).toEqual(all.filter((t) => t.sessionId !== 'ses_1'));
        expect(await r.sessions.trajectoriesOf('t2', {}, ['ses_1'])).toEqual([]);
        expect(await r.sessions.trajectoriesOf('t1', {}, [])).toEqual([]);
        expect(await r.sessions.completionSeq('t1')).toBe(3);
        expect(await r.sessions.completionsBetween('t1', 0, 3)).toEqual(['ses_1', 'ses_2', 'ses_3']);
        expect(await r.sessions.completionSeq('t2')).toBe(0);
        expect(await r.sessions.attemptTrajectories('t2', {}, 10)).toEqual([]);
      });
    });

    describe('statistics aggregates kept on write', () => {
      /** The session row of a statistics fixture, still active (or completed, to insert as such). */
      const rowOf = (f: StatsFixture, status: SessionRow['status']): SessionRow =>
        session(f.id, { ...f, status, attempts: status === 'completed' ? [...f.attempts] : [], updatedAt: status === 'completed' ? f.updatedAt : T0 });
      /** The step commit that completes fixture `f`. */
      const completing = (f: StatsFixture): StepCommit => {
        const c = commitAt(f.id, 0, 0, { done: true, action: null });
        c.session = { ...c.session, status: 'completed', attempts: [...f.attempts], updatedAt: f.updatedAt };
        return c;
      };
      const filters = [{}, { memory: 'none' as const }, { modelVersion: 'v1', env: 'alfworld' }, { mode: 'eval' as const, memory: 'reflection_only' as const }];
      /** The aggregate answers equal the full computation over the completed sessions, for each tenant, filter and chain length. */
      const expectSameAnswers = async (repos: AsyncRepositories) => {
        for (const tenant of ['t1', 't2']) {
          const groups = await repos.sessions.statsGroups(tenant);
          for (const f of filters) {
            const rows = await repos.sessions.completed(tenant, f);
            for (const retries of [1, 2, 3]) expect(statsFromGroups(groups, f, retries)).toEqual(sessionStats(rows, retries));
          }
        }
      };

      it('sessions completed by step commits in any order, several at once, and inserted completed: the same answers as the full computation', async () => {
        await fc.assert(
          fc.asyncProperty(statsSessions({ realistic: false, tenants: ['t1', 't2'], maxLength: 40 }), fc.integer(), async (fixtures, seed) => {
            r = await store.fresh();
            const direct = fixtures.filter((_, i) => i % 5 === 4);
            const played = fixtures.filter((_, i) => i % 5 !== 4);
            for (const f of played) await r.sessions.insert(rowOf(f, 'active'));
            for (const f of direct) await r.sessions.insert(rowOf(f, 'completed'));
            const order = shuffled(played, seed);
            // commits of several sessions at once, as several replicas (or one replica's batch) make them
            for (let i = 0; i < order.length; i += 6) await Promise.all(order.slice(i, i + 6).map((f) => r.hot.commitStep(completing(f))));
            await expectSameAnswers(r);
            const completed = fixtures.filter((f) => f.tenant === 't1');
            const latest = completed.reduce((m, f) => Math.max(m, f.updatedAt), 0);
            expect(await r.sessions.completedToken('t1')).toBe(`${completed.length}:${latest}`);
            // every completion once in the tenant's log, numbered 1..n
            expect(await r.sessions.completionSeq('t1')).toBe(completed.length);
            const logged = await r.sessions.completionsBetween('t1', 0, completed.length);
            expect([...logged].sort()).toEqual(completed.map((f) => f.id).sort());
            expect(await r.sessions.completionsBetween('t1', 1, 3)).toEqual(logged.slice(1, 3));
            expect(await r.sessions.completionsBetween('t1', completed.length - 1, completed.length + 5)).toEqual(logged.slice(-1));
          }),
          { numRuns: store.name === 'postgres' ? 8 : 15 },
        );
      });

      it('many concurrent completions of one task\'s single-attempt sessions keep the chains exact', async () => {
        r = await store.fresh();
        const fixtures = Array.from({ length: 30 }, (_, i): StatsFixture => ({
          id: `ses_${String(i).padStart(3, '0')}`, tenant: 't1', taskId: 'task-a', modelVersion: 'v1', env: 'alfworld', mode: 'train',
          memory: 'reflection_only', maxAttempts: 1, updatedAt: T0 + i,
          attempts: [{ ...summary(0, i % 4 === 3), return: i % 4 === 3 ? 1 : 0.1 }],
        }));
        for (const f of fixtures) await r.sessions.insert(rowOf(f, 'active'));
        // eight at a time: within the pool's connections (10), so that all of them wait on the group's lock, none on the pool
        const order = shuffled(fixtures, 7);
        for (let i = 0; i < order.length; i += 8) await Promise.all(order.slice(i, i + 8).map((f) => r.hot.commitStep(completing(f))));
        await expectSameAnswers(r);
        const none = (await r.sessions.statsGroups('t1')).find((g) => g.memory === 'none');
        expect(none).toMatchObject({ sessions: 30, updatedAt: T0 + 29 });
      });

      it('a completion whose aggregates cannot be written commits nothing, beside others that commit; a retry counts it once', async () => {
        r = await store.fresh();
        const [fixtures] = fc.sample(statsSessions({ realistic: true, tenants: ['t1', 't2'], minLength: 12, maxLength: 12 }), { numRuns: 1, seed: 4 });
        for (const f of fixtures!) await r.sessions.insert(rowOf(f, 'active'));
        const [victim, ...others] = shuffled(fixtures!, 2);
        for (const f of others.slice(0, 4)) await r.hot.commitStep(completing(f));
        const mend = await store.breakCompletionOf(victim!.id);
        const seq = await r.sessions.completionSeq(victim!.tenant);
        const groups = await r.sessions.statsGroups(victim!.tenant);
        const results = await Promise.allSettled([victim!, ...others.slice(4, 8)].map((f) => r.hot.commitStep(completing(f))));
        expect(results.map((x) => x.status)).toEqual(['rejected', 'fulfilled', 'fulfilled', 'fulfilled', 'fulfilled']);
        try {
          // the store's error, or the driver's beneath it (drizzle wraps PostgreSQL's)
          const reason = (results[0] as PromiseRejectedResult).reason as Error & { cause?: Error };
          expect(`${reason.message} ${reason.cause?.message ?? ''}`).toMatch(/stats_completions refused/);
          expect((await r.hot.session(victim!.id))?.status).toBe('active');
          expect(await r.hot.stepAtPosition(victim!.id, 0, 0)).toBeUndefined();
          expect(await r.sessions.completionsBetween(victim!.tenant, 0, 100)).not.toContain(victim!.id);
          await expectSameAnswers(r);
          const moreOfTenant = others.slice(4, 8).filter((f) => f.tenant === victim!.tenant).length;
          expect(await r.sessions.completionSeq(victim!.tenant)).toBe(seq + moreOfTenant);
          if (moreOfTenant === 0) expect(await r.sessions.statsGroups(victim!.tenant)).toEqual(groups);
        } finally {
          await mend();
        }
        for (const f of [victim!, ...others.slice(8)]) await r.hot.commitStep(completing(f));
        await expectSameAnswers(r);
        for (const tenant of ['t1', 't2']) {
          const ids = fixtures!.filter((f) => f.tenant === tenant).map((f) => f.id).sort();
          expect([...(await r.sessions.completionsBetween(tenant, 0, 100))].sort()).toEqual(ids);
        }
      });

      it('the step that completes a session, posted to two replicas at once and retried after: counted once', async () => {
        r = await store.fresh();
        const other = await store.replica();
        const [fixtures] = fc.sample(statsSessions({ realistic: true, tenants: ['t1', 't2'], minLength: 16, maxLength: 16 }), { numRuns: 1, seed: 11 });
        // one task's chain of single-attempt sessions too, where a second count would move the streaks
        const chain = Array.from({ length: 6 }, (_, i): StatsFixture => ({
          id: `ses_c${i}`, tenant: 't1', taskId: 'task-a', modelVersion: 'v1', env: 'alfworld', mode: 'train',
          memory: 'reflection_only', maxAttempts: 1, updatedAt: T0 + i, attempts: [{ ...summary(0, i % 3 === 2), return: i % 3 === 2 ? 1 : 0.1 }],
        }));
        const all = [...fixtures!, ...chain];
        for (const f of all) await r.sessions.insert(rowOf(f, 'active'));
        const racing = (f: StatsFixture, replica: number, i: number): StepCommit => {
          const c = completing(f);
          // each replica's own answer and update time; half of them guard on the state they read, as the service does
          c.rows = c.rows.map((row) => ({ ...row, answer: JSON.stringify({ replica }) }));
          c.session = { ...c.session, updatedAt: f.updatedAt + replica, expectedUpdatedAt: i % 2 === 0 ? T0 : undefined };
          return c;
        };
        const results = await Promise.all(
          shuffled(all, 5).map(async (f, i) => ({ f, got: await Promise.all([r.hot.commitStep(racing(f, 0, i)), other.hot.commitStep(racing(f, 1, i))]) })),
        );
        for (const { got } of results) {
          expect(got.map((x) => x.recorded).sort()).toEqual([false, true]);
          expect(got[0]!.answer).toBe(got[1]!.answer);
        }
        // the idempotent replays of the client that did not see its answer, on either replica
        for (const [i, f] of all.entries()) {
          const again = await (i % 2 ? other : r).hot.commitStep(racing(f, 2, i));
          expect(again.recorded).toBe(false);
        }
        // a commit a stale replica computed for a later position finds the session completed and writes nothing
        const late = commitAt(chain[0]!.id, 0, 1, { done: true, action: null });
        late.session = { ...late.session, status: 'completed', attempts: [...chain[0]!.attempts] };
        await expect(other.hot.commitStep(late)).rejects.toBeInstanceOf(SessionNotActiveError);
        // every session stored with the update of the commit that recorded its step
        for (const { f, got } of results) {
          const winner = JSON.parse(got[0]!.answer!) as { replica: number };
          expect((await r.hot.session(f.id))?.updatedAt).toBe(f.updatedAt + winner.replica);
        }
        for (const tenant of ['t1', 't2']) {
          const ids = all.filter((f) => f.tenant === tenant).map((f) => f.id).sort();
          expect(await r.sessions.completionSeq(tenant)).toBe(ids.length);
          expect([...(await other.sessions.completionsBetween(tenant, 0, 100))].sort()).toEqual(ids);
          const groups = await other.sessions.statsGroups(tenant);
          expect(groups.reduce((n, g) => n + g.sessions, 0)).toBe(ids.length);
        }
        await expectSameAnswers(r);
        await expectSameAnswers(other);
      });

      it('sessions written around the repositories are counted after a reopen (rebuilt from the sessions)', async () => {
        r = await store.fresh();
        const [fixtures] = fc.sample(statsSessions({ realistic: true, tenants: ['t1', 't2'], minLength: 40, maxLength: 40 }), { numRuns: 1, seed: 42 });
        const [first, rest] = [fixtures!.slice(0, 10), fixtures!.slice(10)];
        for (const f of first) await r.sessions.insert(rowOf(f, 'completed'));
        await store.writeAround(rest.map((f) => rowOf(f, 'completed')));
        const firstT1 = first.filter((f) => f.tenant === 't1').map((f) => f.id);
        expect((await r.sessions.statsGroups('t1')).reduce((n, g) => n + g.sessions, 0)).toBe(firstT1.length);
        expect(await r.sessions.completionsBetween('t1', 0, 100)).toEqual(firstT1);
        r = await store.reopen();
        // the completions logged keep their seq; the others follow in id order
        const t1 = fixtures!.filter((f) => f.tenant === 't1').map((f) => f.id);
        expect(await r.sessions.completionSeq('t1')).toBe(t1.length);
        expect(await r.sessions.completionsBetween('t1', 0, 100)).toEqual([...firstT1, ...t1.filter((id) => !firstT1.includes(id))]);
        expect((await r.sessions.statsGroups('t1')).reduce((n, g) => n + g.sessions, 0)).toBe(fixtures!.filter((f) => f.tenant === 't1').length);
        await expectSameAnswers(r);
        // the rebuilt aggregates go on counting completions
        const next: StatsFixture = {
          id: 'ses_999999', tenant: 't1', taskId: 'task-a', modelVersion: 'v1', env: 'alfworld', mode: 'train', memory: 'history_only',
          maxAttempts: 1, attempts: [summary(0, true)], updatedAt: T0 + 5,
        };
        await r.sessions.insert(rowOf(next, 'active'));
        await r.hot.commitStep(completing(next));
        await expectSameAnswers(r);
      });
    });

    describe('the step hot path', () => {
      beforeEach(async () => {
        r = await store.fresh();
        await r.sessions.insert(session('ses_h'));
      });

      it('records a step\'s rows, reflection and session update in one commit, and reads them back', async () => {
        expect(await r.hot.commitStep(commitAt('ses_h', 0, 0))).toEqual({ recorded: true, requestHash: 'hash 0.0', answer: stepRow('ses_h', 0, 0).answer });
        const end: StepCommit = {
          rows: [stepRow('ses_h', 0, 1, { done: true, action: null }), stepRow('ses_h', 0, 1, { kind: 'reflection', requestHash: 'hash 0.1', answer: null, output: 'I should look first' })],
          reflection: { sessionId: 'ses_h', attempt: 0, text: 'I should look first', updatedAt: T0 + 5 },
          session: { id: 'ses_h', status: 'active', attempts: [summary(0, false)], nextAttempt: 1, nextStep: 0, updatedAt: T0 + 5 },
        };
        expect((await r.hot.commitStep(end)).recorded).toBe(true);
        expect(await r.hot.session('ses_h')).toMatchObject({ nextAttempt: 1, nextStep: 0, attempts: [summary(0, false)], updatedAt: T0 + 5, status: 'active' });
        expect(await r.hot.stepAtPosition('ses_h', 0, 0)).toEqual({ requestHash: 'hash 0.0', answer: stepRow('ses_h', 0, 0).answer });
        expect(await r.hot.stepAtPosition('ses_h', 0, 5)).toBeUndefined();
        expect(await r.hot.stepsOfAttempt('ses_h', 0)).toEqual([{ observation: 'obs 0.0', action: 'act 0.0' }, { observation: 'obs 0.1', action: null }]);
        expect(await r.hot.reflections('ses_h')).toEqual([{ sessionId: 'ses_h', attempt: 0, text: 'I should look first', source: 'policy', updatedAt: T0 + 5 }]);
        expect(await r.sessions.editReflection('ses_h', 0, 'Look first.', T0 + 9)).toBe(1);
        expect(await r.sessions.editReflection('ses_h', 1, 'none here', T0 + 9)).toBe(0);
        expect(await r.hot.reflections('ses_h')).toEqual([{ sessionId: 'ses_h', attempt: 0, text: 'Look first.', source: 'human', updatedAt: T0 + 9 }]);
        // a step that completes the session writes its status
        const done = commitAt('ses_h', 1, 0, { done: true, success: true });
        done.session = { ...done.session, status: 'completed', nextAttempt: 2, nextStep: 0 };
        await r.hot.commitStep(done);
        expect(await r.hot.session('ses_h')).toMatchObject({ status: 'completed', nextAttempt: 2 });
      });

      it('exactly once: two concurrent commits of one position give one row and the same answer to both', async () => {
        const a = commitAt('ses_h', 0, 0, { answer: JSON.stringify({ from: 'replica a' }) });
        const b = commitAt('ses_h', 0, 0, { answer: JSON.stringify({ from: 'replica b' }) });
        b.session.updatedAt = T0 + 77;
        const results = await Promise.all([r.hot.commitStep(a), r.hot.commitStep(b)]);
        expect(results.map((x) => x.recorded).sort()).toEqual([false, true]);
        expect(results[1]!.answer).toBe(results[0]!.answer);
        expect(results[1]!.requestHash).toBe('hash 0.0');
        const stored = await r.hot.stepAtPosition('ses_h', 0, 0);
        expect(stored?.answer).toBe(results[0]!.answer);
        const rows = (await r.steps.page('ses_h', undefined, 10, 1e9)).rows;
        expect(rows).toHaveLength(1);
        // the loser wrote nothing: the session update is the winner's
        const winner = results[0]!.recorded ? a : b;
        expect((await r.hot.session('ses_h'))?.updatedAt).toBe(winner.session.updatedAt);
        // a retry later gets the same answer again
        expect(await r.hot.commitStep(commitAt('ses_h', 0, 0))).toEqual({ recorded: false, requestHash: 'hash 0.0', answer: results[0]!.answer });
      });

      it('many concurrent commits of one position: one row, one answer for all', async () => {
        const results = await Promise.all(
          Array.from({ length: 8 }, (_, i) => r.hot.commitStep(commitAt('ses_h', 0, 0, { answer: JSON.stringify({ i }) }))),
        );
        expect(results.filter((x) => x.recorded)).toHaveLength(1);
        expect(new Set(results.map((x) => x.answer)).size).toBe(1);
        expect((await r.steps.page('ses_h', undefined, 10, 1e9)).rows).toHaveLength(1);
      });

      it('concurrent commits of different sessions are all recorded', async () => {
        for (const id of ['ses_x', 'ses_y', 'ses_z']) await r.sessions.insert(session(id));
        const results = await Promise.all(['ses_h', 'ses_x', 'ses_y', 'ses_z'].map((id) => r.hot.commitStep(commitAt(id, 0, 0))));
        expect(results.every((x) => x.recorded)).toBe(true);
        for (const id of ['ses_h', 'ses_x', 'ses_y', 'ses_z']) expect((await r.hot.session(id))?.nextStep).toBe(1);
      });

      it('a commit for an unknown session is refused and writes nothing; a commit beside it is recorded', async () => {
        const [bad, good] = await Promise.allSettled([r.hot.commitStep(commitAt('ses_unknown', 0, 0)), r.hot.commitStep(commitAt('ses_h', 0, 0))]);
        expect(bad.status).toBe('rejected');
        expect(good).toEqual({ status: 'fulfilled', value: expect.objectContaining({ recorded: true }) });
        expect(await r.hot.stepAtPosition('ses_unknown', 0, 0)).toBeUndefined();
      });

      it('a commit for a session that is no longer active is refused and writes nothing', async () => {
        await r.sessions.abandon('ses_h', [], T0 + 1);
        await expect(r.hot.commitStep(commitAt('ses_h', 0, 0))).rejects.toBeInstanceOf(SessionNotActiveError);
        expect(await r.hot.stepAtPosition('ses_h', 0, 0)).toBeUndefined();
        expect(await r.hot.session('ses_h')).toMatchObject({ status: 'abandoned', nextStep: 0 });
      });

      it('a commit of a session changed since its expectedUpdatedAt is refused and writes nothing; a reflection edit moves updatedAt on', async () => {
        const withReflection: StepCommit = {
          ...commitAt('ses_h', 0, 0),
          reflection: { sessionId: 'ses_h', attempt: 0, text: 'policy text', updatedAt: T0 + 5 },
        };
        withReflection.session = { ...withReflection.session, updatedAt: T0 + 5, expectedUpdatedAt: T0 };
        expect((await r.hot.commitStep(withReflection)).recorded).toBe(true);
        const stale = commitAt('ses_h', 0, 1);
        stale.session.expectedUpdatedAt = T0;
        await expect(r.hot.commitStep(stale)).rejects.toBeInstanceOf(StaleSessionError);
        expect(await r.hot.stepAtPosition('ses_h', 0, 1)).toBeUndefined();
        // an edit at a time not after the last change still moves it on, by 1 ms
        expect(await r.sessions.editReflection('ses_h', 0, 'human text', T0 + 5)).toBe(1);
        expect(await r.sessions.editReflection('ses_h', 9, 'none', T0 + 50)).toBe(0);
        expect((await r.hot.session('ses_h'))!.updatedAt).toBe(T0 + 6);
        const before = commitAt('ses_h', 0, 1);
        before.session.expectedUpdatedAt = T0 + 5;
        await expect(r.hot.commitStep(before)).rejects.toBeInstanceOf(StaleSessionError);
        const after = commitAt('ses_h', 0, 1);
        after.session.expectedUpdatedAt = T0 + 6;
        expect((await r.hot.commitStep(after)).recorded).toBe(true);
        expect(await r.hot.reflections('ses_h')).toEqual([{ sessionId: 'ses_h', attempt: 0, text: 'human text', source: 'human', updatedAt: T0 + 5 }]);
      });

      it('free text with U+0000 and U+FFFF (a model sampling bytes writes them) reads back exactly, in rows, the export and the filters', async () => {
        const odd = 'a\u0000b\uFFFF0c\uFFFF1\u0000';
        await r.sessions.insert(session('ses_nul', { taskId: `task${odd}`, env: `env${odd}`, instructions: `Do ${odd}` }));
        const c = commitAt('ses_nul', 0, 0, { observation: `obs ${odd}`, prompt: `prompt ${odd}`, output: `out ${odd}`, action: `act ${odd}` });
        c.reflection = { sessionId: 'ses_nul', attempt: 0, text: `memory ${odd}`, updatedAt: T0 };
        expect((await r.hot.commitStep(c)).recorded).toBe(true);
        expect(await r.hot.session('ses_nul')).toMatchObject({ taskId: `task${odd}`, env: `env${odd}`, instructions: `Do ${odd}` });
        expect(await r.hot.stepsOfAttempt('ses_nul', 0)).toEqual([{ observation: `obs ${odd}`, action: `act ${odd}` }]);
        expect((await r.hot.reflections('ses_nul'))[0]!.text).toBe(`memory ${odd}`);
        const [row] = (await r.steps.page('ses_nul', undefined, 10, 1 << 20)).rows;
        expect(row).toMatchObject({ observation: `obs ${odd}`, prompt: `prompt ${odd}`, output: `out ${odd}`, action: `act ${odd}` });
        expect((await r.sessions.list('t1', { env: `env${odd}` }, 10)).map((x) => x.id)).toEqual(['ses_nul']);
        const lines = [];
        for await (const l of r.export.lines({ env: `env${odd}` })) lines.push(l);
        expect(lines).toHaveLength(1);
        expect(lines[0]).toMatchObject({ taskId: `task${odd}`, env: `env${odd}`, observation: `obs ${odd}`, output: `out ${odd}`, action: `act ${odd}` });
        // completed: its statistics group and trajectories keep the text too
        const done = commitAt('ses_nul', 0, 1, { done: true, success: true, action: null });
        done.session = { ...done.session, status: 'completed', attempts: [summary(0, true)] };
        expect((await r.hot.commitStep(done)).recorded).toBe(true);
        expect((await r.sessions.statsGroups('t1')).map((g) => g.env)).toEqual([`env${odd}`]);
        expect((await r.sessions.completed('t1', { env: `env${odd}`, taskId: `task${odd}` })).map((x) => x.id)).toEqual(['ses_nul']);
        const trajectories = await r.sessions.trajectoriesOf('t1', { env: `env${odd}` }, ['ses_nul']);
        expect(trajectories).toEqual([expect.objectContaining({ taskId: `task${odd}`, env: `env${odd}`, trajectory: `act ${odd}` })]);
      });

      it('a commit without rows is refused', async () => {
        await expect(r.hot.commitStep({ ...commitAt('ses_h', 0, 0), rows: [] })).rejects.toThrow(TypeError);
      });

      it('pages a trajectory in position order, within limit and bytes, always at least one row', async () => {
        for (let s = 0; s < 4; s++) await r.hot.commitStep(commitAt('ses_h', 0, s));
        const end: StepCommit = {
          rows: [stepRow('ses_h', 0, 4, { done: true }), stepRow('ses_h', 0, 4, { kind: 'reflection', requestHash: 'refl' })],
          reflection: null,
          session: { id: 'ses_h', status: 'active', attempts: [], nextAttempt: 1, nextStep: 0, updatedAt: T0 },
        };
        await r.hot.commitStep(end);
        await r.hot.commitStep(commitAt('ses_h', 1, 0));
        const pos = (p: { rows: Array<{ attempt: number; step: number; kind: string }> }) => p.rows.map((x) => `${x.attempt}.${x.step}.${x.kind[0]}`);
        const all = await r.steps.page('ses_h', undefined, 100, 1e9);
        expect(pos(all)).toEqual(['0.0.a', '0.1.a', '0.2.a', '0.3.a', '0.4.a', '0.4.r', '1.0.a']);
        expect(all.last).toBeNull();
        expect(all.rows[0]).toMatchObject({
          sessionId: 'ses_h', observation: 'obs 0.0', done: false, availableActions: ['go north', 'take key'], info: { room: 3 },
          promptTokenIds: [1, 2, 3], logprobs: [-0.125, -1.0000000000000002], answer: { action: 'act 0.0', attempt: 0, step: 0 }, return: null,
        });
        const first = await r.steps.page('ses_h', undefined, 3, 1e9);
        expect(pos(first)).toEqual(['0.0.a', '0.1.a', '0.2.a']);
        expect(first.last).toEqual({ attempt: 0, step: 2, kind: 'action' });
        const next = await r.steps.page('ses_h', { attempt: 0, step: 4, kind: 'action' }, 3, 1e9);
        expect(pos(next)).toEqual(['0.4.r', '1.0.a']);
        expect(next.last).toBeNull();
        // a byte budget below one row still gives one row; two rows' worth gives two
        const one = await r.steps.page('ses_h', undefined, 100, 1);
        expect(pos(one)).toEqual(['0.0.a']);
        expect(one.last).toEqual({ attempt: 0, step: 0, kind: 'action' });
        // each of these rows is 720 bytes as estimated: 600 + its text and JSON columns as sent (120)
        expect(pos(await r.steps.page('ses_h', undefined, 100, 2 * 720))).toEqual(['0.0.a', '0.1.a']);
        expect(pos(await r.steps.page('ses_h', undefined, 100, 2 * 720 - 1))).toEqual(['0.0.a']);
        expect(await r.steps.page('ses_none', undefined, 10, 1e9)).toEqual({ rows: [], last: null });
      });
    });

    describe('models', () => {
      beforeAll(async () => {
        r = await store.fresh();
      });

      it('register, read, list, activate one at a time, update in place', async () => {
        expect(await r.models.isEmpty()).toBe(true);
        expect(await r.models.active()).toBeUndefined();
        await r.models.insert({ version: 'base', parent: null, jobId: null, checkpointDir: '/c/base', status: 'active', metrics: {}, createdAt: T0 });
        await r.models.insert({ version: 'v2', parent: 'base', jobId: 'job_1', checkpointDir: '/c/v2', status: 'candidate', metrics: { loss: 0.5 }, createdAt: T0 + 1 });
        await r.models.insert({
          version: 'remote', parent: null, jobId: null, checkpointDir: '', engine: 'openai', engineConfig: { baseUrl: 'http://x' }, status: 'candidate', metrics: {}, createdAt: T0 + 1,
        });
        expect(await r.models.isEmpty()).toBe(false);
        expect(await r.models.get('v2')).toEqual({
          version: 'v2', parent: 'base', jobId: 'job_1', checkpointDir: '/c/v2', engine: 'builtin', engineConfig: null, status: 'candidate', metrics: { loss: 0.5 }, createdAt: T0 + 1,
        });
        expect(await r.models.get('nope')).toBeUndefined();
        expect((await r.models.list()).map((m) => m.version)).toEqual(['base', 'remote', 'v2']);
        expect(await r.models.remoteVersions()).toEqual(['remote']);
        await Promise.all([r.models.activate('v2'), r.models.activate('remote')]);
        const active = (await r.models.list()).filter((m) => m.status === 'active');
        expect(active).toHaveLength(1);
        expect((await r.models.get('base'))?.status).toBe('retired');
        await r.models.activate('v2');
        expect((await r.models.active())?.version).toBe('v2');
        await r.models.setCheckpointDir('v2', '/c/v2-moved');
        await r.models.setEngineConfig('remote', { baseUrl: 'http://y' });
        expect((await r.models.get('v2'))?.checkpointDir).toBe('/c/v2-moved');
        expect((await r.models.get('remote'))?.engineConfig).toEqual({ baseUrl: 'http://y' });
        await expect(r.models.insert({ version: 'v2', checkpointDir: '', status: 'candidate', metrics: {}, createdAt: 0 })).rejects.toThrow();
      });
    });

    describe('training jobs', () => {
      beforeAll(async () => {
        r = await store.fresh();
      });

      it('insert, list with filters and cursor, counts, running, update, fail running, queue', async () => {
        const job = (id: string, status: 'queued' | 'running' | 'succeeded', createdAt: number, algorithm: 'lamer' | 'grpo' = 'lamer') =>
          r.jobs.insert({ id, algorithm, status, config: { lr: 0.001 }, metrics: [], createdAt });
        await job('job_a', 'succeeded', T0);
        await job('job_b', 'running', T0 + 1, 'grpo');
        await job('job_c', 'queued', T0 + 2);
        await job('job_d', 'queued', T0 + 2);
        expect(await r.jobs.get('job_a')).toEqual({
          id: 'job_a', algorithm: 'lamer', status: 'succeeded', config: { lr: 0.001 }, progress: 0, metrics: [],
          resultVersion: null, error: null, createdAt: T0, startedAt: null, finishedAt: null, cancelRequestedAt: null,
        });
        expect(await r.jobs.get('job_none')).toBeUndefined();
        expect((await r.jobs.list({ limit: 10 })).map((j) => j.id)).toEqual(['job_d', 'job_c', 'job_b', 'job_a']);
        expect((await r.jobs.list({ limit: 1, cursor: `${T0 + 2}~job_d` })).map((j) => j.id)).toEqual(['job_c', 'job_b']);
        expect((await r.jobs.list({ limit: 10, status: 'queued' })).map((j) => j.id)).toEqual(['job_d', 'job_c']);
        expect((await r.jobs.list({ limit: 10, algorithm: 'grpo' })).map((j) => j.id)).toEqual(['job_b']);
        expect(await r.jobs.countsByStatus()).toEqual({ succeeded: 1, running: 1, queued: 2 });
        expect(await r.jobs.running()).toEqual([{ id: 'job_b', algorithm: 'grpo', progress: 0 }]);
        expect((await r.jobs.recent(2)).map((j) => j.id).sort()).toEqual(['job_c', 'job_d']);
        await r.jobs.update('job_b', { progress: 0.25, metrics: [{ it: 1 }], startedAt: T0 + 3 });
        expect(await r.jobs.get('job_b')).toMatchObject({ progress: 0.25, metrics: [{ it: 1 }], startedAt: T0 + 3 });
        await r.jobs.failRunning('server restarted', T0 + 4);
        expect(await r.jobs.get('job_b')).toMatchObject({ status: 'failed', error: 'server restarted', finishedAt: T0 + 4 });
        expect(await r.jobs.running()).toEqual([]);
        // oldest first, then by id
        expect(await r.jobs.queuedIds()).toEqual(['job_c', 'job_d']);
      });

      it('claims a queued job once, cancels only queued ones, records a cancel request of a running one', async () => {
        const results = await Promise.all([r.jobs.claim('job_c', T0 + 5), r.jobs.claim('job_c', T0 + 6)]);
        expect(results.sort()).toEqual([false, true]);
        expect(await r.jobs.get('job_c')).toMatchObject({ status: 'running' });
        expect(await r.jobs.cancelQueued('job_c', T0 + 7)).toBe(false);
        expect(await r.jobs.requestCancel('job_c', T0 + 7)).toBe(true);
        expect(await r.jobs.get('job_c')).toMatchObject({ status: 'running', cancelRequestedAt: T0 + 7 });
        expect(await r.jobs.requestCancel('job_d', T0 + 8)).toBe(false);
        expect(await r.jobs.cancelQueued('job_d', T0 + 8)).toBe(true);
        expect(await r.jobs.get('job_d')).toMatchObject({ status: 'cancelled', finishedAt: T0 + 8, cancelRequestedAt: null });
        expect(await r.jobs.claim('job_d', T0 + 9)).toBe(false);
        expect(await r.jobs.queuedIds()).toEqual([]);
      });
    });

    describe('replays', () => {
      beforeAll(async () => {
        r = await store.fresh();
        await completedSession(r, 'ses_1', [['a', 'b'], ['c']]);
        await completedSession(r, 'ses_2', [['x']], { taskId: 'task-b', env: 'webshop', createdAt: T0 + 10, modelVersion: 'v2' });
        await r.sessions.insert(session('ses_3', { tenant: 't2' }));
      });

      const report = (id: string, over: Record<string, unknown> = {}) => ({
        id, tenant: 't1', modelVersion: 'v2', decoding: 'greedy' as const, request: { sessionId: 'ses_1', maxSteps: 10, logprobs: true },
        summary: { calls: 2, agreement: 0.5 }, sessions: [{ id: 'ses_1', calls: 2 }], steps: [{ attempt: 0, step: 0, action: 'a' }], createdAt: T0, ...over,
      });

      it('stores reports and lists them newest id first, per tenant, without their steps', async () => {
        await r.replays.insert(report('rpl_1'));
        await r.replays.insert(report('rpl_2', { modelVersion: 'v3' }));
        await r.replays.insert(report('rpl_3', { tenant: 't2' }));
        expect(await r.replays.get('t1', 'rpl_1')).toEqual(report('rpl_1'));
        expect(await r.replays.get('t2', 'rpl_1')).toBeUndefined();
        expect(await r.replays.has('t1', 'rpl_2')).toBe(true);
        expect(await r.replays.has('t1', 'rpl_3')).toBe(false);
        const listed = await r.replays.list('t1', {}, 1);
        expect(listed.map((x) => x.id)).toEqual(['rpl_2', 'rpl_1']);
        expect(listed[0]).not.toHaveProperty('steps');
        expect((await r.replays.list('t1', { modelVersion: 'v2' }, 10)).map((x) => x.id)).toEqual(['rpl_1']);
        expect((await r.replays.list('t1', {}, 10, 'rpl_2')).map((x) => x.id)).toEqual(['rpl_1']);
      });

      it('reads the recorded sessions a replay needs', async () => {
        const ids = async (f: Parameters<AsyncRepositories['replays']['sessions']>[1], limit = 10) => (await r.replays.sessions('t1', f, limit)).map((x) => x.id);
        expect(await ids({})).toEqual(['ses_2', 'ses_1']);
        expect(await ids({}, 1)).toEqual(['ses_2']);
        expect(await ids({ env: 'webshop', modelVersion: 'v2', taskId: 'task-b', mode: 'train', status: 'completed' })).toEqual(['ses_2']);
        expect(await ids({ since: T0 + 5 })).toEqual(['ses_2']);
        expect(await ids({ until: T0 + 5 })).toEqual(['ses_1']);
        expect(await r.replays.modelCalls(['ses_1', 'ses_2', 'ses_3'])).toEqual(new Map([['ses_1', 4], ['ses_2', 2]]));
        expect(await r.replays.modelCalls([])).toEqual(new Map());
        const rows = await r.replays.actionRows('ses_1');
        expect(rows.map((x) => `${x.attempt}.${x.step}:${x.action}`)).toEqual(['0.0:a', '0.1:b', '1.0:c', '1.1:null']);
        expect(rows[0]).toEqual({
          attempt: 0, step: 0, kind: 'action', observation: 'obs 0.0', done: false, success: false, availableActions: ['go north', 'take key'],
          output: 'out 0.0', action: 'a', promptTokenIds: [1, 2, 3], outputTokenIds: [4, 5], logprobs: [-0.125, -1.0000000000000002],
          engineRecord: null, turn: null, modelVersion: 'v1',
        });
        expect(await r.replays.reflections('ses_1')).toEqual(new Map());
      });
    });

    describe('training data and the export', () => {
      beforeAll(async () => {
        r = await store.fresh();
        await completedSession(r, 'ses_1', [['a', 'b'], ['c']]);
        await completedSession(r, 'ses_2', [['x']], { taskId: 'task-b', env: 'webshop', createdAt: T0 + 10, modelVersion: 'v2' });
        await completedSession(r, 'ses_3', [['y']], { mode: 'eval' });
        await r.sessions.insert(session('ses_4'));
        await r.hot.commitStep(commitAt('ses_4', 0, 0));
      });

      it('reads the completed training sessions with filters and counts them', async () => {
        const ids = async (f: Parameters<AsyncRepositories['trainingData']['completedTrainSessions']>[0]) =>
          (await r.trainingData.completedTrainSessions(f)).map((s) => s.id).sort();
        expect(await ids({})).toEqual(['ses_1', 'ses_2']);
        expect(await ids({ since: T0 + 5 })).toEqual(['ses_2']);
        expect(await ids({ env: 'webshop' })).toEqual(['ses_2']);
        expect(await ids({ taskIds: ['task-a'] })).toEqual(['ses_1']);
        expect(await ids({ taskIds: [] })).toEqual([]);
        expect(await ids({ modelVersion: 'v2' })).toEqual(['ses_2']);
        const [one] = await r.trainingData.completedTrainSessions({ modelVersion: 'v2' });
        expect(one).toEqual({ id: 'ses_2', taskId: 'task-b', createdAt: T0 + 10, sampling: session('x').sampling });
        expect(await r.trainingData.countCompletedTrainSessions(T0)).toBe(2);
        expect(await r.trainingData.countCompletedTrainSessions(T0 + 1)).toBe(1);
      });

      it('reads step outputs and rows, and writes scores in one go', async () => {
        const outputs = await r.trainingData.stepOutputs(['ses_1', 'ses_none']);
        expect(outputs).toHaveLength(4);
        expect(outputs.find((o) => o.attempt === 1 && o.step === 0)).toEqual({ sessionId: 'ses_1', attempt: 1, step: 0, kind: 'action', output: 'out 1.0', engineRecord: null, turn: null });
        const rows = await r.trainingData.stepRowsOf(['ses_2', 'ses_1']);
        expect(rows.map((x) => `${x.sessionId}:${x.attempt}.${x.step}`)).toEqual(['ses_1:0.0', 'ses_1:0.1', 'ses_1:1.0', 'ses_1:1.1', 'ses_2:0.0', 'ses_2:0.1']);
        const many = Array.from({ length: 600 }, (_, i) => `ses_none_${i}`);
        expect(await r.trainingData.stepRowsOf([...many, 'ses_2'])).toHaveLength(2);
        await r.trainingData.writeStepScores([
          { sessionId: 'ses_1', attempt: 0, step: 1, kind: 'action', return: 0.9, advantage: -0.25 },
          { sessionId: 'ses_2', attempt: 0, step: 0, kind: 'action', return: 1, advantage: 0.5 },
        ]);
        const scored = (await r.trainingData.stepRowsOf(['ses_1', 'ses_2'])).filter((x) => x.return !== null);
        expect(scored.map((x) => [x.sessionId, x.attempt, x.step, x.return, x.advantage])).toEqual([
          ['ses_1', 0, 1, 0.9, -0.25],
          ['ses_2', 0, 0, 1, 0.5],
        ]);
      });

      it('exports lines in position order, chunk by chunk, with filters', async () => {
        const lines = async (f: Parameters<AsyncRepositories['export']['lines']>[0], chunk?: number) => {
          const out = [];
          for await (const l of r.export.lines(f, chunk)) out.push(l);
          return out;
        };
        const all = await lines({}, 2);
        expect(all.map((l) => `${l.sessionId}:${l.attempt}.${l.step}`)).toEqual([
          'ses_1:0.0', 'ses_1:0.1', 'ses_1:1.0', 'ses_1:1.1', 'ses_2:0.0', 'ses_2:0.1', 'ses_3:0.0', 'ses_3:0.1', 'ses_4:0.0',
        ]);
        expect(await lines({})).toEqual(all);
        expect(all[0]).toEqual({
          schemaVersion: 1, sessionId: 'ses_1', tenant: 't1', taskId: 'task-a', env: 'alfworld', mode: 'train', sessionStatus: 'completed',
          attempt: 0, step: 0, kind: 'action', modelVersion: 'v1', observation: 'obs 0.0', availableActions: ['go north', 'take key'],
          prompt: 'prompt 0.0', output: 'out 0.0', action: 'a', promptTokenIds: [1, 2, 3], outputTokenIds: [4, 5],
          logprobs: [-0.125, -1.0000000000000002], droppedSteps: 0, promptTruncatedChars: 0, reward: 0, done: false, success: false,
          invalidAction: false, return: null, advantage: null, createdAt: new Date(T0).toISOString(), engine: null, turn: null,
        });
        expect(all.at(-1)?.sessionStatus).toBe('active');
        expect((await lines({ completedOnly: true, mode: 'train' }, 3)).map((l) => l.sessionId)).toEqual(['ses_1', 'ses_1', 'ses_1', 'ses_1', 'ses_2', 'ses_2']);
        expect((await lines({ env: 'webshop' })).length).toBe(2);
        expect((await lines({ since: T0 + 5 })).length).toBe(2);
        expect((await lines({ modelVersion: 'v2' })).length).toBe(2);
        expect((await lines({ tenant: 'nobody' })).length).toBe(0);
      });
    });
  });
}
