/**
 * `GET /v1/stats/diversity` (src/agent/diversity.ts, src/db/trajectories.ts): the entropy of each task's distinct action
 * sequences, mean over tasks, per version and env; equal to `lamer eval`'s trajectory diversity
 * for the same played sessions; only completed sessions of the key's tenant count.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../../helpers/index.js';
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

  it('refuses bad parameters with 400 problem+json', async () => {
    for (const q of ['maxSessions=0', 'maxSessions=20001', 'mode=play', 'extra=1', 'memory=all']) {
      const r = await s.call('GET', `/v1/stats/diversity?${q}`, undefined, ADMIN);
      expect(r.status, q).toBe(400);
      expect(r.body.type).toBe('https://lamer-server.dev/problems/validation');
    }
    expect((await s.call('GET', '/v1/stats/diversity')).status).toBe(401);
  });
});
