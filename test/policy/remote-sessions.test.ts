/**
 * Two real lamer-servers on ephemeral ports, no mock of the wire: server A serves a tiny
 * builtin GPT on its OpenAI-compatible endpoint; server B runs with LAMER_ENGINE=openai and uses A
 * as its remote engine (kind `lamer`: guided_choice, token ids). An environment plays whole
 * 3-attempt sessions through B (fail, reflect, fail, reflect, succeed), and every model call B
 * recorded carries the token ids and logprobs that A gives for the same request.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BOS } from '../../src/model/tokenizer.js';
import { startTestServer, tmpDir, writeTinyGptCheckpoint, type TestServer } from '../helpers/index.js';

const DOORS = ['door 1', 'door 2', 'door 3'];
let dir: string;
let a: TestServer;
let b: TestServer;

beforeAll(async () => {
  dir = tmpDir('lamer-remote-');
  await writeTinyGptCheckpoint(join(dir, 'base-model'), 5);
  a = await startTestServer({ engine: 'builtin', tfjsBackend: 'wasm', baseModelDir: join(dir, 'base-model'), dataDir: join(dir, 'a') });
  b = await startTestServer({
    engine: 'openai',
    dataDir: join(dir, 'b'),
    openai: {
      baseUrl: `${a.url}/openai/v1`, model: 'base', kind: 'lamer', concurrency: 4, timeoutMs: 30_000, maxRetries: 1,
      maxActionTokens: 12, maxReflectionTokens: 24,
    },
  });
}, 120_000);
afterAll(async () => {
  await b?.close();
  await a?.close();
});

/** One session through B: attempts 0 and 1 fail whatever the agent does, attempt 2 succeeds. */
async function play(seed: number): Promise<string> {
  const s = await b.call('POST', '/v1/sessions', {
    taskId: 'doors:1', instructions: 'Open the door with the prize.', env: 'doors', maxAttempts: 3, maxSteps: 3,
    sampling: { temperature: 1, topP: 1, topK: 0, seed },
  });
  expect(s.status).toBe(201);
  const id = s.body.id as string;
  for (let attempt = 0; attempt < 3; attempt++) {
    // step 0: free text (no availableActions); step 1: a constrained choice; step 2: the end
    const r0 = await b.call('POST', `/v1/sessions/${id}/steps`, { attempt, step: 0, observation: 'A hall with three doors.' });
    expect(r0.status).toBe(200);
    const r1 = await b.call('POST', `/v1/sessions/${id}/steps`, { attempt, step: 1, observation: 'Pick a door.', availableActions: DOORS });
    expect(r1.status).toBe(200);
    expect(DOORS).toContain(r1.body.action);
    const win = attempt === 2;
    const r2 = await b.call('POST', `/v1/sessions/${id}/steps`, { attempt, step: 2, observation: win ? 'Prize!' : 'Empty.', reward: win ? 10 : -1, done: true, success: win });
    expect(r2.status).toBe(200);
    if (!win) {
      expect(r2.body.reflection.attempt).toBe(attempt);
      expect(r2.body.session.next).toEqual({ attempt: attempt + 1, step: 0 });
    } else {
      expect(r2.body.session.status).toBe('completed');
    }
  }
  return id;
}

interface Row {
  attempt: number; step: number; kind: string; prompt: string; output: string; available_actions: string | null;
  prompt_token_ids: string | null; output_token_ids: string | null; logprobs: string | null; engine_record: string | null;
}

describe('a lamer-server using another as its remote engine', () => {
  it('plays 3-attempt sessions (fail, reflect, fail, reflect, succeed) whose records match the serving server', async () => {
    const ids = [await play(11), await play(12)];
    for (const id of ids) {
      const sess = await b.call('GET', `/v1/sessions/${id}`);
      expect(sess.body.passAtK).toEqual({ '1': false, '2': false, '3': true });
      expect(sess.body.reflections.map((r: { attempt: number }) => r.attempt)).toEqual([0, 1]);
      const traj = await b.call('GET', `/v1/sessions/${id}/trajectory`);
      expect(traj.status).toBe(200);
      const calls = traj.body.steps.filter((s: { output: string | null }) => s.output !== null);
      expect(calls.length).toBe(3 * 2 + 2); // two actions per attempt, two reflections
      for (const s of calls) {
        expect(s.outputTokenIds.length).toBeGreaterThan(0);
        expect(s.logprobs.length).toBe(s.outputTokenIds.length);
        expect(s.promptTokenIds[0]).toBe(BOS);
      }
    }
    // Replay every recorded model call on A with the messages and sampling B sent: same tokens, same logprobs.
    const db = new Database(join(dir, 'b', 'lamer.db'), { readonly: true });
    const rows = db.prepare('SELECT * FROM steps WHERE output IS NOT NULL ORDER BY id').all() as Row[];
    db.close();
    expect(rows.length).toBe(16);
    for (const r of rows) {
      const rec = JSON.parse(r.engine_record!);
      expect(rec).toMatchObject({ engine: 'openai', model: 'base', tries: 1, available: { promptTokenIds: true, outputTokenIds: true, logprobs: true } });
      expect(rec.messages[0]).toEqual({ role: 'system', content: 'Open the door with the prize.' });
      // the chat template of A joins the messages with "\n": the builtin prompt, byte for byte
      const promptIds = JSON.parse(r.prompt_token_ids!) as number[];
      expect(promptIds).toEqual([BOS, ...Buffer.from(r.prompt, 'utf8')]);
      const actions = r.available_actions ? (JSON.parse(r.available_actions) as string[]) : null;
      if (actions) expect(rec.constraint).toBe('guided_choice');
      const replay = await a.call('POST', '/openai/v1/chat/completions', {
        model: 'base', messages: rec.messages, temperature: rec.sampling.temperature, top_p: rec.sampling.topP, top_k: rec.sampling.topK,
        seed: rec.sampling.seed, max_tokens: rec.sampling.maxTokens, logprobs: true, return_token_ids: true,
        ...(actions ? { guided_choice: actions } : {}),
      });
      expect(replay.status).toBe(200);
      const c = replay.body.choices[0];
      expect(JSON.parse(r.output_token_ids!)).toEqual(c.token_ids);
      expect(replay.body.prompt_token_ids).toEqual(promptIds);
      const lps = JSON.parse(r.logprobs!) as number[];
      const want = c.logprobs.content.map((t: { logprob: number }) => t.logprob) as number[];
      expect(lps.length).toBe(want.length);
      lps.forEach((x, i) => expect(x).toBeCloseTo(want[i]!, 5));
      if (r.kind === 'reflection' || actions) expect(r.output).toBe(c.message.content);
    }
  }, 120_000);

  it('lists the remote version with its server (no API key shown)', async () => {
    const r = await b.call('GET', '/v1/models/base');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ engine: 'openai', loaded: true, remote: { baseUrl: `${a.url}/openai/v1`, model: 'base', kind: 'lamer', hasApiKey: false } });
    const list = await a.call('GET', '/openai/v1/models');
    expect(list.body.data.map((m: { id: string }) => m.id)).toEqual(['base']);
  });

  it('a training job on the remote version writes the LaMer batch for an external trainer; the result registers as a new remote version', async () => {
    const job = await b.call('POST', '/v1/training/jobs', { algorithm: 'lamer' });
    expect(job.status).toBe(201);
    let j = job.body;
    for (let i = 0; i < 100 && (j.status === 'queued' || j.status === 'running'); i++) {
      await new Promise((r) => setTimeout(r, 50));
      j = (await b.call('GET', `/v1/training/jobs/${job.body.id}`)).body;
    }
    expect(j.status).toBe('succeeded');
    expect(j.resultVersion).toBeNull();
    const meta = JSON.parse(readFileSync(join(dir, 'b', 'datasets', job.body.id, 'meta.json'), 'utf8'));
    expect(meta).toMatchObject({ schemaVersion: 1, algorithm: 'lamer', baseVersion: 'base', remote: { model: 'base', kind: 'lamer' } });
    const lines = readFileSync(join(dir, 'b', 'datasets', job.body.id, 'batch.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.length).toBeGreaterThan(0);
    // every line carries what the trajectory shows, and the advantage the job wrote back
    for (const l of lines) {
      const t = (await b.call('GET', `/v1/sessions/${l.sessionId}/trajectory`)).body.steps.find(
        (s: { attempt: number; step: number; kind: string }) => s.attempt === l.attempt && s.step === l.step && s.kind === l.kind,
      );
      expect(l.outputTokenIds).toEqual(t.outputTokenIds);
      expect(l.oldLogprobs).toEqual(t.logprobs);
      expect(l.promptTokenIds).toEqual(t.promptTokenIds);
      expect(l.advantage).toBeCloseTo(t.advantage, 12);
      expect(l.return).toBeCloseTo(t.return, 12);
      expect(l.messages[0].role).toBe('system');
    }
    expect(new Set(lines.map((l) => l.kind))).toEqual(new Set(['action', 'reflection']));
    // a checkpoint trained elsewhere from this batch is registered with its parent, activated, and pinned by new sessions
    const reg = await b.call('POST', '/v1/models', { version: 'lamer-ext-1', parent: 'base', engine: 'openai', baseUrl: `${a.url}/openai/v1`, model: 'base', kind: 'lamer' });
    expect(reg.status).toBe(201);
    expect((await b.call('POST', '/v1/models/lamer-ext-1/activate')).body).toMatchObject({ status: 'active', parent: 'base' });
    const s = await b.call('POST', '/v1/sessions', { taskId: 'doors:1', instructions: 'Open the door with the prize.' });
    expect(s.body.modelVersion).toBe('lamer-ext-1');
    const r = await b.call('POST', `/v1/sessions/${s.body.id}/steps`, { attempt: 0, step: 0, observation: 'Pick a door.', availableActions: DOORS });
    expect(r.status).toBe(200);
    expect(r.body.modelVersion).toBe('lamer-ext-1');
  }, 60_000);

  it('a local training job never trains on sessions of a remote version (their token ids are another model\'s)', async () => {
    // A registers itself as a remote version and plays a session through it
    const reg = await a.call('POST', '/v1/models', { version: 'self', engine: 'openai', baseUrl: `${a.url}/openai/v1`, model: 'base', kind: 'lamer' });
    expect(reg.status).toBe(201);
    for (const win of [true, false]) {
      const s = await a.call('POST', '/v1/sessions', { taskId: 'doors:2', instructions: 'Open.', modelVersion: 'self', maxAttempts: 1, sampling: { temperature: 1, topP: 1, topK: 0, seed: 3 } });
      expect((await a.call('POST', `/v1/sessions/${s.body.id}/steps`, { attempt: 0, step: 0, observation: 'Doors.', availableActions: DOORS })).status).toBe(200);
      expect((await a.call('POST', `/v1/sessions/${s.body.id}/steps`, { attempt: 0, step: 1, observation: 'End.', reward: win ? 1 : 0, done: true, success: win })).status).toBe(200);
    }
    const job = await a.call('POST', '/v1/training/jobs', { algorithm: 'grpo', baseVersion: 'base' });
    expect(job.status).toBe(201);
    let j = job.body;
    for (let i = 0; i < 100 && (j.status === 'queued' || j.status === 'running'); i++) {
      await new Promise((r) => setTimeout(r, 50));
      j = (await a.call('GET', `/v1/training/jobs/${job.body.id}`)).body;
    }
    expect(j.status).toBe('failed');
    expect(j.error).toContain('no training samples: 0 sessions');
  }, 60_000);

  it('a prompt longer than the serving model\'s context: the record is the text it kept, with the characters cut', async () => {
    const s = await b.call('POST', '/v1/sessions', { taskId: 'long:1', instructions: 'Open the door with the prize.', maxAttempts: 1, maxSteps: 2 });
    const r = await b.call('POST', `/v1/sessions/${s.body.id}/steps`, { attempt: 0, step: 0, observation: 'y'.repeat(3000) });
    expect(r.status).toBe(200);
    const traj = await b.call('GET', `/v1/sessions/${s.body.id}/trajectory`);
    const row = traj.body.steps[0];
    expect(row.promptTokenIds[0]).toBe(BOS);
    expect(Buffer.from(row.promptTokenIds.slice(1)).toString('utf8')).toBe(row.prompt);
    expect(row.promptTruncatedChars).toBeGreaterThan(0);
    expect(row.prompt.length + row.promptTruncatedChars).toBeGreaterThan(3000);
  }, 60_000);

  it('the builtin endpoint cuts at a stop string: text, token ids and logprobs are the prefix before it', async () => {
    const req = { model: 'base', prompt: 'Observation:\nThree doors.\nAction:', seed: 9, temperature: 1, max_tokens: 24, logprobs: 0, return_token_ids: true };
    const full = await a.call('POST', '/openai/v1/completions', req);
    expect(full.status).toBe(200);
    const c = full.body.choices[0];
    expect(c.token_ids.length).toBeGreaterThan(3);
    const text: string = c.text;
    const stop = [...text].find((ch, i) => i >= 2 && Buffer.byteLength(ch) === 1 && ch.trim() !== '');
    if (stop === undefined) return; // nothing printable to stop at (a random tiny model)
    const cutBytes = Buffer.byteLength(text.slice(0, text.indexOf(stop)));
    const cut = await a.call('POST', '/openai/v1/completions', { ...req, stop });
    const k = cut.body.choices[0];
    expect(k.text).toBe(text.slice(0, text.indexOf(stop)));
    expect(k.finish_reason).toBe('stop');
    expect(k.token_ids).toEqual(c.token_ids.slice(0, cutBytes));
    expect(k.logprobs.token_logprobs).toEqual(c.logprobs.token_logprobs.slice(0, cutBytes));
  });
});

describe('the serving server (builtin) against hostile requests', () => {
  it('names body/guided_choice/<i> for a guided_choice entry too long for the model', async () => {
    const long = 'x'.repeat(300); // 301 tokens with EOS; the tiny model takes candidates of at most 192
    const r = await a.call('POST', '/openai/v1/chat/completions', { model: 'base', messages: [{ role: 'user', content: 'Pick.' }], guided_choice: ['door 1', long] });
    expect(r.status).toBe(400);
    expect(r.body.errors).toEqual([{ field: 'body/guided_choice/1', message: 'is 301 tokens (its tokens + EOS); model version base takes candidates of at most 192 tokens (half its context of 384)' }]);
    expect(JSON.stringify(r.body)).not.toContain('availableActions');
  });

  it('keeps a damaged checkpoint\'s folder and the loader\'s message out of the answers: the version and "an operator must look"', async () => {
    const { cpSync, truncateSync } = await import('node:fs');
    const broken = join(dir, 'checkpoints', 'v-broken');
    cpSync(join(dir, 'base-model'), broken, { recursive: true });
    truncateSync(join(broken, 'weights.bin'), 100);
    await a.app.repos.models.insert({
      version: 'v-broken', parent: 'base', jobId: null, checkpointDir: broken, status: 'candidate', metrics: {}, createdAt: Date.now(), engine: 'builtin', engineConfig: null,
    });
    const want = "model version 'v-broken' cannot be loaded (its checkpoint is missing or damaged); an operator must check the server log";
    const chat = await a.call('POST', '/openai/v1/chat/completions', { model: 'v-broken', messages: [{ role: 'user', content: 'Pick.' }] });
    expect(chat.status).toBe(503);
    expect(chat.body).toMatchObject({ type: 'https://lamer-server.dev/problems/engine-unavailable', detail: want });
    const s = await a.call('POST', '/v1/sessions', { taskId: 't', instructions: 'Play.', modelVersion: 'v-broken' });
    const answers = [chat.body];
    if (s.status === 201) {
      const step = await a.call('POST', `/v1/sessions/${s.body.id}/steps`, { attempt: 0, step: 0, observation: 'Three doors.', availableActions: DOORS });
      expect(step.status).toBe(503);
      expect(step.body.detail).toBe(want);
      answers.push(step.body);
    } else {
      expect(s.status).toBe(503);
      expect(s.body.detail).toBe(want);
      answers.push(s.body);
    }
    const activate = await a.call('POST', '/v1/models/v-broken/activate');
    expect(activate.status).toBe(503);
    expect(activate.body.detail).toBe(want);
    answers.push(activate.body);
    for (const body of answers) {
      const text = JSON.stringify(body);
      expect(text).not.toContain(dir);
      expect(text).not.toContain('checkpoints/');
      expect(text).not.toMatch(/shape|weights\.bin|ENOENT/i);
    }
  });
});
