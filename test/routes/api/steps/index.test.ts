/**
 * Step validation over real HTTP: `POST /v1/steps:batch` under the `info` size limit (an item whose
 * `info` is over LAMER_MAX_INFO_BYTES fails alone with a 400 naming `body/items/<i>/info`; the
 * others succeed), each batch item validated on its own, and the reward at step 0 (none: 0 or
 * absent; anything else is a 400 that records nothing), the bounds of `availableActions` (each
 * action once, at most LAMER_MAX_AVAILABLE_ACTIONS of them), and an attempt index at or beyond the
 * session's maxAttempts (a 400 naming `body/attempt` that records nothing).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultLimits } from '../../../../src/config.js';
import { countRows, dumpDb, sessionAfterFirstStep, startTestServer, type TestServer } from '../../../helpers/index.js';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ limits: { ...defaultLimits, infoBytes: 1000 } });
});
afterAll(async () => {
  await s.close();
});

describe('batch items and the info limit', () => {
  it('the oversized item fails alone, naming its field; the step can then be posted', async () => {
    const a = (await s.call('POST', '/v1/sessions', { taskId: 'a', instructions: 'x' })).body.id;
    const b = (await s.call('POST', '/v1/sessions', { taskId: 'b', instructions: 'x' })).body.id;
    const r = await s.call('POST', '/v1/steps:batch', {
      items: [
        { sessionId: a, attempt: 0, step: 0, observation: 'o', info: { k: 'v' } },
        { sessionId: b, attempt: 0, step: 0, observation: 'o', info: { k: 'v'.repeat(1000) } },
      ],
    });
    expect(r.status).toBe(200);
    expect(r.body.results[0].ok).toBe(true);
    expect(r.body.results[1]).toMatchObject({
      ok: false,
      error: { status: 400, type: 'https://lamer-server.dev/problems/validation', errors: [{ field: 'body/items/1/info' }] },
    });
    expect(r.body.results[1].error.detail).toContain('LAMER_MAX_INFO_BYTES');
    const again = await s.call('POST', '/v1/steps:batch', { items: [{ sessionId: b, attempt: 0, step: 0, observation: 'o', info: { k: 'v' } }] });
    expect(again.body.results[0].ok).toBe(true);
  });
});

const VALIDATION = 'https://lamer-server.dev/problems/validation';

describe('POST /v1/steps:batch validates each item on its own', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
    await sessionAfterFirstStep(s);
  });
  afterAll(async () => {
    await s.close();
  });

  it('a wrong-typed field fails its item only (400 naming body/items/1/attempt); the valid items are recorded', async () => {
    const a = (await s.call('POST', '/v1/sessions', { taskId: 'b', instructions: 'x' })).body.id;
    const b = (await s.call('POST', '/v1/sessions', { taskId: 'b', instructions: 'x' })).body.id;
    const c = (await s.call('POST', '/v1/sessions', { taskId: 'b', instructions: 'x' })).body.id;
    const r = await s.call('POST', '/v1/steps:batch', {
      items: [
        { sessionId: a, attempt: 0, step: 0, observation: 'o' },
        { sessionId: b, attempt: '0', step: 0, observation: 'o' },
        { sessionId: c, attempt: 0, step: 0, observation: 'o', extra: 1 },
      ],
    });
    expect(r.status).toBe(200);
    const [ra, rb, rc] = r.body.results;
    expect(ra.ok).toBe(true);
    expect(ra.result.session.next).toEqual({ attempt: 0, step: 1 });
    expect(rb.ok).toBe(false);
    expect(rb.error.status).toBe(400);
    expect(rb.error.type).toBe(VALIDATION);
    expect(rb.error.errors).toEqual([{ field: 'body/items/1/attempt', message: 'must be integer' }]);
    expect(rc.ok).toBe(false);
    expect(rc.error.errors).toEqual([{ field: 'body/items/2/extra', message: 'is not an allowed property' }]);
    expect(countRows(s.dataDir, 'SELECT count(*) AS n FROM steps WHERE session_id IN (?, ?, ?)', a, b, c)).toBe(1);
    expect(countRows(s.dataDir, 'SELECT count(*) AS n FROM steps WHERE session_id = ?', a)).toBe(1);
  });
});

describe('the reward at step 0', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s.close();
  });
  const open = async (): Promise<string> => (await s.call('POST', '/v1/sessions', { taskId: 'r', instructions: 'x', maxAttempts: 2, maxSteps: 3 })).body.id;
  const REFUSED = { field: 'body/reward', message: 'must be 0 or absent at step 0 (no action was taken yet)' };

  it.each([1, -0.5, 1e-9])('reward %s at step 0 is a 400 naming body/reward; nothing is recorded; the step can then be posted', async (reward) => {
    const id = await open();
    const before = dumpDb(s.dataDir);
    const r = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o', reward });
    expect(r.status).toBe(400);
    expect(r.type).toContain('application/problem+json');
    expect(r.body.type).toBe(VALIDATION);
    expect(r.body.detail).toBe('body/reward must be 0 or absent at step 0 (no action was taken yet)');
    expect(r.body.errors).toEqual([REFUSED]);
    expect(dumpDb(s.dataDir)).toBe(before);
    const ok = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o' });
    expect(ok.status).toBe(200);
    expect(ok.body.session.next).toEqual({ attempt: 0, step: 1 });
  });

  it('availableActions with a duplicate is a 400 naming the field; nothing is recorded', async () => {
    const id = await open();
    const before = dumpDb(s.dataDir);
    const r = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o', availableActions: ['(1, 1)', '(1, 2)', '(1, 1)'] });
    expect(r.status).toBe(400);
    expect(r.body.type).toBe(VALIDATION);
    expect(r.body.errors).toEqual([{ field: 'body/availableActions', message: 'must NOT have duplicate items (items ## 2 and 0 are identical)' }]);
    expect(dumpDb(s.dataDir)).toBe(before);
  });

  it('availableActions over the default cap of 512 is a 400 naming the field and the cap; nothing is recorded; 512 are accepted', async () => {
    const id = await open();
    const actions = (n: number) => Array.from({ length: n }, (_, i) => `a${i}`);
    const before = dumpDb(s.dataDir);
    const r = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o', availableActions: actions(513) });
    expect(r.status).toBe(400);
    expect(r.body.type).toBe(VALIDATION);
    expect(r.body.errors).toEqual([{ field: 'body/availableActions', message: 'must NOT have more than 512 items' }]);
    expect(dumpDb(s.dataDir)).toBe(before);
    const ok = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o', availableActions: actions(512) });
    expect(ok.status).toBe(200);
    expect(actions(512)).toContain(ok.body.action);
  });

  it('also at step 0 of a later attempt, and for a batch item alone', async () => {
    const id = await open();
    await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o' });
    const end = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 1, observation: 'o', reward: -1, done: true });
    expect(end.body.session.next).toEqual({ attempt: 1, step: 0 });
    const before = dumpDb(s.dataDir);
    const r = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 1, step: 0, observation: 'o', reward: 2 });
    expect(r.status).toBe(400);
    expect(r.body.errors).toEqual([REFUSED]);
    expect(dumpDb(s.dataDir)).toBe(before);
    const other = await open();
    const b = await s.call('POST', '/v1/steps:batch', {
      items: [
        { sessionId: id, attempt: 1, step: 0, observation: 'o' },
        { sessionId: other, attempt: 0, step: 0, observation: 'o', reward: 3 },
      ],
    });
    expect(b.status).toBe(200);
    expect(b.body.results[0].ok).toBe(true);
    expect(b.body.results[1]).toMatchObject({ ok: false, error: { status: 400, type: VALIDATION, errors: [REFUSED] } });
    expect(countRows(s.dataDir, 'SELECT count(*) AS n FROM steps WHERE session_id = ?', other)).toBe(0);
  });

  it('reward 0 or absent at step 0 is accepted, and the return counts the rewards of actions only', async () => {
    const id = await open();
    expect((await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o', reward: 0 })).status).toBe(200);
    const end = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 1, observation: 'o', reward: 0.5, done: true, success: true });
    expect(end.status).toBe(200);
    expect(end.body.attemptResult).toMatchObject({ success: true, return: 0.5, steps: 2 });
  });
});

describe('an attempt index beyond the session\'s maxAttempts', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s.close();
  });
  const open = async (): Promise<string> => (await s.call('POST', '/v1/sessions', { taskId: 'm', instructions: 'x', maxAttempts: 2 })).body.id;
  const BEYOND = (attempt: number) => ({ field: 'body/attempt', message: `is ${attempt}, beyond the session's maxAttempts of 2 (attempts are numbered 0 to 1)` });

  it.each([5, 2])('attempt %s on a session with maxAttempts 2 is a 400 naming body/attempt and maxAttempts, not step-out-of-order; nothing is recorded', async (attempt) => {
    const id = await open();
    const before = dumpDb(s.dataDir);
    const r = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt, step: 0, observation: 'o' });
    expect(r.status).toBe(400);
    expect(r.type).toContain('application/problem+json');
    expect(r.body.type).toBe(VALIDATION);
    expect(r.body.detail).toBe(`body/attempt ${BEYOND(attempt).message}`);
    expect(r.body.errors).toEqual([BEYOND(attempt)]);
    expect(r.body.expected).toBeUndefined();
    expect(dumpDb(s.dataDir)).toBe(before);
    // the session is untouched: it still expects attempt 0 step 0
    expect((await s.call('GET', `/v1/sessions/${id}`)).body).toMatchObject({ status: 'active', next: { attempt: 0, step: 0 }, attempts: [] });
  });

  it('also for a batch item alone; the last attempt (maxAttempts - 1) out of order is still step-out-of-order', async () => {
    const id = await open();
    const b = await s.call('POST', '/v1/steps:batch', { items: [{ sessionId: id, attempt: 5, step: 0, observation: 'o' }] });
    expect(b.status).toBe(200);
    expect(b.body.results[0]).toMatchObject({ ok: false, error: { status: 400, type: VALIDATION, errors: [BEYOND(5)] } });
    expect(countRows(s.dataDir, 'SELECT count(*) AS n FROM steps WHERE session_id = ?', id)).toBe(0);
    const r = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 1, step: 0, observation: 'o' });
    expect(r.status).toBe(409);
    expect(r.body).toMatchObject({ type: 'https://lamer-server.dev/problems/step-out-of-order', expected: { attempt: 0, step: 0 } });
  });
});
