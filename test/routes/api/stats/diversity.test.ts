/**
 * `GET /v1/stats/diversity` (src/agent/diversity.ts, src/db/trajectories.ts): the entropy of each task's distinct action
 * sequences, mean over tasks, per version and env; equal to `lamer eval`'s trajectory diversity
 * for the same played sessions; only completed sessions of the key's tenant count. Answers kept
 * between calls (src/agent/diversity-cache.ts) equal a full read of the window after sessions
 * complete out of creation order, for several filters and window sizes, also on a database from
 * before the statistics aggregates (its completions numbered at start). Bad parameters: 400.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, tmpDir, type TestServer } from '../../../helpers/index.js';
import { diversityByVersion } from '../../../../src/agent/diversity.js';
import { openDatabase } from '../../../../src/db/index.js';
import { createRepositories } from '../../../../src/db/repositories.js';
import type { SessionFilters } from '../../../../src/db/sessions-repo.js';
import { databaseBeforeAggregates, fixtureRow, shuffled, statsSessions } from '../../../helpers/stats-sessions.js';
import { runEval } from '../../../../src/eval/harness.js';
import { trajectoryDiversity } from '../../../../src/eval/metrics.js';

let s: TestServer;
const ADMIN = { authorization: 'Bearer k1' };
const OTHER = { authorization: 'Bearer k2' };
beforeAll(async () => {
  s = await startTestServer({ apiKeys: [{ key: 'k1', tenant: 'acme', admin: true }, { key: 'k2', tenant: 'other', admin: false }] });
});
afterAll(async () => {
  await s.close();
});

/**
 * Plays one session whose attempts take exactly the given actions (one legal action per step, so
 * the engine has no choice); the last attempt succeeds when `solved`.
 */
async function play(taskId: string, env: string, attempts: string[][], solved: boolean, headers = ADMIN, extra: Record<string, unknown> = {}): Promise<string> {
  // a solved session ends at its success, so it may allow one more attempt: it stays multi-attempt
  // (memory 'reflection_only', one group) unless `extra` says otherwise
  const maxAttempts = solved ? Math.max(2, attempts.length) : attempts.length;
  const c = await s.call('POST', '/v1/sessions', { taskId, env, instructions: 'x', maxAttempts, maxSteps: 10, ...extra }, headers);
  expect(c.status).toBe(201);
  const id = c.body.id as string;
  for (const [a, actions] of attempts.entries()) {
    for (const [i, action] of actions.entries()) {
      const r = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: a, step: i, observation: `o${i}`, reward: 0, availableActions: [action] }, headers);
      expect(r.status).toBe(200);
      expect(r.body.action).toBe(action);
    }
    const last = a === attempts.length - 1;
    const r = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: a, step: actions.length, observation: 'end', reward: 1, done: true, success: last && solved }, headers);
    expect(r.status).toBe(200);
  }
  return id;
}

describe('GET /v1/stats/diversity', () => {
  it('is the entropy of the distinct trajectories per task, mean over tasks', async () => {
    // task T: trajectories "a b", "a b", "c" -> H = ln 3 - (2/3) ln 2; task U: "a", "c" -> ln 2.
    await play('T', 'e1', [['a', 'b'], ['a', 'b']], false);
    await play('T', 'e1', [['c']], true);
    await play('U', 'e1', [['a'], ['c']], true);
    // not counted: another env, another tenant, an active session
    await play('T', 'e2', [['z']], true);
    await play('T', 'e1', [['q'], ['r']], false, OTHER);
    const c = await s.call('POST', '/v1/sessions', { taskId: 'T', env: 'e1', instructions: 'x' }, ADMIN);
    await s.call('POST', `/v1/sessions/${c.body.id}/steps`, { attempt: 0, step: 0, observation: 'o', availableActions: ['w'] }, ADMIN);

    const r = await s.call('GET', '/v1/stats/diversity?env=e1', undefined, ADMIN);
    expect(r.status).toBe(200);
    const hT = Math.log(3) - (2 / 3) * Math.log(2);
    expect(r.body.scanned).toBe(3);
    expect(r.body.groups).toHaveLength(1);
    expect(r.body.groups[0]).toMatchObject({ modelVersion: 'test', env: 'e1', memory: 'reflection_only', sessions: 3, tasks: 2, attempts: 5 });
    expect(r.body.groups[0].diversity).toBeCloseTo((hT + Math.log(2)) / 2, 12);

    const all = await s.call('GET', '/v1/stats/diversity', undefined, ADMIN);
    expect(all.body.groups.map((g: { env: string }) => g.env)).toEqual(['e1', 'e2']);
    expect(all.body.groups[1]).toMatchObject({ sessions: 1, tasks: 1, attempts: 1, diversity: 0 });
    // a newly completed session is counted at once (answers are cached only while nothing changed)
    await play('U', 'e1', [['a']], true);
    const again = await s.call('GET', '/v1/stats/diversity?env=e1', undefined, ADMIN);
    expect(again.body.groups[0]).toMatchObject({ sessions: 4, tasks: 2, attempts: 6 });
    expect(again.body.groups[0].diversity).toBeCloseTo((hT + (Math.log(3) - (2 / 3) * Math.log(2))) / 2, 12);
    const other = await s.call('GET', '/v1/stats/diversity', undefined, OTHER);
    expect(other.body.groups).toEqual([{ modelVersion: 'test', env: 'e1', memory: 'reflection_only', sessions: 1, tasks: 1, attempts: 2, diversity: Math.log(2) }]);
  });

  it('maxSessions reads only the newest sessions', async () => {
    const r = await s.call('GET', '/v1/stats/diversity?env=e1&maxSessions=1', undefined, ADMIN);
    // the newest completed e1 session of acme is task U's second: "a"
    expect(r.body).toEqual({ scanned: 1, groups: [{ modelVersion: 'test', env: 'e1', memory: 'reflection_only', sessions: 1, tasks: 1, attempts: 1, diversity: 0 }] });
  });

  it('groups and filters by memory: single-attempt sessions apart from each memory mode', async () => {
    // task V in env e3: LaMer sessions replay "a" twice; independent single-attempt sessions play "a" and "b"
    await play('V', 'e3', [['a'], ['a']], false);
    await play('V', 'e3', [['a'], ['a']], false, ADMIN, { memory: 'history_only' });
    await play('V', 'e3', [['a']], false, ADMIN, { maxAttempts: 1 });
    await play('V', 'e3', [['b']], false, ADMIN, { maxAttempts: 1 });
    const r = await s.call('GET', '/v1/stats/diversity?env=e3', undefined, ADMIN);
    expect(r.status).toBe(200);
    expect(r.body.groups).toEqual([
      { modelVersion: 'test', env: 'e3', memory: 'none', sessions: 2, tasks: 1, attempts: 2, diversity: Math.log(2) },
      { modelVersion: 'test', env: 'e3', memory: 'reflection_only', sessions: 1, tasks: 1, attempts: 2, diversity: 0 },
      { modelVersion: 'test', env: 'e3', memory: 'history_only', sessions: 1, tasks: 1, attempts: 2, diversity: 0 },
    ]);
    const none = await s.call('GET', '/v1/stats/diversity?env=e3&memory=none', undefined, ADMIN);
    expect(none.status).toBe(200);
    expect(none.body).toEqual({ scanned: 2, groups: [r.body.groups[0]] });
    const hist = await s.call('GET', '/v1/stats/diversity?env=e3&memory=history_only', undefined, ADMIN);
    expect(hist.body).toEqual({ scanned: 1, groups: [r.body.groups[2]] });
  });

  it('equals lamer eval trajectory diversity for the same sessions', async () => {
    const report = await runEval({ env: 'minesweeper', tasks: 4, attempts: 3, trials: 2, concurrency: 2, seed: 7, policy: 'model', server: s.url, apiKey: 'k2', availableActions: true });
    const r = await s.call('GET', '/v1/stats/diversity?env=minesweeper', undefined, OTHER);
    expect(r.body.groups).toHaveLength(1);
    expect(r.body.groups[0].sessions).toBe(8);
    expect(r.body.groups[0].diversity).toBeCloseTo(trajectoryDiversity(report.sessions), 12);
  });

  it('refuses bad parameters with 400 problem+json and changes nothing', async () => {
    const before = await s.call('GET', '/v1/stats/diversity', undefined, ADMIN);
    const bad = [
      'maxSessions=0', 'maxSessions=20001', 'maxSessions=1.5', 'maxSessions=many', 'mode=play', 'extra=1', 'memory=all',
      `env=${'e'.repeat(257)}`, `modelVersion=${'v'.repeat(257)}`, `taskId=${'k'.repeat(1025)}`,
    ];
    for (const q of bad) {
      const r = await s.call('GET', `/v1/stats/diversity?${q}`, undefined, ADMIN);
      expect(r.status, q).toBe(400);
      expect(r.headers.get('content-type'), q).toMatch(/application\/problem\+json/);
      expect(r.body.type).toBe('https://lamer-server.dev/problems/validation');
    }
    expect((await s.call('GET', '/v1/stats/diversity')).status).toBe(401);
    expect(await s.call('GET', '/v1/stats/diversity', undefined, ADMIN)).toMatchObject({ status: 200, body: before.body });
  });
});

describe('GET /v1/stats/diversity answers kept between calls', () => {
  /** Diversity queries: filters with a window size, as query strings and as the repository reads them. */
  const QUERIES: Array<[Omit<SessionFilters, 'status'>, number]> = [
    [{}, 2000], [{}, 5], [{ taskId: 'a' }, 2000], [{ memory: 'none' }, 3], [{ memory: 'reflection_only' }, 4], [{ env: 'g', mode: 'eval' }, 7],
  ];
  const query = (f: Omit<SessionFilters, 'status'>, n: number) => new URLSearchParams({ ...f, maxSessions: String(n) }).toString();

  /** Every query answered over HTTP equals a full read of its window from the database (a connection of its own). */
  async function expectFullReads(t: TestServer, tenant: string): Promise<void> {
    const conn = openDatabase(t.dataDir);
    try {
      const repos = createRepositories(conn);
      for (const [f, n] of QUERIES) {
        const r = await t.call('GET', `/v1/stats/diversity?${query(f, n)}`);
        expect(r.status).toBe(200);
        expect(r.body, query(f, n)).toEqual(diversityByVersion(repos.sessions.attemptTrajectories(tenant, f, n)));
      }
    } finally {
      conn.close();
    }
  }

  it('equal a full read of the window after every batch of sessions completed out of creation order', async () => {
    const t = await startTestServer();
    try {
      // 18 sessions created first (so their ids are in this order), each given its actions per attempt
      const plans = Array.from({ length: 18 }, (_, i) => ({
        taskId: ['a', 'b', 'c'][i % 3]!,
        attempts: i % 4 === 0 ? [[['up', 'down'][i % 2]!]] : [['up', i % 3 ? 'left' : 'down'], [['right', 'up'][i % 2]!]],
        mode: i % 5 === 0 ? 'train' : 'eval',
      }));
      const ids: string[] = [];
      for (const p of plans) {
        const c = await t.call('POST', '/v1/sessions', { taskId: p.taskId, env: 'g', instructions: 'x', maxAttempts: p.attempts.length, maxSteps: 10, mode: p.mode });
        expect(c.status).toBe(201);
        ids.push(c.body.id as string);
      }
      await expectFullReads(t, 'default');
      const order = shuffled(plans.map((p, i) => ({ ...p, id: ids[i]! })), 11);
      for (let b = 0; b < order.length; b += 4) {
        for (const p of order.slice(b, b + 4)) {
          for (const [a, actions] of p.attempts.entries()) {
            for (const [k, action] of actions.entries()) {
              const r = await t.call('POST', `/v1/sessions/${p.id}/steps`, { attempt: a, step: k, observation: `o${k}`, availableActions: [action] });
              expect(r.body.action).toBe(action);
            }
            const end = { attempt: a, step: actions.length, observation: 'end', reward: 0, done: true, success: false };
            expect((await t.call('POST', `/v1/sessions/${p.id}/steps`, end)).status).toBe(200);
          }
        }
        await expectFullReads(t, 'default');
      }
    } finally {
      await t.close();
    }
  });

  it('on a database from before the statistics aggregates: equal full reads at start and after a completion', async () => {
    const [fixtures] = fc.sample(statsSessions({ realistic: true, tenants: ['default', 'other'], minLength: 40, maxLength: 40 }), { numRuns: 1, seed: 8 });
    const dataDir = tmpDir('lamer-diversity-old-');
    const sqlite = databaseBeforeAggregates(dataDir, fixtures!.map((f) => ({ ...fixtureRow(f), env: 'g' })));
    const step = sqlite.prepare(
      `INSERT INTO steps (session_id, attempt, step, kind, observation, reward, done, success, invalid_action, action, model_version, request_hash, created_at)
       VALUES (?, ?, ?, 'action', 'o', 0, 0, 0, 0, ?, ?, ?, 1)`,
    );
    for (const [i, f] of fixtures!.entries()) {
      for (const a of f.attempts) step.run(f.id, a.attempt, 0, ['up', 'down', 'left'][(i + a.attempt) % 3], f.modelVersion, `${a.attempt}.0`);
    }
    sqlite.close();
    const t = await startTestServer({ dataDir });
    try {
      await expectFullReads(t, 'default');
      const c = await t.call('POST', '/v1/sessions', { taskId: 'a', env: 'g', instructions: 'x', maxAttempts: 1, maxSteps: 5, mode: 'eval' });
      await t.call('POST', `/v1/sessions/${c.body.id}/steps`, { attempt: 0, step: 0, observation: 'o', availableActions: ['left'] });
      await t.call('POST', `/v1/sessions/${c.body.id}/steps`, { attempt: 0, step: 1, observation: 'e', reward: 0, done: true, success: false });
      await expectFullReads(t, 'default');
      expect((await t.call('GET', '/v1/stats/diversity?env=g')).body.scanned).toBe(fixtures!.filter((f) => f.tenant === 'default').length + 1);
    } finally {
      await t.close();
    }
  });
});
