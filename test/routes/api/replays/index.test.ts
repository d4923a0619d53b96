/**
 * Replays (src/routes/api/replays/index.ts, src/agent/replays.ts; docs/replay.md) over real HTTP
 * against real servers on ephemeral ports with SQLite files: a builtin server on a tiny GPT that
 * replays its own sessions (greedy and seeded, steps and turns) and gets its recorded logprobs and
 * actions back, replays them against a second checkpoint (checked against an independent forward
 * pass) and against one with another tokenizer and prompt format; the batch form, stored reports,
 * the refusals (nothing changed), tenant scoping, remote versions, one replay at a time, steps
 * served during a replay, and tfjs memory kept flat.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { candidateSupport, samplingLogprobs } from '../../../../src/model/sampling.js';
import { loadCheckpoint, saveCheckpoint } from '../../../../src/model/checkpoint.js';
import { forward, initModel } from '../../../../src/model/gpt.js';
import { GameTokenizer } from '../../../../src/model/tokenizers.js';
import { gameVocabulary } from '../../../../src/envs/vocab.js';
import { countRows, dumpDb, startTestServer, tmpDir, writeTinyGptCheckpoint, type TestServer } from '../../../helpers/index.js';

const ACTIONS = ['up', 'down', 'left', 'right'];
const GREEDY = { temperature: 0, topP: 1, topK: 0 };

/** Plays a session: attempt 0 acts twice (candidates, then free text) and fails; attempt 1 acts once and succeeds. */
async function play(s: TestServer, body: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<string> {
  const created = await s.call('POST', '/v1/sessions', { taskId: 'grid', instructions: 'Reach the goal.', maxAttempts: 2, maxSteps: 5, env: 'grid', ...body }, headers);
  expect(created.status).toBe(201);
  const id = created.body.id as string;
  const post = async (b: Record<string, unknown>) => expect((await s.call('POST', `/v1/sessions/${id}/steps`, b, headers)).status).toBe(200);
  await post({ attempt: 0, step: 0, observation: 'start', availableActions: ACTIONS });
  await post({ attempt: 0, step: 1, observation: 'wall ahead' });
  await post({ attempt: 0, step: 2, observation: 'fell', done: true, success: false, reward: -1 });
  await post({ attempt: 1, step: 0, observation: 'start', availableActions: ACTIONS });
  await post({ attempt: 1, step: 1, observation: 'goal', done: true, success: true, reward: 1 });
  return id;
}

/** The rows of a session (every page). */
async function rows(s: TestServer, id: string): Promise<Array<Record<string, any>>> {
  return (await s.call('GET', `/v1/sessions/${id}/trajectory?limit=1000`)).body.steps;
}

/** Every replayed call agrees with the recorded one and gives back its logprobs (per token and summed) within `tol`. */
function expectSelfReplay(report: Record<string, any>, tol = 1e-5): void {
  expect(report.summary.replayed).toBe(report.summary.calls);
  expect(report.summary.agreement).toBe(1);
  expect(report.summary.scored).toBe(report.summary.calls);
  expect(Math.abs(report.summary.meanLogprobDiff)).toBeLessThan(tol);
  for (const st of report.steps) {
    expect(st.skipped).toBeNull();
    expect(st.replayed.action).toBe(st.recorded.action);
    expect(st.replayed.agrees).toBe(true);
    expect(st.replayed.promptFrom).toBe('recorded-tokens');
    expect(st.replayed.logprobs).toHaveLength(st.recorded.logprobs.length);
    st.replayed.logprobs.forEach((x: number, i: number) => expect(Math.abs(x - st.recorded.logprobs[i])).toBeLessThan(tol));
    expect(Math.abs(st.logprobDiff)).toBeLessThan(tol);
  }
}

// on a 2-core machine under a full test run these take minutes: the model calls, not the checks
describe('a builtin version', { timeout: 300_000 }, () => {
  let s: TestServer;
  let dir: string;
  const tok = new GameTokenizer(gameVocabulary());

  beforeAll(async () => {
    dir = tmpDir('lamer-replay-');
    await writeTinyGptCheckpoint(join(dir, 'base'), 7);
    await writeTinyGptCheckpoint(join(dir, 'v2'), 8);
    const g = initModel({ vocab_size: tok.vocabSize, block_size: 384, n_layer: 1, n_head: 2, n_embd: 16 }, 9);
    await saveCheckpoint(g, join(dir, 'compact'), { version: 'base' }, { tokenizer: tok, promptFormat: { name: 'compact', envTags: ['grid'], historySteps: 1 } });
    g.dispose();
    s = await startTestServer({ engine: 'builtin', tfjsBackend: 'wasm', baseModelDir: join(dir, 'base'), dataDir: join(dir, 'data') });
    for (const [version, folder] of [['v2', 'v2'], ['v3', 'compact']] as const) {
      await s.app.repos.models.insert({
        version, parent: 'base', jobId: null, checkpointDir: join(dir, folder), status: 'candidate', metrics: {}, createdAt: Date.now(), engine: 'builtin', engineConfig: null,
      });
    }
  }, 300_000);
  afterAll(async () => {
    await s?.close();
  });

  it('replays a greedy session against its own version: every action agrees and every recorded logprob comes back within 1e-5, nothing added', async () => {
    const id = await play(s, { sampling: GREEDY, memory: 'history_and_reflection' });
    const before = dumpDb(s.dataDir);
    const r = await s.call('POST', `/v1/sessions/${id}/replay`, { modelVersion: 'base' });
    expect(r.status).toBe(201);
    expect(r.headers.get('location')).toBe(`/v1/replays/${r.body.id}`);
    expect(r.body).toMatchObject({ modelVersion: 'base', decoding: 'greedy', logprobs: true, request: { sessionId: id, maxSteps: 1000 } });
    expect(r.body.sessions).toEqual([{ id, taskId: 'grid', env: 'grid', modelVersion: 'base', calls: 3 }]);
    expect(r.body.steps.map((x: any) => [x.attempt, x.step, x.kind])).toEqual([[0, 0, 'step'], [0, 1, 'step'], [1, 0, 'step']]);
    expectSelfReplay(r.body);
    const recorded = (await rows(s, id)).filter((x) => x.kind === 'action' && x.output !== null);
    r.body.steps.forEach((st: any, i: number) => {
      expect(st.recorded.action).toBe(recorded[i]!.action);
      expect(st.recorded.logprobs).toEqual(recorded[i]!.logprobs);
      expect(st.recorded.tokens).toBe(recorded[i]!.outputTokenIds.length);
    });
    // the session's rows are byte-identical; the report is stored and read back as answered
    expect(dumpDb(s.dataDir)).toBe(before);
    expect((await s.call('GET', `/v1/replays/${r.body.id}`)).body).toEqual(r.body);
  });

  it('replays a seeded, sampled session with decoding sampled: the same actions and logprobs', async () => {
    const id = await play(s, { sampling: { temperature: 1, topP: 0.9, topK: 40, seed: 11 } });
    const r = await s.call('POST', `/v1/sessions/${id}/replay`, { modelVersion: 'base', decoding: 'sampled' });
    expect(r.status).toBe(201);
    expectSelfReplay(r.body);
  });

  it('replays turns of the OpenAI-compatible endpoint from their recorded messages and memory', async () => {
    const created = await s.call('POST', '/v1/sessions', { taskId: 'chat', instructions: 'Talk.', maxAttempts: 2, maxSteps: 4, sampling: GREEDY });
    const id = created.body.id as string;
    const base = `/v1/sessions/${id}/openai/v1`;
    const chat = (content: string) => s.call('POST', `${base}/chat/completions`, { messages: [{ role: 'system', content: 'Rules.' }, { role: 'user', content }], max_tokens: 6 });
    expect((await chat('Go')).status).toBe(200);
    expect((await s.call('POST', `${base}/completions`, { prompt: 'Then', max_tokens: 5, stop: ['\n'] })).status).toBe(200);
    expect((await s.call('POST', `${base}/chat/completions`, { messages: [{ role: 'user', content: 'Pick' }], guided_choice: ACTIONS })).status).toBe(200);
    expect((await s.call('POST', `/v1/sessions/${id}/attempts/0/end`, { reward: 0, observation: 'Lost.' })).status).toBe(200);
    expect((await chat('Again')).status).toBe(200); // attempt 1: the memory goes in as a system message
    const before = dumpDb(s.dataDir);
    const r = await s.call('POST', `/v1/sessions/${id}/replay`, { modelVersion: 'base' });
    expect(r.status).toBe(201);
    expect(r.body.steps.map((x: any) => x.kind)).toEqual(['turn', 'turn', 'turn', 'turn']);
    expectSelfReplay(r.body);
    expect(dumpDb(s.dataDir)).toBe(before);
  });

  it('scores the recorded actions under another checkpoint exactly as its own forward pass does', async () => {
    const id = await play(s, { sampling: GREEDY });
    const r = await s.call('POST', `/v1/sessions/${id}/replay`, { modelVersion: 'v2' });
    expect(r.status).toBe(201);
    const steps = r.body.steps;
    expect(steps.every((x: any) => x.replayed.promptFrom === 'recorded-tokens')).toBe(true);
    for (const x of steps) {
      expect(x.replayed.logprob).toBeCloseTo(x.replayed.logprobs.reduce((a: number, b: number) => a + b, 0), 9);
      expect(x.logprobDiff).toBeCloseTo(x.replayed.logprob - x.recorded.logprob, 9);
      expect(x.replayed.agrees).toBe(x.replayed.action === x.recorded.action);
    }
    const agreeing = steps.filter((x: any) => x.replayed.agrees).length;
    expect(r.body.summary).toMatchObject({ calls: 3, replayed: 3, skipped: 0, agreeing, agreement: agreeing / 3, scored: 3 });
    // independent check of the first call (candidates): v2's full forward over prompt + answer, the
    // greedy scoring distribution (temperature 1) restricted to the candidates' trie
    const row = (await rows(s, id))[0]!;
    const { model } = await loadCheckpoint(join(dir, 'v2'));
    try {
      const ids = [...row.promptTokenIds, ...row.outputTokenIds.slice(0, -1)];
      const lp = tf.tidy(() => tf.logSoftmax(forward(model, tf.tensor2d([ids], [1, ids.length], 'int32')), -1).arraySync() as number[][][])[0]!;
      const cands = ACTIONS.map((a) => [...Buffer.from(a, 'utf8'), 257]);
      const support = candidateSupport(cands, row.outputTokenIds);
      const expected = row.outputTokenIds.map((t: number, j: number) => samplingLogprobs(lp[row.promptTokenIds.length - 1 + j]!, GREEDY, support[j])[t]);
      steps[0].replayed.logprobs.forEach((x: number, j: number) => expect(x).toBeCloseTo(expected[j]!, 4));
    } finally {
      model.dispose();
    }
  });

  it('re-renders the prompt in the format of a version with another tokenizer, and scores the action in its tokens', async () => {
    const id = await play(s, { sampling: GREEDY, memory: 'history_only' });
    const r = await s.call('POST', `/v1/sessions/${id}/replay`, { modelVersion: 'v3' });
    expect(r.status).toBe(201);
    const rec = (await rows(s, id)).filter((x) => x.kind === 'action' && x.output !== null);
    r.body.steps.forEach((x: any, i: number) => {
      expect(x.replayed.promptFrom).toBe('rendered');
      // a candidate action is its pieces + EOS; free text its pieces, + EOS when the recorded answer ended with it
      const ended = rec[i]!.outputTokenIds.at(-1) === 257;
      const expected = rec[i]!.availableActions ? tok.encodeCandidate(rec[i]!.output) : [...tok.encode(rec[i]!.output), ...(ended ? [257] : [])];
      expect(x.replayed.logprobs).toHaveLength(expected.length);
      if (rec[i]!.availableActions) expect(ACTIONS).toContain(x.replayed.action);
    });
  });

  it('replays a batch selected by a filter, lists the stored reports and reads one back', async () => {
    const since = new Date().toISOString();
    const a = await play(s, { sampling: GREEDY, env: 'batch' });
    const b = await play(s, { sampling: GREEDY, env: 'batch' });
    const r = await s.call('POST', '/v1/replays', { modelVersion: 'base', filter: { env: 'batch', since, limit: 5 } });
    expect(r.status).toBe(201);
    expect(r.body.sessions.map((x: any) => x.id)).toEqual([b, a]); // newest first
    expect(r.body.request).toEqual({ filter: { env: 'batch', since, limit: 5 }, maxSteps: 1000 });
    expectSelfReplay(r.body);
    const one = await s.call('POST', '/v1/replays', { modelVersion: 'base', filter: { env: 'batch', limit: 1 } });
    expect(one.body.sessions.map((x: any) => x.id)).toEqual([b]);
    const list = await s.call('GET', '/v1/replays?limit=1');
    expect(list.status).toBe(200);
    expect(list.body.items.map((x: any) => x.id)).toEqual([one.body.id]);
    expect(list.body.items[0].steps).toBeUndefined();
    const next = await s.call('GET', `/v1/replays?limit=1&cursor=${list.body.nextCursor}`);
    expect(next.body.items.map((x: any) => x.id)).toEqual([r.body.id]);
    const onV2 = await s.call('GET', '/v1/replays?modelVersion=v2');
    expect(onV2.body.items.every((x: any) => x.modelVersion === 'v2')).toBe(true);
  });

  it('refuses bad requests with a clear 4xx and changes nothing', async () => {
    const id = await play(s, { sampling: GREEDY });
    const fresh = (await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' })).body.id as string;
    const before = dumpDb(s.dataDir);
    const reports = countRows(s.dataDir, 'SELECT count(*) AS n FROM replays');
    const bad: Array<[string, string, unknown, number, string]> = [
      ['POST', '/v1/sessions/ses_nope/replay', { modelVersion: 'base' }, 404, "session 'ses_nope' not found"],
      ['POST', `/v1/sessions/${id}/replay`, { modelVersion: 'nope' }, 400, "body/modelVersion unknown model version 'nope'"],
      ['POST', `/v1/sessions/${id}/replay`, { modelVersion: 'base', maxSteps: 2 }, 400, 'the selection holds 3 recorded model calls in 1 session'],
      ['POST', `/v1/sessions/${id}/replay`, { modelVersion: 'base', maxSteps: 1001 }, 400, 'body/maxSteps'],
      ['POST', `/v1/sessions/${id}/replay`, { modelVersion: 'base', decoding: 'beam' }, 400, 'body/decoding'],
      ['POST', `/v1/sessions/${id}/replay`, { modelVersion: 'base', extra: 1 }, 400, 'extra'],
      ['POST', `/v1/sessions/${id}/replay`, {}, 400, 'modelVersion'],
      ['POST', `/v1/sessions/${fresh}/replay`, { modelVersion: 'base' }, 409, 'holds no recorded model call'],
      ['POST', '/v1/replays', { modelVersion: 'base', filter: { env: 'no-such-env' } }, 409, 'none of the 0 sessions'],
      ['POST', '/v1/replays', { modelVersion: 'base', filter: { since: '2030-01-01T00:00:00Z', until: '2029-01-01T00:00:00Z' } }, 400, 'body/filter/until must be after since'],
      ['POST', '/v1/replays', { modelVersion: 'base', filter: { since: 'yesterday' } }, 400, 'body/filter/since'],
      ['POST', '/v1/replays', { modelVersion: 'base', filter: { limit: 101 } }, 400, 'body/filter/limit'],
      ['GET', '/v1/replays/rpl_nope', undefined, 404, "replay 'rpl_nope' not found"],
      ['GET', '/v1/replays?cursor=rpl_000000000000000000000', undefined, 400, 'querystring/cursor'],
    ];
    for (const [method, path, body, status, detail] of bad) {
      const res = await s.call(method, path, body);
      expect(res.status, `${method} ${path} ${JSON.stringify(body)}`).toBe(status);
      expect(res.type).toContain('application/problem+json');
      expect(res.body.detail).toContain(detail);
    }
    expect(dumpDb(s.dataDir)).toBe(before);
    expect(countRows(s.dataDir, 'SELECT count(*) AS n FROM replays')).toBe(reports);
  });

  it('keeps tf.memory().numTensors flat over repeated replays', async () => {
    const id = await play(s, { sampling: { temperature: 1, topP: 1, topK: 0, seed: 3 }, memory: 'history_and_reflection' });
    const replay = async (modelVersion: string, decoding: string) => {
      const r = await s.call('POST', `/v1/sessions/${id}/replay`, { modelVersion, decoding });
      expect(r.status).toBe(201);
    };
    await replay('base', 'sampled'); // warm: every version loaded once
    await replay('v2', 'greedy');
    await replay('v3', 'greedy');
    const baseline = tf.memory().numTensors;
    for (let i = 0; i < 2; i++) {
      await replay('base', 'sampled');
      await replay('v2', 'greedy');
      await replay('v3', 'sampled');
    }
    expect(tf.memory().numTensors).toBe(baseline);
  });

  it('serves a step posted while a replay runs before the replay ends, and runs one replay at a time', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push(await play(s, { sampling: GREEDY, env: 'long' }));
    const other = (await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x', sampling: GREEDY })).body.id as string;
    const order: string[] = [];
    const long = s.call('POST', '/v1/replays', { modelVersion: 'v2', filter: { env: 'long' } }).then((r) => {
      order.push('replay');
      return r;
    });
    // the replay of 12 calls is running: a second one waits its turn (503), a step goes through
    const second = await s.call('POST', `/v1/sessions/${ids[0]}/replay`, { modelVersion: 'base' });
    expect(second.status).toBe(503);
    expect(second.body.type).toMatch(/overloaded$/);
    expect(second.headers.get('retry-after')).toBe('1');
    const step = await s.call('POST', `/v1/sessions/${other}/steps`, { attempt: 0, step: 0, observation: 'o', availableActions: ACTIONS });
    order.push('step');
    expect(step.status).toBe(200);
    expect((await long).status).toBe(201);
    expect(order).toEqual(['step', 'replay']);
    expect((await long).body.summary.calls).toBe(12);
  });
});

describe('tenants and remote versions', () => {
  let remote: http.Server;
  let s: TestServer;
  const seen: Array<Record<string, any>> = [];
  const A = { authorization: 'Bearer key-a' };
  const B = { authorization: 'Bearer key-b' };

  beforeAll(async () => {
    // An OpenAI-compatible server that answers every chat request with "down".
    remote = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        if (req.url?.endsWith('/models')) return void res.end(JSON.stringify({ object: 'list', data: [] }));
        const b = JSON.parse(body) as Record<string, any>;
        seen.push(b);
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({
          id: 'x', object: 'chat.completion', created: 0, model: b.model,
          choices: [{ index: 0, message: { role: 'assistant', content: 'down' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 2, completion_tokens: 1, total_tokens: 3 },
        }));
      });
    });
    await new Promise<void>((r) => remote.listen(0, '127.0.0.1', r));
    s = await startTestServer({ apiKeys: [{ key: 'key-a', tenant: 'a', admin: true }, { key: 'key-b', tenant: 'b', admin: false }] });
    const port = (remote.address() as AddressInfo).port;
    const reg = await s.call('POST', '/v1/models', { version: 'far', engine: 'openai', baseUrl: `http://127.0.0.1:${port}/v1`, model: 'm', maxRetries: 0 }, A);
    expect(reg.status).toBe(201);
  });
  afterAll(async () => {
    await s?.close();
    await new Promise((r) => remote?.close(r));
  });

  it("scopes replays to the key's tenant: another tenant's session and report are 404, and a batch reads only its own sessions", async () => {
    const id = await play(s, {}, A);
    await play(s, {}, B);
    const mine = await s.call('POST', `/v1/sessions/${id}/replay`, { modelVersion: 'test' }, A);
    expect(mine.status).toBe(201);
    // the test engine answers as it did: the same action at every step
    expect(mine.body.summary.agreement).toBe(1);
    expect((await s.call('POST', `/v1/sessions/${id}/replay`, { modelVersion: 'test' }, B)).status).toBe(404);
    expect((await s.call('GET', `/v1/replays/${mine.body.id}`, undefined, B)).status).toBe(404);
    expect((await s.call('GET', '/v1/replays', undefined, B)).body.items).toEqual([]);
    expect((await s.call('POST', `/v1/sessions/${id}/replay`, { modelVersion: 'test' })).status).toBe(401);
    const batch = await s.call('POST', '/v1/replays', { modelVersion: 'test' }, B);
    expect(batch.body.sessions.every((x: any) => x.id !== id)).toBe(true);
  });

  it('replays the actions on a remote version and refuses its logprobs with a 400', async () => {
    const id = await play(s, {}, A);
    const before = dumpDb(s.dataDir);
    const refused = await s.call('POST', `/v1/sessions/${id}/replay`, { modelVersion: 'far' }, A);
    expect(refused.status).toBe(400);
    expect(refused.body.errors[0].field).toBe('body/logprobs');
    expect(refused.body.detail).toContain('send logprobs: false');
    expect(seen).toHaveLength(0);
    const r = await s.call('POST', `/v1/sessions/${id}/replay`, { modelVersion: 'far', logprobs: false }, A);
    expect(r.status).toBe(201);
    expect(seen).toHaveLength(3);
    // the rendered chat prompt: the instructions as the system message, the first observation in the user message
    expect(seen[0]!.messages[0]).toEqual({ role: 'system', content: 'Reach the goal.' });
    expect(seen[0]!.messages[1].content).toContain('start');
    for (const x of r.body.steps) {
      expect(x.replayed).toMatchObject({ action: 'down', promptFrom: 'rendered', logprob: null, logprobs: null });
      expect(x.logprobDiff).toBeNull();
    }
    expect(r.body.summary).toMatchObject({ replayed: 3, scored: 0, meanLogprobDiff: null });
    expect(dumpDb(s.dataDir)).toBe(before);
  });
});
