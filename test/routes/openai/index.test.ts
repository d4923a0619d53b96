/**
 * The OpenAI-compatible endpoint (`/openai/v1`) through the official `openai` npm client against a
 * real server on an ephemeral port (test engine: byte tokens, each logprob log(1/256)).
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { startTestServer, tmpDir, writeTinyGptCheckpoint, type TestServer } from '../../helpers/index.js';
import { MAX_TEMPERATURE } from '../../../src/agent/schemas.js';

const LOG_UNIFORM = Math.log(1 / 256);
let server: TestServer;
let client: OpenAI;

beforeAll(async () => {
  server = await startTestServer();
  client = new OpenAI({ baseURL: `${server.url}/openai/v1`, apiKey: 'unused-without-keys', maxRetries: 0 });
});
afterAll(async () => {
  await server?.close();
});

describe('/openai/v1 with the official client', () => {
  it('lists the versions served here', async () => {
    const page = await client.models.list();
    expect(page.data.map((m) => m.id)).toEqual(['test']);
    expect(page.data[0]).toMatchObject({ object: 'model', owned_by: 'lamer-server' });
  });

  it('answers a chat completion with logprobs, token ids and usage', async () => {
    const r = await client.chat.completions.create({
      model: 'test',
      messages: [
        { role: 'system', content: 'Play.' },
        { role: 'user', content: 'Observation: x\nAction:' },
      ],
      logprobs: true,
      seed: 3,
      // vLLM-style extension fields pass through the SDK untouched
      ...({ return_token_ids: true } as object),
    });
    expect(r.object).toBe('chat.completion');
    const c = r.choices[0]!;
    expect(c.message.role).toBe('assistant');
    expect(c.message.content).toMatch(/^move [0-3]$/);
    expect(c.finish_reason).toBe('stop');
    const bytes = [...Buffer.from(c.message.content!, 'utf8')];
    expect(c.logprobs!.content!.map((t) => t.bytes)).toEqual(bytes.map((b) => [b]));
    expect(c.logprobs!.content!.map((t) => t.token).join('')).toBe(c.message.content);
    for (const t of c.logprobs!.content!) expect(t.logprob).toBeCloseTo(LOG_UNIFORM, 12);
    const raw = r as unknown as { prompt_token_ids: number[]; choices: Array<{ token_ids: number[] }> };
    expect(raw.choices[0]!.token_ids).toEqual(bytes);
    // chat template: the messages joined with a newline
    expect(raw.prompt_token_ids).toEqual([...Buffer.from('Play.\nObservation: x\nAction:', 'utf8')]);
    expect(r.usage).toEqual({ prompt_tokens: raw.prompt_token_ids.length, completion_tokens: bytes.length, total_tokens: raw.prompt_token_ids.length + bytes.length });
  });

  it('keeps the answer inside guided_choice and honours stop and max_tokens', async () => {
    const choices = ['door 1', 'door 2', 'door 3'];
    const r = await client.chat.completions.create({
      model: 'test',
      messages: [{ role: 'user', content: 'Pick a door.' }],
      ...({ guided_choice: choices } as object),
    });
    expect(choices).toContain(r.choices[0]!.message.content);
    const s = await client.completions.create({ model: 'test', prompt: 'Say:', stop: [' '], logprobs: 0 });
    expect(s.choices[0]!.text).toBe('move');
    expect(s.choices[0]!.finish_reason).toBe('stop');
    expect(s.choices[0]!.logprobs!.tokens).toEqual(['m', 'o', 'v', 'e']);
    expect(s.choices[0]!.logprobs!.text_offset).toEqual([0, 1, 2, 3]);
    const l = await client.completions.create({ model: 'test', prompt: 'Say:', max_tokens: 2 });
    expect(l.choices[0]).toMatchObject({ text: 'mo', finish_reason: 'length' });
  });

  it('streams the answer as server-sent events', async () => {
    const stream = await client.chat.completions.create({
      model: 'test',
      messages: [{ role: 'user', content: 'Go.' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let finish: string | null = null;
    let usage: unknown = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    const plain = await client.chat.completions.create({ model: 'test', messages: [{ role: 'user', content: 'Go.' }] });
    expect(text).toBe(plain.choices[0]!.message.content);
    expect(finish).toBe('stop');
    expect(usage).toEqual(plain.usage);
  });

  it('streams a text completion as one choice chunk and the usage chunk, the same answer as without stream', async () => {
    const body = { model: 'test', prompt: 'Say:', seed: 5, logprobs: 0, return_token_ids: true };
    const plain = await server.call('POST', '/openai/v1/completions', body);
    expect(plain.status).toBe(200);
    const r = await fetch(`${server.url}/openai/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
    });
    expect(r.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const events = (await r.text()).split('\n\n').filter((e) => e !== '').map((e) => e.replace(/^data: /, ''));
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e) as Record<string, any>);
    expect(chunks).toHaveLength(2);
    for (const c of chunks) expect(c).toMatchObject({ object: 'text_completion', model: 'test', system_fingerprint: null, id: chunks[0]!.id });
    expect(chunks[0]!.choices).toEqual(plain.body.choices);
    expect(chunks[1]).toMatchObject({ choices: [], usage: plain.body.usage });
    expect(plain.body.choices[0].token_ids).toHaveLength(plain.body.usage.completion_tokens);
    expect(plain.body.prompt_token_ids).toEqual([...Buffer.from('Say:', 'utf8')]);
  });

  it('refuses unknown models (404) and unsupported fields (400) as problem+json', async () => {
    await expect(client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({ status: 404 });
    const r = await server.call('POST', '/openai/v1/chat/completions', { model: 'test', messages: [{ role: 'user', content: 'x' }], n: 2 });
    expect(r.status).toBe(400);
    expect(r.type).toContain('application/problem+json');
    const e = await server.call('POST', '/openai/v1/completions', { model: 'test', prompt: 'x', echo: true });
    expect(e.status).toBe(400);
    expect(e.body.detail).toContain('echo');
  });

  it('accepts temperatures up to the native API\'s bound and refuses above it (400 naming body/temperature)', async () => {
    const ok = await server.call('POST', '/openai/v1/chat/completions', { model: 'test', messages: [{ role: 'user', content: 'x' }], temperature: MAX_TEMPERATURE, max_tokens: 2 });
    expect(ok.status).toBe(200);
    for (const temperature of [MAX_TEMPERATURE + 0.5, 50, -1]) {
      const r = await server.call('POST', '/openai/v1/chat/completions', { model: 'test', messages: [{ role: 'user', content: 'x' }], temperature });
      expect(r.status).toBe(400);
      expect(r.body.detail).toContain('temperature');
      const c = await server.call('POST', '/openai/v1/completions', { model: 'test', prompt: 'x', temperature });
      expect(c.status).toBe(400);
    }
  });
});

describe('/openai/v1 errors and models as the OpenAI SDK reads them', () => {
  it('answers errors in OpenAI\'s {error: {message, type, param, code}} shape as well as problem+json', async () => {
    const err = await client.chat.completions.create({ model: 'test', messages: [{ role: 'user', content: 'x' }], n: 2 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    const e = err as InstanceType<typeof OpenAI.BadRequestError>;
    expect(e.status).toBe(400);
    const detail = 'body/n is 2: several choices per request (n > 1) are not supported here; send n = 1 (or omit it) and make 2 requests';
    expect(e.message).toBe(`400 ${detail}`);
    expect({ type: e.type, param: e.param, code: e.code }).toEqual({ type: 'invalid_request_error', param: 'n', code: 'validation' });
    const raw = await server.call('POST', '/openai/v1/chat/completions', { model: 'test', messages: [{ role: 'user', content: 'x' }], n: 2 });
    expect(raw.type).toContain('application/problem+json');
    expect(raw.body).toMatchObject({ type: 'https://lamer-server.dev/problems/validation', status: 400, detail, error: { message: detail, type: 'invalid_request_error', param: 'n', code: 'validation' } });
    const missing = await client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }).catch((x: unknown) => x);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect((missing as InstanceType<typeof OpenAI.NotFoundError>).message).toBe(
      "404 model 'nope' not found: it is not a version of this server; GET /openai/v1/models lists the versions served here",
    );
    expect((missing as InstanceType<typeof OpenAI.NotFoundError>).type).toBe('not_found_error');
    // an unknown /openai path too; /v1 problems stay as they were
    const route = await server.call('GET', '/openai/v1/nothing');
    expect(route.body.error).toMatchObject({ type: 'not_found_error', code: 'not-found' });
    expect((await server.call('GET', '/v1/nothing')).body.error).toBeUndefined();
  });

  it('retrieves one model (models.retrieve); a version not served here is 404', async () => {
    const m = await client.models.retrieve('test');
    expect(m).toMatchObject({ id: 'test', object: 'model', owned_by: 'lamer-server' });
    const listed = (await client.models.list()).data.find((x) => x.id === 'test');
    expect(m).toEqual(listed);
    await expect(client.models.retrieve('nope')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });
});

describe('/openai/v1 behind API keys and the rate limit', () => {
  it('needs a key like the /v1 routes (any tenant), and counts against the same rate limit', async () => {
    const s = await startTestServer({
      apiKeys: [{ key: 'tenant-key-1', tenant: 't1', admin: false }],
      protection: { ...server.app.config.protection, rateLimitMax: 3, rateLimitWindowSeconds: 60 },
    });
    try {
      const body = { model: 'test', messages: [{ role: 'user', content: 'x' }] };
      expect((await s.call('GET', '/openai/v1/models')).status).toBe(401);
      expect((await s.call('POST', '/openai/v1/chat/completions', body, { authorization: 'Bearer wrong-key-00' })).status).toBe(401);
      const keyed = new OpenAI({ baseURL: `${s.url}/openai/v1`, apiKey: 'tenant-key-1', maxRetries: 0 });
      expect((await keyed.models.list()).data.map((m) => m.id)).toEqual(['test']);
      const r = await keyed.chat.completions.create(body as never);
      expect(r.choices[0]!.message.content).toMatch(/^move/);
      const third = await s.call('POST', '/openai/v1/completions', { model: 'test', prompt: 'x' }, { authorization: 'Bearer tenant-key-1' });
      expect(third.status).toBe(200);
      const over = await s.call('POST', '/openai/v1/completions', { model: 'test', prompt: 'x' }, { authorization: 'Bearer tenant-key-1' });
      expect(over.status).toBe(429);
      expect(over.headers.get('retry-after')).not.toBeNull();
    } finally {
      await s.close();
    }
  });
});

describe('/openai/v1 max_tokens against what a builtin version can generate', () => {
  let builtin: TestServer;
  let tiny: OpenAI;
  beforeAll(async () => {
    const dir = tmpDir('lamer-openai-');
    // a context of 384 tokens: at most 192 generated
    await writeTinyGptCheckpoint(join(dir, 'base-model'), 3);
    builtin = await startTestServer({ engine: 'builtin', tfjsBackend: 'wasm', baseModelDir: join(dir, 'base-model'), dataDir: join(dir, 'data') });
    tiny = new OpenAI({ baseURL: `${builtin.url}/openai/v1`, apiKey: 'unused-without-keys', maxRetries: 0 });
  }, 120_000);
  afterAll(async () => {
    await builtin?.close();
  });

  it.each([
    ['/openai/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], max_tokens: 193 }, 'max_tokens', 193],
    ['/openai/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], max_tokens: 8, max_completion_tokens: 2 ** 31 }, 'max_completion_tokens', 2 ** 31],
    ['/openai/v1/completions', { prompt: 'x', max_tokens: 1_000_000 }, 'max_tokens', 1_000_000],
  ])('%s with %j is a 400 naming %s', async (route, body, param, n) => {
    const r = await builtin.call('POST', route, { model: 'base', ...body });
    const detail = `body/${param} is ${n}: model version base generates at most 192 tokens (half its context of 384); send at most 192`;
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ type: 'https://lamer-server.dev/problems/validation', detail, error: { param, code: 'validation' } });
  });

  it('a max_tokens below 1 or not an integer is a 400 from the schema', async () => {
    for (const max_tokens of [0, -1, 1.5, 'many']) {
      const r = await builtin.call('POST', '/openai/v1/completions', { model: 'base', prompt: 'x', max_tokens });
      expect([r.status, r.body.error?.param], String(max_tokens)).toEqual([400, 'max_tokens']);
    }
  });

  it('at the bound, and by default (256 for chat, cut to the bound), the completion is served', async () => {
    const at = await tiny.completions.create({ model: 'base', prompt: 'x', max_tokens: 192, seed: 1 });
    expect(at.usage!.completion_tokens).toBeLessThanOrEqual(192);
    const chat = await tiny.chat.completions.create({ model: 'base', messages: [{ role: 'user', content: 'x' }], seed: 1 });
    expect(chat.usage!.completion_tokens).toBeLessThanOrEqual(192);
    expect(chat.choices[0]!.finish_reason).toMatch(/^(stop|length)$/);
  });
});
