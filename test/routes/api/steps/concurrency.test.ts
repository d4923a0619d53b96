/**
 * Concurrency (docs/protocol.md "Post a step"): many parallel posts of one step give one record and one answer; parallel
 * sessions do not interfere; the batch route answers per item.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countRows, startTestServer, type TestServer } from '../../../helpers/index.js';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s.close();
});

describe('concurrency', () => {
  it('50 parallel posts of the same step: one record, 50 identical answers', async () => {
    const id = (await s.call('POST', '/v1/sessions', { taskId: 'c', instructions: 'x' })).body.id;
    const body = { attempt: 0, step: 0, observation: 'same', availableActions: ['a', 'b', 'c'] };
    const rs = await Promise.all(Array.from({ length: 50 }, () => s.call('POST', `/v1/sessions/${id}/steps`, body)));
    expect(rs.map((r) => r.status)).toEqual(rs.map(() => 200));
    expect(new Set(rs.map((r) => JSON.stringify(r.body))).size).toBe(1);
    expect(countRows(s.dataDir, "SELECT count(*) AS n FROM steps WHERE session_id = ? AND kind = 'action'", id)).toBe(1);
  });

  it('parallel posts of one step with different bodies: one wins, the rest are 409 step-conflict', async () => {
    const id = (await s.call('POST', '/v1/sessions', { taskId: 'c', instructions: 'x' })).body.id;
    const rs = await Promise.all(
      Array.from({ length: 20 }, (_, i) => s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: `obs ${i}` })),
    );
    expect(rs.filter((r) => r.status === 200).length).toBe(1);
    expect(rs.filter((r) => r.status === 409 && r.body.type.endsWith('/step-conflict')).length).toBe(19);
    expect(countRows(s.dataDir, 'SELECT count(*) AS n FROM steps WHERE session_id = ?', id)).toBe(1);
  });

  it('32 sessions played in parallel each record exactly their steps', async () => {
    const ids = await Promise.all(
      Array.from({ length: 32 }, async () => (await s.call('POST', '/v1/sessions', { taskId: 'par', instructions: 'x', maxAttempts: 2, maxSteps: 4 })).body.id as string),
    );
    await Promise.all(
      ids.map(async (id) => {
        for (let a = 0; a < 2; a++) {
          for (let t = 0; t < 3; t++) {
            const r = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: a, step: t, observation: `o${t}`, reward: t === 0 ? 0 : 1 });
            expect(r.status).toBe(200);
          }
          const end = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: a, step: 3, observation: 'end', reward: 1, done: true, success: a === 1 });
          expect(end.body.attemptResult).toEqual({ attempt: a, success: a === 1, return: 3, steps: 4, endReason: 'done' });
        }
      }),
    );
    for (const id of ids) {
      expect(countRows(s.dataDir, "SELECT count(*) AS n FROM steps WHERE session_id = ? AND kind = 'action'", id)).toBe(8);
      expect(countRows(s.dataDir, "SELECT count(*) AS n FROM steps WHERE session_id = ? AND kind = 'reflection'", id)).toBe(1);
    }
    const st = await s.call('GET', '/v1/stats?taskId=par');
    expect(st.body).toMatchObject({ sessions: 32, passAtK: { '1': 0, '2': 1 }, meanReturnByAttempt: [3, 3] });
  });

  it('batch: items succeed or fail on their own, in input order', async () => {
    const a = (await s.call('POST', '/v1/sessions', { taskId: 'b', instructions: 'x' })).body.id;
    const b = (await s.call('POST', '/v1/sessions', { taskId: 'b', instructions: 'x' })).body.id;
    const r = await s.call('POST', '/v1/steps:batch', {
      items: [
        { sessionId: a, attempt: 0, step: 0, observation: 'A' },
        { sessionId: b, attempt: 0, step: 3, observation: 'B' },
        { sessionId: 'ses_missing', attempt: 0, step: 0, observation: 'C' },
        { sessionId: b, attempt: 0, step: 0, observation: 'B', availableActions: ['x'] },
      ],
    });
    expect(r.status).toBe(200);
    expect(r.body.results.map((x: any) => x.ok)).toEqual([true, false, false, true]);
    expect(r.body.results[0].result).toMatchObject({ sessionId: a, attempt: 0, step: 0, session: { status: 'active', next: { attempt: 0, step: 1 } } });
    expect(r.body.results[1].error).toMatchObject({ status: 409, type: 'https://lamer-server.dev/problems/step-out-of-order', expected: { attempt: 0, step: 0 } });
    expect(r.body.results[2].error).toMatchObject({ status: 404, type: 'https://lamer-server.dev/problems/not-found' });
    expect(r.body.results[3].result.action).toBe('x');
    // The single-step route gives the same stored answer.
    const single = await s.call('POST', `/v1/sessions/${a}/steps`, { attempt: 0, step: 0, observation: 'A' });
    expect(single.body).toEqual(r.body.results[0].result);
  });
});
