/**
 * The whole API in one curl-like scenario over real HTTP: a toy door game played for three attempts
 * (fail, fail, succeed), reflections in the done answers, memory, pass@k, stats, trajectory, and
 * the retry / conflict / ordering rules of docs/protocol.md "Post a step".
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, countRows, type TestServer } from '../../helpers/index.js';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s.close();
});

const DOORS = ['door 1', 'door 2', 'door 3'];
const INSTRUCTIONS = 'Open the door with the prize. Answer with one of the available actions.';
const REFLECTION = /^Attempt (\d) failed\. Next time try a different first move \(\d+\)\.$/;

async function step(id: string, body: Record<string, unknown>) {
  const r = await s.call('POST', `/v1/sessions/${id}/steps`, body);
  return r;
}

/** One attempt of the door game: two actions, then the done step. */
async function playAttempt(id: string, attempt: number, win: boolean) {
  const a0 = await step(id, { attempt, step: 0, observation: 'Three closed doors.', availableActions: DOORS });
  expect(a0.status).toBe(200);
  expect(DOORS).toContain(a0.body.action);
  const a1 = await step(id, { attempt, step: 1, observation: `You opened ${a0.body.action}: empty.`, reward: 0, availableActions: DOORS });
  expect(a1.status).toBe(200);
  const done = await step(id, {
    attempt,
    step: 2,
    observation: win ? 'Prize found!' : 'Out of keys.',
    reward: win ? 10 : -1,
    done: true,
    success: win,
  });
  expect(done.status).toBe(200);
  return { a0, a1, done };
}

describe('a three-attempt LaMer session', () => {
  let id: string;

  it('creates a session with defaults and the active model version pinned', async () => {
    const r = await s.call('POST', '/v1/sessions', { taskId: 'doors:seed=1', instructions: INSTRUCTIONS, env: 'doors', maxSteps: 5 });
    expect(r.status).toBe(201);
    expect(r.headers.get('location')).toBe(`/v1/sessions/${r.body.id}`);
    expect(r.body).toMatchObject({
      taskId: 'doors:seed=1',
      env: 'doors',
      mode: 'train',
      status: 'active',
      maxAttempts: 3,
      maxSteps: 5,
      memory: 'reflection_only',
      sampling: { temperature: 1, topP: 1, topK: 0 },
      modelVersion: 'test',
      metadata: {},
      next: { attempt: 0, step: 0 },
      attempts: [],
      passAtK: { '1': false, '2': false, '3': false },
      reflections: [],
    });
    id = r.body.id;
  });

  it('fails twice with reflections, then succeeds and completes', async () => {
    const first = await playAttempt(id, 0, false);
    expect(first.a0.body).toMatchObject({ sessionId: id, attempt: 0, step: 0, modelVersion: 'test', attemptResult: null, reflection: null });
    expect(first.a0.body.output).toBe(first.a0.body.action);
    expect(first.a0.body.session).toEqual({ status: 'active', next: { attempt: 0, step: 1 } });
    expect(first.done.body).toMatchObject({
      action: null,
      output: null,
      attemptResult: { attempt: 0, success: false, return: -1, steps: 3, endReason: 'done' },
      session: { status: 'active', next: { attempt: 1, step: 0 } },
    });
    expect(first.done.body.reflection.attempt).toBe(0);
    expect(first.done.body.reflection.text).toMatch(REFLECTION);
    expect(REFLECTION.exec(first.done.body.reflection.text)![1]).toBe('0');

    const second = await playAttempt(id, 1, false);
    expect(second.done.body.attemptResult).toEqual({ attempt: 1, success: false, return: -1, steps: 3, endReason: 'done' });
    expect(REFLECTION.exec(second.done.body.reflection.text)![1]).toBe('1');
    expect(second.done.body.session).toEqual({ status: 'active', next: { attempt: 2, step: 0 } });

    const third = await playAttempt(id, 2, true);
    expect(third.done.body).toMatchObject({
      attemptResult: { attempt: 2, success: true, return: 10, steps: 3, endReason: 'done' },
      reflection: null,
      session: { status: 'completed', next: null },
    });
  });

  it('GET shows attempts, pass@k and the reflections', async () => {
    const r = await s.call('GET', `/v1/sessions/${id}`);
    expect(r.status).toBe(200);
    expect(r.body.status).toBe('completed');
    expect(r.body.next).toBeNull();
    expect(r.body.attempts).toEqual([
      { attempt: 0, status: 'failed', steps: 3, return: -1, success: false, endReason: 'done' },
      { attempt: 1, status: 'failed', steps: 3, return: -1, success: false, endReason: 'done' },
      { attempt: 2, status: 'succeeded', steps: 3, return: 10, success: true, endReason: 'done' },
    ]);
    expect(r.body.passAtK).toEqual({ '1': false, '2': false, '3': true });
    expect(r.body.reflections.map((x: { attempt: number; source: string }) => [x.attempt, x.source])).toEqual([
      [0, 'policy'],
      [1, 'policy'],
    ]);
    const m = await s.call('GET', `/v1/sessions/${id}/memory`);
    expect(m.status).toBe(200);
    expect(m.body.memory).toBe('reflection_only');
    expect(m.body.reflections).toEqual(r.body.reflections);
  });

  it('the acting prompt of a later attempt carries the earlier reflections', async () => {
    const t = await s.call('GET', `/v1/sessions/${id}/trajectory`);
    expect(t.status).toBe(200);
    const rows = t.body.steps as Array<Record<string, any>>;
    expect(rows.map((r) => `${r.attempt}.${r.step}.${r.kind}`)).toEqual([
      '0.0.action', '0.1.action', '0.2.action', '0.2.reflection',
      '1.0.action', '1.1.action', '1.2.action', '1.2.reflection',
      '2.0.action', '2.1.action', '2.2.action',
    ]);
    const mem = await s.call('GET', `/v1/sessions/${id}/memory`);
    const [r0, r1] = mem.body.reflections;
    const p20 = rows[8]!.prompt as string;
    expect(p20).toBe(
      `${INSTRUCTIONS}` +
        `\nReflections on earlier attempts:\nAttempt 0: ${r0.text}\nAttempt 1: ${r1.text}` +
        `\nObservation:\nThree closed doors.\nAction: `,
    );
    const p01 = rows[1]!.prompt as string;
    expect(p01).toBe(
      `${INSTRUCTIONS}` +
        `\nObservation:\nThree closed doors.\nAction: ${rows[0]!.action}` +
        `\nObservation:\nYou opened ${rows[0]!.action}: empty.\nAction: `,
    );
    // Token ids are the prompt's bytes (TestEngine), logprobs log(1/256) per output byte.
    expect(rows[1]!.promptTokenIds).toEqual(Array.from(Buffer.from(p01, 'utf8')));
    expect(rows[1]!.outputTokenIds).toEqual(Array.from(Buffer.from(rows[1]!.output, 'utf8')));
    expect(rows[1]!.logprobs).toEqual(rows[1]!.outputTokenIds.map(() => Math.log(1 / 256)));
    // The reflection turn sees the failed attempt and says it was not completed.
    expect(rows[3]!.prompt).toContain('Attempt 0 ended: the task was not completed.');
    expect(rows[3]!.output).toBe(r0.text);
    // The done row stores no action; rewards as given; returns not yet computed.
    expect(rows[2]).toMatchObject({ action: null, output: null, reward: -1, done: true, success: false, return: null, advantage: null });
    expect(rows[10]).toMatchObject({ reward: 10, done: true, success: true });
  });

  it('retries return the stored answer and record nothing twice', async () => {
    const before = countRows(s.dataDir, 'SELECT count(*) AS n FROM steps WHERE session_id = ?', id);
    const body = { attempt: 2, step: 2, observation: 'Prize found!', reward: 10, done: true, success: true };
    const again = await step(id, body);
    expect(again.status).toBe(200);
    expect(again.body.attemptResult).toEqual({ attempt: 2, success: true, return: 10, steps: 3, endReason: 'done' });
    // Key order and explicit defaults do not matter for identity.
    const reordered = await step(id, { success: true, done: true, reward: 10, observation: 'Prize found!', step: 2, attempt: 2, invalidAction: false });
    expect(reordered.body).toEqual(again.body);
    const a00 = await step(id, { attempt: 0, step: 0, observation: 'Three closed doors.', availableActions: DOORS });
    expect(a00.status).toBe(200);
    expect(a00.body.session).toEqual({ status: 'active', next: { attempt: 0, step: 1 } });
    expect(countRows(s.dataDir, 'SELECT count(*) AS n FROM steps WHERE session_id = ?', id)).toBe(before);
  });

  it('a different body for a recorded step is 409 step-conflict', async () => {
    const r = await step(id, { attempt: 0, step: 0, observation: 'Four doors.', availableActions: DOORS });
    expect(r.status).toBe(409);
    expect(r.type).toContain('application/problem+json');
    expect(r.body.type).toBe('https://lamer-server.dev/problems/step-conflict');
  });

  it('a new step on a completed session is 409 session-not-active', async () => {
    const r = await step(id, { attempt: 3, step: 0, observation: 'x' });
    expect(r.status).toBe(409);
    expect(r.body.type).toBe('https://lamer-server.dev/problems/session-not-active');
  });

  it('stats count the completed session', async () => {
    const r = await s.call('GET', '/v1/stats?env=doors');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      sessions: 1,
      passAtK: { '1': 0, '2': 0, '3': 1 },
      successByAttempt: [0, 0, 1],
      meanReturnByAttempt: [-1, -1, 10],
      attemptsPlayed: [1, 1, 1],
    });
    expect(r.body.groups).toEqual([
      {
        modelVersion: 'test', env: 'doors', mode: 'train', memory: 'reflection_only', sessions: 1, runs: 1,
        passAtK: { '1': 0, '2': 0, '3': 1 }, successByAttempt: [0, 0, 1], meanReturnByAttempt: [-1, -1, 10], attemptsPlayed: [1, 1, 1],
      },
    ]);
    const none = await s.call('GET', '/v1/stats?env=other');
    expect(none.body).toMatchObject({ sessions: 0, passAtK: {}, groups: [] });
  });
});

describe('ordering, step cap, memory modes, close', () => {
  it('an out-of-order step is 409 with the expected position', async () => {
    const c = await s.call('POST', '/v1/sessions', { taskId: 'order', instructions: 'x' });
    const r = await step(c.body.id, { attempt: 0, step: 1, observation: 'o', reward: 1 });
    expect(r.status).toBe(409);
    expect(r.body).toMatchObject({ type: 'https://lamer-server.dev/problems/step-out-of-order', status: 409, expected: { attempt: 0, step: 0 } });
    const ok = await step(c.body.id, { attempt: 0, step: 0, observation: 'o' });
    expect(ok.body.action).toMatch(/^move [0-3]$/);
    const skip = await step(c.body.id, { attempt: 1, step: 0, observation: 'o' });
    expect(skip.body.expected).toEqual({ attempt: 0, step: 1 });
  });

  it('the step at index maxSteps ends the attempt with endReason max_steps', async () => {
    const c = await s.call('POST', '/v1/sessions', { taskId: 'cap', instructions: 'x', maxSteps: 2, maxAttempts: 2, memory: 'history_and_reflection' });
    const id = c.body.id;
    expect((await step(id, { attempt: 0, step: 0, observation: 'A' })).body.action).not.toBeNull();
    expect((await step(id, { attempt: 0, step: 1, observation: 'B', reward: 0.5 })).body.action).not.toBeNull();
    const end = await step(id, { attempt: 0, step: 2, observation: 'C', reward: 0.25 });
    expect(end.body.attemptResult).toEqual({ attempt: 0, success: false, return: 0.75, steps: 3, endReason: 'max_steps' });
    expect(end.body.reflection.attempt).toBe(0);
    const a1 = await step(id, { attempt: 1, step: 0, observation: 'A' });
    expect(a1.status).toBe(200);
    const t = await s.call('GET', `/v1/sessions/${id}/trajectory`);
    const prompt = t.body.steps.find((r: any) => r.attempt === 1 && r.step === 0).prompt as string;
    expect(prompt).toContain(`\nPrevious attempt 0 (not completed), last 2 steps:\nObservation:\nA\nAction: `);
    expect(prompt).toContain(`\nFinal observation:\nC\nReflections on earlier attempts:\nAttempt 0: ${end.body.reflection.text}`);
    // Last attempt fails on the cap: no reflection, session completed.
    await step(id, { attempt: 1, step: 1, observation: 'B' });
    const last = await step(id, { attempt: 1, step: 2, observation: 'C' });
    expect(last.body).toMatchObject({ reflection: null, session: { status: 'completed', next: null }, attemptResult: { endReason: 'max_steps' } });
    const g = await s.call('GET', `/v1/sessions/${id}`);
    expect(g.body.passAtK).toEqual({ '1': false, '2': false });
  });

  it('a human edit of a reflection is used by later prompts', async () => {
    const c = await s.call('POST', '/v1/sessions', { taskId: 'edit', instructions: 'x', maxSteps: 3 });
    const id = c.body.id;
    await step(id, { attempt: 0, step: 0, observation: 'A' });
    await step(id, { attempt: 0, step: 1, observation: 'lost', done: true });
    const e = await s.call('PUT', `/v1/sessions/${id}/memory/0`, { text: 'Go left first.' });
    expect(e.status).toBe(200);
    expect(e.body).toMatchObject({ attempt: 0, text: 'Go left first.', source: 'human' });
    const missing = await s.call('PUT', `/v1/sessions/${id}/memory/1`, { text: 'x' });
    expect(missing.status).toBe(404);
    await step(id, { attempt: 1, step: 0, observation: 'A' });
    const t = await s.call('GET', `/v1/sessions/${id}/trajectory`);
    expect(t.body.steps.at(-1).prompt).toContain('\nReflections on earlier attempts:\nAttempt 0: Go left first.\n');
  });

  it('DELETE abandons a session; its steps are then 409', async () => {
    const c = await s.call('POST', '/v1/sessions', { taskId: 'close', instructions: 'x' });
    const d = await s.call('DELETE', `/v1/sessions/${c.body.id}`);
    expect(d.status).toBe(200);
    expect(d.body).toMatchObject({ status: 'abandoned', next: null });
    expect((await s.call('DELETE', `/v1/sessions/${c.body.id}`)).body.status).toBe('abandoned');
    const r = await step(c.body.id, { attempt: 0, step: 0, observation: 'o' });
    expect(r.status).toBe(409);
    expect(r.body.type).toBe('https://lamer-server.dev/problems/session-not-active');
    expect((await s.call('GET', '/v1/sessions/ses_doesnotexist')).status).toBe(404);
  });

  it('lists with filters and cursor pagination, newest first', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push((await s.call('POST', '/v1/sessions', { taskId: 'page', instructions: 'x', env: 'pager', mode: 'eval' })).body.id);
    }
    const p1 = await s.call('GET', '/v1/sessions?env=pager&limit=2');
    expect(p1.body.items.map((x: any) => x.id)).toEqual([ids[4], ids[3]]);
    const p2 = await s.call('GET', `/v1/sessions?env=pager&limit=2&cursor=${p1.body.nextCursor}`);
    expect(p2.body.items.map((x: any) => x.id)).toEqual([ids[2], ids[1]]);
    const p3 = await s.call('GET', `/v1/sessions?env=pager&limit=2&cursor=${p2.body.nextCursor}`);
    expect(p3.body.items.map((x: any) => x.id)).toEqual([ids[0]]);
    expect(p3.body.nextCursor).toBeNull();
    expect((await s.call('GET', '/v1/sessions?env=pager&mode=train')).body.items).toEqual([]);
    expect((await s.call('GET', '/v1/sessions?status=abandoned')).body.items.length).toBe(1);
  });
});

describe('models and operations', () => {
  it('lists the active model and activates versions', async () => {
    const r = await s.call('GET', '/v1/models');
    expect(r.status).toBe(200);
    expect(r.body.active).toBe('test');
    expect(r.body.items).toEqual([expect.objectContaining({ version: 'test', status: 'active', loaded: true, parent: null, jobId: null })]);
    expect((await s.call('POST', '/v1/models/nope/activate')).status).toBe(404);
    const a = await s.call('POST', '/v1/models/test/activate');
    expect(a.body).toMatchObject({ version: 'test', status: 'active' });
    const c = await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x', modelVersion: 'nope' });
    expect(c.status).toBe(400);
    expect(c.body.errors).toEqual([{ field: 'body/modelVersion', message: "unknown model version 'nope'" }]);
  });

  it('healthz, readyz, metrics, docs, request ids', async () => {
    expect((await s.call('GET', '/healthz')).body).toEqual({ status: 'ok' });
    expect((await s.call('GET', '/readyz')).body).toEqual({
      status: 'ready',
      database: true,
      storage: 'ok',
      model: { version: 'test', loaded: true },
      engine: 'test',
      backend: 'none',
    });
    const m = await s.call('GET', '/metrics');
    expect(m.status).toBe(200);
    expect(m.body).toMatch(/lamer_steps_total\{kind="action",model_version="test"\} \d+/);
    expect(m.body).toMatch(/lamer_steps_total\{kind="reflection",model_version="test"\} \d+/);
    expect(m.body).toContain('lamer_engine_info{engine="test",backend="none"} 1');
    expect(m.body).toMatch(/http_request_duration_seconds_count\{method="POST",route="\/v1\/sessions\/:id\/steps",status_code="200"\} \d+/);
    expect(m.body).toMatch(/lamer_active_sessions \d+/);
    expect((await s.call('GET', '/docs')).status).toBeLessThan(400);
    const withId = await s.call('GET', '/healthz', undefined, { 'x-request-id': 'abc-123' });
    expect(withId.headers.get('x-request-id')).toBe('abc-123');
    const nf = await s.call('GET', '/v1/nothing-here', undefined, { 'x-request-id': 'req-9' });
    expect(nf.status).toBe(404);
    expect(nf.body).toMatchObject({ type: 'https://lamer-server.dev/problems/not-found', requestId: 'req-9' });
  });
});

describe('idle expiry', () => {
  it('an active session idle longer than the TTL becomes expired; a fresh one does not', async () => {
    const idleCreated = (await s.call('POST', '/v1/sessions', { taskId: 'idle', instructions: 'x' })).body;
    const idle = idleCreated.id as string;
    // as of 1 ms after its TTL is over, from its own last update
    const expired = await s.app.agent.expireIdle(60_000, Date.parse(idleCreated.updatedAt) + 60_001);
    expect(expired).toContain(idle);
    const created = (await s.call('POST', '/v1/sessions', { taskId: 'idle', instructions: 'x' })).body;
    const fresh = created.id as string;
    // Checked as of 1 ms before its TTL is over, from its own last update: the expiry rule decides,
    // not how long this machine took to get here.
    expect(await s.app.agent.expireIdle(60_000, Date.parse(created.updatedAt) + 59_999)).not.toContain(fresh);
    const g = await s.call('GET', `/v1/sessions/${idle}`);
    expect(g.body).toMatchObject({ status: 'expired', next: null });
    const r = await s.call('POST', `/v1/sessions/${idle}/steps`, { attempt: 0, step: 0, observation: 'o' });
    expect(r.status).toBe(409);
    expect(r.body.type).toBe('https://lamer-server.dev/problems/session-not-active');
    expect((await s.call('GET', `/v1/sessions/${fresh}`)).body.status).toBe('active');
  });

  it('an attempt still running when its session expires ends failed with endReason abandoned; its steps stay', async () => {
    const id = (await s.call('POST', '/v1/sessions', { taskId: 'idle-running', instructions: 'x' })).body.id as string;
    expect((await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o' })).status).toBe(200);
    const before = (await s.call('GET', `/v1/sessions/${id}`)).body;
    expect(before.attempts[0]).toMatchObject({ status: 'running', endReason: null, steps: 1 });
    expect(await s.app.agent.expireIdle(60_000, Date.parse(before.updatedAt) + 60_001)).toContain(id);
    const after = (await s.call('GET', `/v1/sessions/${id}`)).body;
    expect(after).toMatchObject({ status: 'expired', next: null });
    expect(after.attempts).toHaveLength(1);
    expect(after.attempts[0]).toEqual({ ...before.attempts[0], status: 'failed', success: false, endReason: 'abandoned' });
    const t = (await s.call('GET', `/v1/sessions/${id}/trajectory`)).body;
    expect(t.steps.map((x: { attempt: number; step: number; kind: string }) => [x.attempt, x.step, x.kind])).toEqual([[0, 0, 'action']]);
  });
});
