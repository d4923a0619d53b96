/**
 * The session-scoped OpenAI-compatible endpoint (`/v1/sessions/{id}/openai/v1`) against real
 * servers on ephemeral ports over SQLite files: the official `openai` client pointed at a session's
 * base URL, turns recorded in the session's attempts, an attempt ended with a reward, the
 * reflection reaching the next attempt as memory, the refusals (4xx, nothing changed: an ended or
 * abandoned session, an attempt ended twice, also by two end calls at once), calls and ends that
 * come at once served in arrival order, a tiny builtin GPT whose recorded token ids decode to the
 * recorded texts, and a remote version (a plain HTTP server speaking OpenAI's wire format) that gets
 * tools and response_format passed through, and whose streamed turn is recorded whole when the
 * client disconnected during the model call. Real agents playing whole sessions:
 * session-agents.test.ts.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { decode } from '../../../src/model/tokenizer.js';
import { exportLines } from '../../../src/db/export.js';
import { dumpDb, startTestServer, tmpDir, writeTinyGptCheckpoint, type TestServer } from '../../helpers/index.js';

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server?.close();
});

/** A session on `s` (test engine unless the server says otherwise) and an OpenAI client at its base URL. */
async function open(s: TestServer, body: Record<string, unknown> = {}, apiKey = 'unused-without-keys', headers: Record<string, string> = {}) {
  const r = await s.call('POST', '/v1/sessions', { taskId: 'guess', instructions: 'Guess the number.', maxAttempts: 2, maxSteps: 4, ...body }, headers);
  expect(r.status).toBe(201);
  const id = r.body.id as string;
  const client = new OpenAI({ baseURL: `${s.url}/v1/sessions/${id}/openai/v1`, apiKey, maxRetries: 0 });
  return { id, client };
}

const rows = async (s: TestServer, id: string) => (await s.call('GET', `/v1/sessions/${id}/trajectory`)).body.steps as Array<Record<string, any>>;

describe('a session driven by an unmodified OpenAI client', () => {
  it('serves chat turns with the pinned version and records each exactly, then ends the attempt and brings the reflection to the next one', async () => {
    const { id, client } = await open(server);
    const messages = [
      { role: 'system' as const, content: 'You guess numbers.' },
      { role: 'user' as const, content: 'I think of a number from 1 to 4.' },
    ];
    const r = await client.chat.completions.create({ model: 'gpt-4o', messages, logprobs: true, temperature: 0.5 });
    expect(r.model).toBe('test');
    const out = r.choices[0]!.message.content!;
    expect(out).toMatch(/^move [0-3]$/);
    expect((r as unknown as { lamer: unknown }).lamer).toMatchObject({ session_id: id, attempt: 0, step: 0 });
    expect(r.choices[0]!.logprobs!.content!.map((t) => t.token).join('')).toBe(out);

    const second = [...messages, { role: 'assistant' as const, content: out }, { role: 'user' as const, content: 'Too low.' }];
    const r2 = await client.chat.completions.create({ model: 'gpt-4o', messages: second });
    expect((r2 as unknown as { lamer: { step: number } }).lamer.step).toBe(1);

    const t = await rows(server, id);
    expect(t.map((x) => [x.attempt, x.step, x.kind])).toEqual([[0, 0, 'action'], [0, 1, 'action']]);
    expect(t[0]).toMatchObject({ observation: 'You guess numbers.\nI think of a number from 1 to 4.', output: out, action: out, reward: 0, done: false });
    expect(t[0]!.prompt).toBe('You guess numbers.\nI think of a number from 1 to 4.');
    expect(t[0]!.outputTokenIds).toEqual([...Buffer.from(out, 'utf8')]);
    expect(t[0]!.logprobs).toHaveLength(t[0]!.outputTokenIds.length);
    expect(t[0]!.turn).toMatchObject({ api: 'chat', memory: null, stream: false, finishReason: 'stop', toolCalls: null });
    expect(t[0]!.turn.request).toEqual({ model: 'gpt-4o', messages, logprobs: true, temperature: 0.5 });
    expect(t[0]!.turn.sampling).toMatchObject({ temperature: 0.5, maxTokens: 256 });
    expect(t[0]!.turn.latencyMs).toBeGreaterThanOrEqual(0);
    // what the agent added since the model last spoke
    expect(t[1]!.observation).toBe('Too low.');
    expect(t[1]!.turn.request.messages).toEqual(second);

    const end = await server.call('POST', `/v1/sessions/${id}/attempts/0/end`, { reward: -1, success: false, observation: 'You lost.' });
    expect(end.status).toBe(200);
    expect(end.body.attemptResult).toEqual({ attempt: 0, success: false, return: -1, steps: 3, endReason: 'done' });
    expect(end.body.reflection.attempt).toBe(0);
    expect(end.body.session).toEqual({ status: 'active', next: { attempt: 1, step: 0 } });
    // the reflection prompt shows the turns as steps: what the agent added, then the model's output
    const refl = (await rows(server, id)).find((x) => x.kind === 'reflection')!;
    const out2 = r2.choices[0]!.message.content!;
    expect(refl.prompt).toBe(
      'Guess the number.\nObservation:\nYou guess numbers.\nI think of a number from 1 to 4.\nAction: ' + out +
        `\nObservation:\nToo low.\nAction: ${out2}\nObservation:\nYou lost.\nAttempt 0 ended: the task was not completed.` +
        '\nReflect on what went wrong and write a plan for the next attempt.\nReflection:',
    );
    const mem = await server.call('GET', `/v1/sessions/${id}/memory`);
    expect(mem.body.reflections.map((x: { attempt: number }) => x.attempt)).toEqual([0]);
    // a person corrects the reflection; the next attempt's memory carries the correction
    expect((await server.call('PUT', `/v1/sessions/${id}/memory/0`, { text: 'Start with 3.' })).status).toBe(200);

    const r3 = await client.chat.completions.create({ model: 'gpt-4o', messages });
    expect((r3 as unknown as { lamer: unknown }).lamer).toMatchObject({ attempt: 1, step: 0 });
    const t3 = (await rows(server, id)).filter((x) => x.attempt === 1)[0]!;
    const memory = 'Reflections on earlier attempts:\nAttempt 0: Start with 3.';
    expect(t3.turn.memory).toEqual({ placement: 'system', text: memory });
    expect(t3.prompt).toBe(`You guess numbers.\n${memory}\nI think of a number from 1 to 4.`);
    // the record keeps the messages as the agent sent them, without the memory
    expect(t3.turn.request.messages).toEqual(messages);

    const won = await server.call('POST', `/v1/sessions/${id}/attempts/1/end`, { reward: 1, success: true });
    expect(won.body.session).toEqual({ status: 'completed', next: null });
    const sess = await server.call('GET', `/v1/sessions/${id}`);
    expect(sess.body.passAtK).toEqual({ '1': false, '2': true });
    const stats = await server.call('GET', '/v1/stats');
    expect(stats.status).toBe(200);
    expect(JSON.stringify(stats.body)).toContain('"test"');
    // `lamer export` lines: the trajectory's rows, turns with their record
    const lines = [...exportLines(join(server.dataDir, 'lamer.db'))].filter((l) => l.sessionId === id);
    const all = await rows(server, id);
    expect(lines.map((l) => [l.attempt, l.step, l.kind])).toEqual(all.map((x) => [x.attempt, x.step, x.kind]));
    expect(lines[0]!.turn).toEqual(all[0]!.turn);
    expect(lines.filter((l) => l.turn).length).toBe(3);
  });

  it('puts the memory in front of the first user message for memoryPlacement user_prefix, and in front of a completions prompt', async () => {
    const { id, client } = await open(server, { memoryPlacement: 'user_prefix', memory: 'history_and_reflection' });
    expect((await server.call('GET', `/v1/sessions/${id}`)).body.memoryPlacement).toBe('user_prefix');
    await client.chat.completions.create({ model: 'x', messages: [{ role: 'system', content: 'S' }, { role: 'user', content: 'U' }] });
    expect((await server.call('POST', `/v1/sessions/${id}/attempts/0/end`, { observation: 'F' })).status).toBe(200);
    await client.chat.completions.create({ model: 'x', messages: [{ role: 'system', content: 'S' }, { role: 'user', content: 'U' }] });
    const c = await client.completions.create({ model: 'x', prompt: 'P', max_tokens: 4 });
    expect(c.choices[0]!.text).toMatch(/^move$|^mov|^move /);
    const t = (await rows(server, id)).filter((x) => x.attempt === 1);
    const mem = t[0]!.turn.memory.text as string;
    expect(mem.startsWith('Previous attempt 0 (not completed), last 1 steps:\nObservation:\nS\nU\nAction: move')).toBe(true);
    expect(mem).toContain('\nFinal observation:\nF\nReflections on earlier attempts:\nAttempt 0: ');
    expect(t[0]!.turn.memory.placement).toBe('user_prefix');
    expect(t[0]!.prompt).toBe(`S\n${mem}\n\nU`);
    expect(t[1]!.turn).toMatchObject({ api: 'completions', memory: { placement: 'prompt_prefix', text: mem } });
    expect(t[1]!.prompt).toBe(`${mem}\n\nP`);
    expect(t[1]!.observation).toBe('P');
  });

  it('streams a turn (recorded with stream: true) and lists the pinned version as the only model', async () => {
    const { id, client } = await open(server);
    const stream = await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'Go.' }], stream: true, stream_options: { include_usage: true } });
    let text = '';
    let usage: unknown = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    const t = await rows(server, id);
    expect(t).toHaveLength(1);
    expect(t[0]!.output).toBe(text);
    expect(t[0]!.turn.stream).toBe(true);
    expect(usage).toMatchObject({ completion_tokens: t[0]!.outputTokenIds.length });
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['test']);
  });

  it('refuses bad calls with a clear 4xx and changes nothing', async () => {
    const { id, client } = await open(server, { maxAttempts: 1, maxSteps: 1 });
    const before = dumpDb(server.dataDir);
    const missing = new OpenAI({ baseURL: `${server.url}/v1/sessions/ses_nope/openai/v1`, apiKey: 'k', maxRetries: 0 });
    await expect(missing.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({ status: 404 });
    const tools = await client.chat.completions
      .create({ model: 'x', messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'function', function: { name: 'f', parameters: {} } }] })
      .catch((e: unknown) => e);
    expect(tools).toBeInstanceOf(OpenAI.BadRequestError);
    expect((tools as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('tools');
    expect((tools as Error).message).toContain("builtin version, which has no tools");
    const format = await server.call('POST', `/v1/sessions/${id}/openai/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_object' } });
    expect(format.status).toBe(400);
    expect(format.body.error.param).toBe('response_format');
    const toolMsg = await server.call('POST', `/v1/sessions/${id}/openai/v1/chat/completions`, {
      messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] }],
    });
    expect(toolMsg.status).toBe(400);
    expect(toolMsg.body.error.param).toBe('messages.1.tool_calls');
    expect((await server.call('POST', `/v1/sessions/${id}/openai/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], n: 2 })).status).toBe(400);
    // a role OpenAI does not have, and an image part a builtin version cannot read
    const wizard = await server.call('POST', `/v1/sessions/${id}/openai/v1/chat/completions`, { messages: [{ role: 'wizard', content: 'x' }] });
    expect(wizard.status).toBe(400);
    expect(wizard.body.error.param).toBe('messages.0.role');
    const image = await server.call('POST', `/v1/sessions/${id}/openai/v1/chat/completions`, {
      messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }, { type: 'image_url', image_url: { url: 'data:,' } }] }],
    });
    expect(image.status).toBe(400);
    expect(image.body.error.param).toBe('messages.0.content.1.type');
    expect(image.body.detail).toContain('reads text parts only');
    // a user message without content (OpenAI allows null content on assistant messages only)
    const empty = await server.call('POST', `/v1/sessions/${id}/openai/v1/chat/completions`, { messages: [{ role: 'user', content: null }] });
    expect(empty.status).toBe(400);
    expect(empty.body.error.param).toBe('messages.0.content');
    // the Responses API and other OpenAI routes are not served (an agent framework must use chat/completions)
    expect((await server.call('POST', `/v1/sessions/${id}/openai/v1/responses`, { model: 'x', input: 'x' })).status).toBe(404);
    expect((await server.call('POST', `/v1/sessions/${id}/openai/v1/embeddings`, { model: 'x', input: 'x' })).status).toBe(404);
    expect((await server.call('POST', `/v1/sessions/${id}/attempts/0/end`, { reward: 1 })).status).toBe(409); // no turn yet
    expect((await server.call('POST', `/v1/sessions/${id}/attempts/1/end`, {})).status).toBe(400); // beyond maxAttempts
    expect(dumpDb(server.dataDir)).toBe(before);

    await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'x' }] });
    const afterTurn = dumpDb(server.dataDir);
    const full = await server.call('POST', `/v1/sessions/${id}/openai/v1/chat/completions`, { messages: [{ role: 'user', content: 'y' }] });
    expect(full.status).toBe(409);
    expect(full.body.detail).toContain('maxSteps of 1 turns; end it');
    expect(dumpDb(server.dataDir)).toBe(afterTurn);
    expect((await server.call('POST', `/v1/sessions/${id}/attempts/0/end`, { reward: 0 })).status).toBe(200);
    const ended = dumpDb(server.dataDir);
    const again = await server.call('POST', `/v1/sessions/${id}/attempts/0/end`, { reward: 0 });
    expect(again.status).toBe(409);
    const late = await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(late).toMatchObject({ status: 409 });
    expect((late as InstanceType<typeof OpenAI.APIError>).code).toBe('session-not-active');
    expect(dumpDb(server.dataDir)).toBe(ended);
  });

  it('refuses a call, a streamed call and an end on an abandoned session (409 session-not-active, nothing changed)', async () => {
    const { id, client } = await open(server);
    await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'x' }] });
    expect((await server.call('DELETE', `/v1/sessions/${id}`)).status).toBe(200);
    const before = dumpDb(server.dataDir);
    const plain = await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(plain).toMatchObject({ status: 409, code: 'session-not-active' });
    // a streamed call is refused before any event: a problem+json answer, which the SDK raises
    const streamed = await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'x' }], stream: true }).catch((e: unknown) => e);
    expect(streamed).toMatchObject({ status: 409, code: 'session-not-active' });
    const raw = await server.call('POST', `/v1/sessions/${id}/openai/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], stream: true });
    expect(raw.type).toMatch(/^application\/problem\+json/);
    expect(raw.body.detail).toContain('abandoned');
    expect((await server.call('POST', `/v1/sessions/${id}/openai/v1/completions`, { prompt: 'x' })).status).toBe(409);
    expect((await server.call('POST', `/v1/sessions/${id}/attempts/0/end`, { reward: 1 })).status).toBe(409);
    expect(dumpDb(server.dataDir)).toBe(before);
  });

  it('ends an attempt once when two end calls come at once: one 200, one 409 conflict, one final row', async () => {
    const { id, client } = await open(server);
    await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'x' }] });
    const both = await Promise.all([1, 2].map((reward) => server.call('POST', `/v1/sessions/${id}/attempts/0/end`, { reward })));
    expect(both.map((r) => r.status).sort()).toEqual([200, 409]);
    const lost = both.find((r) => r.status === 409)!;
    expect(lost.body.type).toMatch(/conflict$/);
    expect(lost.body.detail).toContain('attempt 0 already ended');
    const won = both.find((r) => r.status === 200)!;
    const t = await rows(server, id);
    expect(t.filter((x) => x.kind === 'action').map((x) => [x.attempt, x.step, x.done, x.reward])).toEqual([[0, 0, false, 0], [0, 1, true, won.body.attemptResult.return]]);
  });

  it('serves a call and an end that come at once in arrival order: the rows are those of one of the two orders', async () => {
    const { id, client } = await open(server);
    await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'first' }] });
    const [call, end] = await Promise.all([
      client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'second' }] }),
      server.call('POST', `/v1/sessions/${id}/attempts/0/end`, { reward: 1 }),
    ]);
    expect(end.status).toBe(200);
    const at = (call as unknown as { lamer: { attempt: number; step: number } }).lamer;
    const t = (await rows(server, id)).filter((x) => x.kind === 'action').map((x) => [x.attempt, x.step, x.observation, x.done]);
    if (at.attempt === 0) {
      // the call came first: the end is the attempt's third row
      expect(at.step).toBe(1);
      expect(t).toEqual([[0, 0, 'first', false], [0, 1, 'second', false], [0, 2, '', true]]);
    } else {
      // the end came first: the call is the first turn of attempt 1, with the reflection as memory
      expect(at).toEqual({ attempt: 1, step: 0, session_id: id, latency_ms: expect.any(Number) });
      expect(t).toEqual([[0, 0, 'first', false], [0, 1, '', true], [1, 0, 'second', false]]);
    }
  });

  it('serves two concurrent calls of one session one after the other, each at its own position', async () => {
    const { id, client } = await open(server);
    const [a, b] = await Promise.all([0, 1].map(() => client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'x' }] })));
    const steps = [a, b].map((r) => (r as unknown as { lamer: { step: number } }).lamer.step).sort();
    expect(steps).toEqual([0, 1]);
    expect((await rows(server, id)).map((x) => x.step)).toEqual([0, 1]);
  });
});

describe('tenant scoping', () => {
  let keyed: TestServer;
  beforeAll(async () => {
    keyed = await startTestServer({
      apiKeys: [
        { key: 'key-a', tenant: 'a', admin: false },
        { key: 'key-b', tenant: 'b', admin: false },
      ],
    });
  });
  afterAll(async () => {
    await keyed?.close();
  });

  it("needs a key, and another tenant's session is 404 with nothing recorded", async () => {
    const { id, client } = await open(keyed, {}, 'key-a', { authorization: 'Bearer key-a' });
    const before = dumpDb(keyed.dataDir);
    const other = new OpenAI({ baseURL: `${keyed.url}/v1/sessions/${id}/openai/v1`, apiKey: 'key-b', maxRetries: 0 });
    await expect(other.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({ status: 404 });
    expect((await keyed.call('POST', `/v1/sessions/${id}/attempts/0/end`, {}, { authorization: 'Bearer key-b' })).status).toBe(404);
    expect((await keyed.call('POST', `/v1/sessions/${id}/openai/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }] })).status).toBe(401);
    expect(dumpDb(keyed.dataDir)).toBe(before);
    const r = await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'x' }] });
    expect(r.choices[0]!.message.content).toMatch(/^move/);
  });
});

describe('a builtin version', () => {
  let builtin: TestServer;
  beforeAll(async () => {
    const dir = tmpDir('lamer-agent-');
    await writeTinyGptCheckpoint(join(dir, 'base-model'), 7);
    builtin = await startTestServer({ engine: 'builtin', tfjsBackend: 'wasm', baseModelDir: join(dir, 'base-model'), dataDir: join(dir, 'data') });
  }, 120_000);
  afterAll(async () => {
    await builtin?.close();
  });

  it('refuses a max_tokens over half the tiny model\'s context (192) with a 400 naming the field, recording nothing', async () => {
    const { id, client } = await open(builtin, { sampling: { seed: 4 } });
    const before = await builtin.call('GET', `/v1/sessions/${id}/trajectory`);
    const cases: Array<[string, OpenAI.ChatCompletionCreateParamsNonStreaming]> = [
      ['max_tokens', { model: 'x', messages: [{ role: 'user', content: 'Go' }], max_tokens: 193 }],
      ['max_completion_tokens', { model: 'x', messages: [{ role: 'user', content: 'Go' }], max_tokens: 8, max_completion_tokens: 1_000_000_000 }],
    ];
    for (const [field, body] of cases) {
      const err = await client.chat.completions.create(body).catch((e: unknown) => e);
      expect(err, field).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe(field);
      expect((err as Error).message).toMatch(new RegExp(`^400 body/${field} is \\d+: model version base generates at most 192 tokens \\(half its context of 384\\); send at most 192$`));
    }
    const text = await builtin.call('POST', `/v1/sessions/${id}/openai/v1/completions`, { model: 'x', prompt: 'Go', max_tokens: 10_000 });
    expect([text.status, text.body.error?.param]).toEqual([400, 'max_tokens']);
    expect(await builtin.call('GET', `/v1/sessions/${id}/trajectory`)).toMatchObject({ status: 200, body: before.body });
    // at the bound, and with the default (256 for chat, cut to the bound), the turn is served
    const at = await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'Go' }], max_tokens: 192 });
    expect(at.usage!.completion_tokens).toBeLessThanOrEqual(192);
    const byDefault = await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'Go' }] });
    expect(byDefault.usage!.completion_tokens).toBeLessThanOrEqual(192);
    expect((await rows(builtin, id)).filter((x) => x.turn)).toHaveLength(2);
  });

  it('records token ids that decode to the recorded prompt and output, and its reflection prompt shows the turns', async () => {
    const { id, client } = await open(builtin, { sampling: { seed: 4 } });
    const r = await client.chat.completions.create({ model: 'x', messages: [{ role: 'system', content: 'Rules.' }, { role: 'user', content: 'Go' }], max_tokens: 8 });
    await client.completions.create({ model: 'x', prompt: 'Then', max_tokens: 6 });
    const end = await builtin.call('POST', `/v1/sessions/${id}/attempts/0/end`, { reward: 0, observation: 'Lost.' });
    expect(end.status).toBe(200);
    const t = await rows(builtin, id);
    const turns = t.filter((x) => x.turn);
    expect(turns).toHaveLength(2);
    expect(turns[0]!.output).toBe(r.choices[0]!.message.content);
    for (const x of turns) {
      expect(decode(x.outputTokenIds)).toBe(x.output);
      expect(decode(x.promptTokenIds)).toBe(x.prompt);
      expect(x.logprobs).toHaveLength(x.outputTokenIds.length);
      expect(x.turn.sampling.seed).toEqual(expect.any(Number));
    }
    // the reflection by the session's version (its prompt cut to the tiny model's context)
    const refl = t.find((x) => x.kind === 'reflection')!;
    expect(refl.prompt.endsWith('\nAttempt 0 ended: the task was not completed.\nReflect on what went wrong and write a plan for the next attempt.\nReflection:')).toBe(true);
    expect(decode(refl.promptTokenIds)).toBe(refl.prompt);
    expect(decode(refl.outputTokenIds)).toBe(refl.output);
  });
});

describe('a remote version', () => {
  let remote: http.Server;
  let agent: TestServer;
  const seen: Array<Record<string, any>> = [];
  let release: () => void = () => {};
  const held = new Promise<void>((r) => (release = r));

  beforeAll(async () => {
    /** The remote's answer to every chat request: one tool call, with token ids. */
    const answer = (res: http.ServerResponse, b: Record<string, any>) => {
      const call = { id: 'call_1', type: 'function', function: { name: 'guess', arguments: '{"n":3}' } };
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          id: 'x', object: 'chat.completion', created: 0, model: b.model,
          choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [call] }, finish_reason: 'tool_calls', token_ids: [7, 8, 9],
            logprobs: { content: [7, 8, 9].map((t) => ({ token: `token_id:${t}`, logprob: -0.5, bytes: null, top_logprobs: [] })) } }],
          prompt_token_ids: [1, 2],
          usage: { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 },
        }),
      );
    };
    // An OpenAI-compatible server; a request whose last message is HOLD is answered once the test releases it.
    remote = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        if (req.url?.endsWith('/models')) return void res.end(JSON.stringify({ object: 'list', data: [] }));
        const b = JSON.parse(body) as Record<string, any>;
        seen.push(b);
        if (b.messages.at(-1)?.content === 'HOLD') return void held.then(() => answer(res, b));
        answer(res, b);
      });
    });
    await new Promise<void>((r) => remote.listen(0, '127.0.0.1', r));
    const port = (remote.address() as AddressInfo).port;
    agent = await startTestServer({
      engine: 'openai',
      openai: { baseUrl: `http://127.0.0.1:${port}/v1`, model: 'remote-m', kind: 'vllm', concurrency: 2, timeoutMs: 10_000, maxRetries: 0, maxActionTokens: 16, maxReflectionTokens: 16 },
    });
  });
  afterAll(async () => {
    await agent?.close();
    await new Promise((r) => remote?.close(r));
  });

  it('passes tools and response_format through, returns the tool calls and records them with the remote token ids', async () => {
    const { id, client } = await open(agent);
    const tools = [{ type: 'function' as const, function: { name: 'guess', parameters: { type: 'object', properties: { n: { type: 'integer' } } } } }];
    const messages = [{ role: 'user' as const, content: 'Guess.' }];
    const r = await client.chat.completions.create({ model: 'x', messages, tools, tool_choice: 'auto', response_format: { type: 'json_object' }, max_tokens: 20 });
    expect(r.choices[0]!.finish_reason).toBe('tool_calls');
    expect(r.choices[0]!.message.content).toBeNull();
    expect(r.choices[0]!.message.tool_calls).toEqual([{ id: 'call_1', type: 'function', function: { name: 'guess', arguments: '{"n":3}' } }]);
    expect(seen.at(-1)).toMatchObject({ model: 'remote-m', messages, tools, tool_choice: 'auto', response_format: { type: 'json_object' }, max_tokens: 20, return_token_ids: true });
    const t = (await rows(agent, id))[0]!;
    expect(t).toMatchObject({ promptTokenIds: [1, 2], outputTokenIds: [7, 8, 9], logprobs: [-0.5, -0.5, -0.5], output: '' });
    expect(JSON.parse(t.action)).toEqual(r.choices[0]!.message.tool_calls);
    expect(t.turn).toMatchObject({ finishReason: 'tool_calls', toolCalls: r.choices[0]!.message.tool_calls, request: { tools, response_format: { type: 'json_object' } } });
    // completions are for builtin versions only
    const c = await agent.call('POST', `/v1/sessions/${id}/openai/v1/completions`, { prompt: 'x' });
    expect(c.status).toBe(400);
  });

  it("puts an agent's tool-calling turns in the training batch of the remote version, with the tools sent and the tool calls returned", async () => {
    const { id, client } = await open(agent, { maxAttempts: 1, taskId: 'tools-batch' });
    const tools = [{ type: 'function' as const, function: { name: 'guess', parameters: { type: 'object', properties: { n: { type: 'integer' } } } } }];
    const first = await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'Guess.' }], tools, temperature: 0.3 });
    const call = first.choices[0]!.message.tool_calls!;
    const messages = [
      { role: 'user' as const, content: 'Guess.' },
      { role: 'assistant' as const, content: null, tool_calls: call },
      { role: 'tool' as const, tool_call_id: call[0]!.id, content: 'Too low.' },
    ];
    await client.chat.completions.create({ model: 'x', messages, tools, tool_choice: 'required' });
    expect((await agent.call('POST', `/v1/sessions/${id}/attempts/0/end`, { reward: 1, success: true })).status).toBe(200);
    const job = await agent.call('POST', '/v1/training/jobs', { algorithm: 'grpo', data: { taskIds: ['tools-batch'] } });
    expect(job.status).toBe(201);
    let j = job.body;
    for (let i = 0; i < 600 && (j.status === 'queued' || j.status === 'running'); i++) {
      await new Promise((r) => setTimeout(r, 20));
      j = (await agent.call('GET', `/v1/training/jobs/${job.body.id}`)).body;
    }
    expect(j).toMatchObject({ status: 'succeeded', resultVersion: null });
    const lines = readFileSync(join(agent.dataDir, j.dataset.path), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((l) => [l.sessionId, l.attempt, l.step, l.kind])).toEqual([[id, 0, 0, 'action'], [id, 0, 1, 'action']]);
    expect(lines[0]).toMatchObject({ messages: [{ role: 'user', content: 'Guess.' }], passthrough: { tools }, toolCalls: call, output: '', outputTokenIds: [7, 8, 9] });
    expect(lines[0].sampling).toMatchObject({ temperature: 0.3 });
    // the second turn: the tool message and the agent's tool_choice went to the remote as sent
    expect(lines[1]).toMatchObject({ messages, passthrough: { tools, tool_choice: 'required' }, toolCalls: call });
    // the last turn earned the attempt's reward, the first its discounted return (GRPO: gamma_step only)
    expect(lines[1].return).toBe(1);
    expect(lines[0].return).toBeCloseTo(j.hyperparameters.gammaStep ?? 0.95, 12);
  });

  it('records a streamed turn whose client disconnected while the model was answering', async () => {
    const { id, client } = await open(agent);
    const n = seen.length;
    const abort = new AbortController();
    const call = client.chat.completions
      .create({ model: 'x', messages: [{ role: 'user', content: 'HOLD' }], stream: true }, { signal: abort.signal })
      .catch((e: unknown) => e);
    // the remote has the request: the server is inside the model call; the client goes away
    while (seen.length === n) await new Promise((r) => setTimeout(r, 10));
    abort.abort();
    expect(await call).toBeInstanceOf(OpenAI.APIUserAbortError);
    release();
    let t = await rows(agent, id);
    for (let i = 0; i < 500 && t.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
      t = await rows(agent, id);
    }
    // the whole answer, as a connected client would have streamed it
    expect(t).toHaveLength(1);
    expect(t[0]).toMatchObject({ attempt: 0, step: 0, observation: 'HOLD', outputTokenIds: [7, 8, 9], logprobs: [-0.5, -0.5, -0.5] });
    expect(t[0]!.turn).toMatchObject({ stream: true, finishReason: 'tool_calls', toolCalls: [{ id: 'call_1', type: 'function' }] });
    // the session goes on at the next position
    const next = await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'Again.' }] });
    expect((next as unknown as { lamer: { step: number } }).lamer.step).toBe(1);
  });
});
