/**
 * `GET /v1/stats` over real HTTP (src/agent/session-stats.ts): success rate and mean return by
 * attempt count the sessions that played the attempt, and are null (not 0) for an attempt that no
 * session played, overall and per group.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../../helpers/index.js';

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
async function play(env: string, maxAttempts: number, returns: number[], solvedAt: number): Promise<void> {
  const c = await s.call('POST', '/v1/sessions', { taskId: `${env}-task`, env, instructions: 'x', maxAttempts, maxSteps: 5 });
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
      { modelVersion: 'test', env: 'a', mode: 'train', sessions: 2, passAtK: { '1': 0.5, '2': 1, '3': 1 }, successByAttempt: [0.5, 1, null], meanReturnByAttempt: [0, 2, null], attemptsPlayed: [2, 1, 0] },
      { modelVersion: 'test', env: 'b', mode: 'train', sessions: 1, passAtK: { '1': 0 }, successByAttempt: [0], meanReturnByAttempt: [-3], attemptsPlayed: [1] },
    ]);
  });
});
