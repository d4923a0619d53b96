/**
 * `GET /v1/stats` over real HTTP (src/agent/session-stats.ts): success rate and mean return by
 * attempt count the sessions that played the attempt, and are null (not 0) for an attempt that no
 * session played, overall and per group. The answers come from the aggregates kept on write and
 * equal the full computation over the database's completed sessions, per tenant, filter (a task
 * filter too) and chain length, with sessions completing out of creation order, also on a database
 * from before the aggregates (rebuilt at start). Bad filters are refused with 400 and change nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../../helpers/index.js';
import { runEval } from '../../../../src/eval/harness.js';
import { openDatabase } from '../../../../src/db/index.js';
import { createRepositories } from '../../../../src/db/repositories.js';
import { sessionStats } from '../../../../src/agent/session-stats.js';
import type { SessionFilters } from '../../../../src/db/sessions-repo.js';
import { tmpDir } from '../../../helpers/index.js';
import { databaseBeforeAggregates, finishTwice, fixtureRow, matching, statsSessions } from '../../../helpers/stats-sessions.js';
import fc from 'fast-check';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s.close();
});

/**
 * Plays one session of `maxAttempts` attempts, one action then `done` each, with the given
 * returns; the attempt at index `solvedAt` succeeds (the session then ends), or none when -1.
 */
async function play(env: string, maxAttempts: number, returns: number[], solvedAt: number, extra: Record<string, unknown> = {}): Promise<void> {
  const c = await s.call('POST', '/v1/sessions', { taskId: `${env}-task`, env, instructions: 'x', maxAttempts, maxSteps: 5, ...extra });
  expect(c.status).toBe(201);
  const id = c.body.id as string;
  for (const [a, ret] of returns.entries()) {
    expect((await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: a, step: 0, observation: 'o', availableActions: ['go'] })).status).toBe(200);
    const end = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: a, step: 1, observation: 'end', reward: ret, done: true, success: a === solvedAt });
    expect(end.status).toBe(200);
  }
  expect((await s.call('GET', `/v1/sessions/${id}`)).body.status).toBe('completed');
}

describe('GET /v1/stats by attempt', () => {
  it('gives null success rate and mean return for attempts no session played; the played ones are averaged', async () => {
    // env a: one session solved at attempt 0 (attempts 1 and 2 never played), one solved at attempt 1
    await play('a', 3, [1], 0);
    await play('a', 3, [-1, 2], 1);
    // env b: maxAttempts 1, failed
    await play('b', 1, [-3], -1);
    const a = await s.call('GET', '/v1/stats?env=a');
    expect(a.status).toBe(200);
    expect(a.body).toMatchObject({
      sessions: 2,
      passAtK: { '1': 0.5, '2': 1, '3': 1 },
      successByAttempt: [0.5, 1, null],
      meanReturnByAttempt: [0, 2, null],
      attemptsPlayed: [2, 1, 0],
    });
    const all = await s.call('GET', '/v1/stats');
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ sessions: 3, successByAttempt: [1 / 3, 1, null], meanReturnByAttempt: [-1, 2, null], attemptsPlayed: [3, 1, 0] });
    expect(all.body.groups).toEqual([
      { modelVersion: 'test', env: 'a', mode: 'train', memory: 'reflection_only', sessions: 2, runs: 2, passAtK: { '1': 0.5, '2': 1, '3': 1 }, successByAttempt: [0.5, 1, null], meanReturnByAttempt: [0, 2, null], attemptsPlayed: [2, 1, 0] },
      { modelVersion: 'test', env: 'b', mode: 'train', memory: 'none', sessions: 1, runs: 1, passAtK: { '1': 0, '2': 0, '3': 0 }, successByAttempt: [0, null, null], meanReturnByAttempt: [-3, null, null], attemptsPlayed: [1, 0, 0] },
    ]);
  });
});

describe('GET /v1/stats by memory', () => {
  it('keeps memory modes and independent single-attempt sessions in separate groups, side by side', async () => {
    // env m, eval mode: two LaMer sessions (reflection_only), one history_only session, and
    // independent retries of the same task played as single-attempt sessions: F F S, then S, then F
    const ev = { mode: 'eval' };
    await play('m', 3, [0, 1], 1, { ...ev, memory: 'reflection_only' });
    await play('m', 3, [0, 0, 0], -1, { ...ev, memory: 'reflection_only' });
    await play('m', 3, [1], 0, { ...ev, memory: 'history_only' });
    for (const [ret, ok] of [[0, false], [0, false], [1, true], [1, true], [0, false]] as const) await play('m', 1, [ret], ok ? 0 : -1, ev);
    const r = await s.call('GET', '/v1/stats?env=m');
    expect(r.status).toBe(200);
    expect(r.body.sessions).toBe(8);
    expect(r.body.groups).toEqual([
      // chains of up to 3 retries: [F F S], [S], [F] (cut short by the end of the data: its missing retries count as failed)
      { modelVersion: 'test', env: 'm', mode: 'eval', memory: 'none', sessions: 5, runs: 3, passAtK: { '1': 1 / 3, '2': 1 / 3, '3': 2 / 3 }, successByAttempt: [1 / 3, 0, 1], meanReturnByAttempt: [1 / 3, 0, 1], attemptsPlayed: [3, 1, 1] },
      { modelVersion: 'test', env: 'm', mode: 'eval', memory: 'reflection_only', sessions: 2, runs: 2, passAtK: { '1': 0, '2': 0.5, '3': 0.5 }, successByAttempt: [0, 0.5, 0], meanReturnByAttempt: [0, 0.5, 0], attemptsPlayed: [2, 2, 1] },
      { modelVersion: 'test', env: 'm', mode: 'eval', memory: 'history_only', sessions: 1, runs: 1, passAtK: { '1': 1, '2': 1, '3': 1 }, successByAttempt: [1, null, null], meanReturnByAttempt: [1, null, null], attemptsPlayed: [1, 0, 0] },
    ]);

    // the memory filter picks one of them; retries sets the chain length of the 'none' group
    const lamer = await s.call('GET', '/v1/stats?env=m&memory=reflection_only');
    expect(lamer.status).toBe(200);
    expect(lamer.body).toMatchObject({ sessions: 2, passAtK: { '1': 0, '2': 0.5, '3': 0.5 } });
    expect(lamer.body.groups.map((g: { memory: string }) => g.memory)).toEqual(['reflection_only']);
    const none = await s.call('GET', '/v1/stats?env=m&memory=none&retries=2');
    expect(none.status).toBe(200);
    expect(none.body.sessions).toBe(5);
    // chains of up to 2: [F F], [S], [S], [F]
    expect(none.body.groups).toEqual([
      { modelVersion: 'test', env: 'm', mode: 'eval', memory: 'none', sessions: 5, runs: 4, passAtK: { '1': 0.5, '2': 0.5 }, successByAttempt: [0.5, 0], meanReturnByAttempt: [0.5, 0], attemptsPlayed: [4, 1] },
    ]);
  });

  it("gives each lamer eval run's own pass@k when a LaMer run and an independent-retries run share version and env", async () => {
    // a small board, legal actions offered: the test engine solves some tasks at some attempts
    const opts = { env: 'minesweeper', params: { rows: 3, cols: 3, mines: 1 }, tasks: 12, attempts: 3, concurrency: 3, seed: 11, policy: 'model', server: s.url, availableActions: true } as const;
    const lamer = await runEval(opts);
    const independent = await runEval({ ...opts, independentAttempts: true });
    const r = await s.call('GET', '/v1/stats?env=minesweeper');
    expect(r.status).toBe(200);
    const byMemory = Object.fromEntries(r.body.groups.map((g: { memory: string }) => [g.memory, g]));
    expect(Object.keys(byMemory)).toEqual(['none', 'reflection_only']);
    expect(byMemory.reflection_only.passAtK).toEqual(lamer.metrics.passAtK);
    expect(byMemory.none.passAtK).toEqual(independent.metrics.passAtK);
    expect(byMemory.none.runs).toBe(12);
  });

  it('refuses a bad memory or retries with 400 problem+json', async () => {
    for (const q of ['memory=lots', 'memory=', 'retries=0', 'retries=101', 'retries=1.5']) {
      const r = await s.call('GET', `/v1/stats?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.body.type).toBe('https://lamer-server.dev/problems/validation');
    }
  });
});

describe('GET /v1/stats from the aggregates', () => {
  let t: TestServer;
  const ACME = { authorization: 'Bearer k1' };
  const OTHER = { authorization: 'Bearer k2' };
  beforeAll(async () => {
    t = await startTestServer({ apiKeys: [{ key: 'k1', tenant: 'acme', admin: false }, { key: 'k2', tenant: 'other', admin: false }] });
  });
  afterAll(async () => {
    await t.close();
  });

  /** Creates a session and plays its first step; returns a function that ends its attempts with the given outcomes. */
  async function open(headers: Record<string, string>, body: Record<string, unknown>) {
    const c = await t.call('POST', '/v1/sessions', { instructions: 'x', maxSteps: 5, ...body }, headers);
    expect(c.status).toBe(201);
    const id = c.body.id as string;
    return async (outcomes: Array<[number, boolean]>) => {
      for (const [a, [ret, ok]] of outcomes.entries()) {
        expect((await t.call('POST', `/v1/sessions/${id}/steps`, { attempt: a, step: 0, observation: 'o', availableActions: ['go'] }, headers)).status).toBe(200);
        const end = await t.call('POST', `/v1/sessions/${id}/steps`, { attempt: a, step: 1, observation: 'e', reward: ret, done: true, success: ok }, headers);
        expect(end.status).toBe(200);
      }
    };
  }

  it('equal the full computation per tenant, filter and chain length, sessions completing out of creation order', async () => {
    // single-attempt retries of two tasks, created in one order and completed in another
    const F: [number, boolean] = [0.1, false];
    const S: [number, boolean] = [1, true];
    const retries = [];
    for (const [task, outcome] of [['r1', F], ['r1', F], ['r2', S], ['r1', S], ['r1', F], ['r2', F], ['r1', F]] as const) {
      retries.push({ finish: await open(ACME, { taskId: task, env: 'e', maxAttempts: 1, mode: 'eval' }), outcome });
    }
    for (const i of [3, 0, 6, 1, 5, 2, 4]) await retries[i]!.finish([retries[i]!.outcome]);
    // multi-attempt sessions of both tenants
    await (await open(ACME, { taskId: 'r1', env: 'e', maxAttempts: 3 }))([F, F, S]);
    await (await open(ACME, { taskId: 'm1', env: 'f', maxAttempts: 2, memory: 'history_only' }))([[0.3, false], [0.7, false]]);
    await (await open(OTHER, { taskId: 'r1', env: 'e', maxAttempts: 1, mode: 'eval' }))([S]);
    // an active session counts nowhere
    await open(ACME, { taskId: 'r1', env: 'e', maxAttempts: 1, mode: 'eval' });

    const conn = openDatabase(t.dataDir);
    try {
      const repos = createRepositories(conn);
      const queries: Array<[string, Record<string, string>]> = [
        ['acme', {}], ['acme', { memory: 'none' }], ['acme', { env: 'e', mode: 'eval' }], ['acme', { memory: 'history_only' }],
        ['acme', { taskId: 'r1' }], ['acme', { taskId: 'r1', memory: 'none' }], ['acme', { modelVersion: 'nope' }], ['other', {}],
      ];
      for (const [tenant, f] of queries) {
        for (const n of [1, 2, 3]) {
          const r = await t.call('GET', `/v1/stats?${new URLSearchParams({ ...f, retries: String(n) })}`, undefined, tenant === 'acme' ? ACME : OTHER);
          expect(r.status).toBe(200);
          expect(r.body, `${tenant} ${JSON.stringify(f)} retries=${n}`).toEqual(sessionStats(repos.sessions.completed(tenant, f), n));
        }
      }
      const all = await t.call('GET', '/v1/stats', undefined, ACME);
      expect(all.body.sessions).toBe(9);
      // r1's retries in creation order: F F S F F -> chains of 3: [F F S], [F F]; r2: S F -> [S], [F]
      expect(all.body.groups[0]).toMatchObject({ memory: 'none', sessions: 7, runs: 4, attemptsPlayed: [4, 2, 1] });
      expect((await t.call('GET', '/v1/stats', undefined, OTHER)).body).toMatchObject({ sessions: 1, passAtK: { '1': 1 } });
    } finally {
      conn.close();
    }
  });
});

describe('GET /v1/stats on a database from before the aggregates', () => {
  it('answers from the aggregates rebuilt at start, as the full computation, and goes on counting completions', async () => {
    const [fixtures] = fc.sample(statsSessions({ realistic: true, tenants: ['default', 'other'], minLength: 80, maxLength: 80 }), { numRuns: 1, seed: 5 });
    const dataDir = tmpDir('lamer-stats-old-');
    databaseBeforeAggregates(dataDir, fixtures!.map((f) => fixtureRow(f))).close();
    const old = await startTestServer({ dataDir });
    try {
      const filters: Array<Record<string, string>> = [{}, { memory: 'none' }, { modelVersion: 'v1', mode: 'eval' }, { env: 'webshop', memory: 'history_only' }];
      for (const f of filters) {
        for (const retries of [1, 3]) {
          const r = await old.call('GET', `/v1/stats?${new URLSearchParams({ ...f, retries: String(retries) })}`);
          expect(r.status).toBe(200);
          expect(r.body, JSON.stringify(f)).toEqual(sessionStats(matching(fixtures!, 'default', f as Omit<SessionFilters, 'status'>), retries));
        }
      }
      // a session completed by this server joins the rebuilt group of its kind
      const c = await old.call('POST', '/v1/sessions', { taskId: 'task-a', env: 'alfworld', instructions: 'x', maxAttempts: 1, maxSteps: 5 });
      expect(c.status).toBe(201);
      await old.call('POST', `/v1/sessions/${c.body.id}/steps`, { attempt: 0, step: 0, observation: 'o', availableActions: ['go'] });
      const end = await old.call('POST', `/v1/sessions/${c.body.id}/steps`, { attempt: 0, step: 1, observation: 'e', reward: 1, done: true, success: true });
      expect(end.body.session.status).toBe('completed');
      const conn = openDatabase(dataDir);
      try {
        const full = sessionStats(createRepositories(conn).sessions.completed('default', {}), 3);
        const r = await old.call('GET', '/v1/stats');
        expect(r.body).toEqual(full);
        expect(r.body.sessions).toBe(fixtures!.filter((f) => f.tenant === 'default').length + 1);
      } finally {
        conn.close();
      }
    } finally {
      await old.close();
    }
  });
});

describe('GET /v1/stats with steps posted twice', () => {
  it('counts a session once when its final step is posted twice at once and retried after; the diversity scans it once', async () => {
    const t = await startTestServer();
    try {
      const ids = await finishTwice(t, t, 'twice-task', 8);
      const r = await t.call('GET', '/v1/stats?env=twice');
      expect(r.status).toBe(200);
      expect(r.body.sessions).toBe(ids.length);
      const conn = openDatabase(t.dataDir);
      try {
        const repos = createRepositories(conn);
        for (const retries of [1, 3]) {
          const got = await t.call('GET', `/v1/stats?env=twice&retries=${retries}`);
          expect(got.body).toEqual(sessionStats(repos.sessions.completed('default', { env: 'twice' }), retries));
        }
        expect(repos.sessions.completionSeq('default')).toBe(ids.length);
        expect([...repos.sessions.completionsBetween('default', 0, 100)].sort()).toEqual([...ids].sort());
      } finally {
        conn.close();
      }
      expect((await t.call('GET', '/v1/stats/diversity?env=twice')).body.scanned).toBe(ids.length);
    } finally {
      await t.close();
    }
  });
});

describe('GET /v1/stats refuses bad filters', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ apiKeys: [{ key: 'k1', tenant: 'acme', admin: false }] });
  });
  afterAll(async () => {
    await t.close();
  });

  it('with 400 problem+json naming the field, and changes nothing', async () => {
    const A = { authorization: 'Bearer k1' };
    const c = await t.call('POST', '/v1/sessions', { taskId: 'k', env: 'e', instructions: 'x', maxAttempts: 1, maxSteps: 5 }, A);
    await t.call('POST', `/v1/sessions/${c.body.id}/steps`, { attempt: 0, step: 0, observation: 'o', availableActions: ['go'] }, A);
    await t.call('POST', `/v1/sessions/${c.body.id}/steps`, { attempt: 0, step: 1, observation: 'e', reward: 1, done: true, success: true }, A);
    const before = await t.call('GET', '/v1/stats', undefined, A);
    expect(before.body.sessions).toBe(1);
    const bad: Array<[string, string]> = [
      ['mode=play', 'mode'],
      ['memory=all', 'memory'],
      ['retries=abc', 'retries'],
      ['retries=-1', 'retries'],
      [`env=${'e'.repeat(257)}`, 'env'],
      [`modelVersion=${'v'.repeat(257)}`, 'modelVersion'],
      [`taskId=${'k'.repeat(1025)}`, 'taskId'],
      ['groupBy=env', 'groupBy'],
    ];
    for (const [q, field] of bad) {
      const r = await t.call('GET', `/v1/stats?${q}`, undefined, A);
      expect(r.status, q).toBe(400);
      expect(r.headers.get('content-type'), q).toMatch(/application\/problem\+json/);
      expect(r.body.type, q).toBe('https://lamer-server.dev/problems/validation');
      expect(JSON.stringify(r.body), q).toContain(field);
    }
    const unauthenticated = await t.call('GET', '/v1/stats');
    expect(unauthenticated.status).toBe(401);
    expect((await t.call('GET', '/v1/stats', undefined, { authorization: 'Bearer nope' })).status).toBe(401);
    expect(await t.call('GET', '/v1/stats', undefined, A)).toMatchObject({ status: 200, body: before.body });
  });
});
