/**
 * Bad input (validation errors mapped by src/plugins/app/errors.ts): every class is a 4xx
 * application/problem+json naming the field, never a 500, and the database is byte-for-byte
 * unchanged afterwards.
 */
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionAfterFirstStep, startTestServer, dumpDb, writeAllThenRead, type TestServer } from '../../helpers/index.js';
import { DomainError, invalid, overloaded } from '../../../src/agent/errors.js';
import { PROBLEM_STATUS, retryAfterOf, toProblem } from '../../../src/plugins/app/errors.js';

let s: TestServer;
let id: string;
beforeAll(async () => {
  s = await startTestServer({
    limits: {
      bodyBytes: 256 * 1024,
      batchBodyBytes: 512 * 1024,
      observationChars: 1000,
      instructionsChars: 2000,
      availableActions: 8,
      actionChars: 16,
      batchItems: 4,
      maxAttempts: 5,
      maxStepsCap: 50,
      defaultMaxSteps: 10,
      reflectionChars: 2000,
      candidateTokens: 40,
      promptTokens: 3000,
      jsonDepth: 64,
      infoBytes: 64 * 1024,
      metadataBytes: 64 * 1024,
      trajectoryPageBytes: 1024 * 1024,
      maxReplaySteps: 1000,
    },
  });
  id = (await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' })).body.id;
  // One recorded step so that conflicts and retries have something to hit.
  await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o' });
});
afterAll(async () => {
  await s.close();
});

const step = (over: Record<string, unknown>) => ({ attempt: 0, step: 1, observation: 'o', reward: 0, ...over });

type Case = [name: string, method: string, path: () => string, body: unknown, status: number, field?: string, headers?: Record<string, string>];

const cases: Case[] = [
  ['attempt as string', 'POST', () => `/v1/sessions/${id}/steps`, step({ attempt: '0' }), 400, 'body/attempt'],
  ['negative step', 'POST', () => `/v1/sessions/${id}/steps`, step({ step: -1 }), 400, 'body/step'],
  ['fractional step', 'POST', () => `/v1/sessions/${id}/steps`, step({ step: 1.5 }), 400, 'body/step'],
  ['huge step', 'POST', () => `/v1/sessions/${id}/steps`, step({ step: 1e300 }), 400, 'body/step'],
  ['reward overflowing to Infinity', 'POST', () => `/v1/sessions/${id}/steps`, '{"attempt":0,"step":1,"observation":"o","reward":1e400}', 400, 'body/reward'],
  ['Infinity inside info', 'POST', () => `/v1/sessions/${id}/steps`, '{"attempt":0,"step":1,"observation":"o","info":{"x":[1,-2e999]}}', 400, 'body/info/x/1'],
  ['Infinity inside metadata', 'POST', () => '/v1/sessions', '{"taskId":"t","instructions":"x","metadata":{"m":1E+400}}', 400, 'body/metadata/m'],
  ['proto poisoning', 'POST', () => '/v1/sessions', '{"taskId":"t","instructions":"x","metadata":{"__proto__":{"admin":true}}}', 400],
  ['huge reward', 'POST', () => `/v1/sessions/${id}/steps`, step({ reward: 1e12 }), 400, 'body/reward'],
  ['reward as string', 'POST', () => `/v1/sessions/${id}/steps`, step({ reward: '1' }), 400, 'body/reward'],
  ['done as string', 'POST', () => `/v1/sessions/${id}/steps`, step({ done: 'true' }), 400, 'body/done'],
  ['observation missing', 'POST', () => `/v1/sessions/${id}/steps`, { attempt: 0, step: 1 }, 400, 'body/observation'],
  ['observation null', 'POST', () => `/v1/sessions/${id}/steps`, step({ observation: null }), 400, 'body/observation'],
  ['oversize observation', 'POST', () => `/v1/sessions/${id}/steps`, step({ observation: 'x'.repeat(1001) }), 400, 'body/observation'],
  ['too many availableActions', 'POST', () => `/v1/sessions/${id}/steps`, step({ availableActions: Array.from({ length: 9 }, (_, i) => `a${i}`) }), 400, 'body/availableActions'],
  ['oversize action', 'POST', () => `/v1/sessions/${id}/steps`, step({ availableActions: ['x'.repeat(17)] }), 400, 'body/availableActions/0'],
  ['availableActions over LAMER_MAX_CANDIDATE_TOKENS (bytes + 1 each)', 'POST', () => `/v1/sessions/${id}/steps`, step({ availableActions: ['é'.repeat(10), 'ü'.repeat(10)] }), 400, 'body/availableActions'],
  ['empty availableActions', 'POST', () => `/v1/sessions/${id}/steps`, step({ availableActions: [] }), 400, 'body/availableActions'],
  ['unknown field', 'POST', () => `/v1/sessions/${id}/steps`, step({ actions: 1 }), 400, 'body/actions'],
  ['info not an object', 'POST', () => `/v1/sessions/${id}/steps`, step({ info: [1] }), 400, 'body/info'],
  ['success without done', 'POST', () => `/v1/sessions/${id}/steps`, step({ success: true }), 400, 'body/success'],
  ['body not JSON', 'POST', () => `/v1/sessions/${id}/steps`, '{"attempt":0,', 400],
  ['body a JSON array', 'POST', () => `/v1/sessions/${id}/steps`, '[1,2]', 400, 'body'],
  ['empty JSON body', 'POST', () => `/v1/sessions/${id}/steps`, '', 400, undefined, { 'content-type': 'application/json' }],
  ['wrong content-type', 'POST', () => `/v1/sessions/${id}/steps`, 'attempt=0', 415, undefined, { 'content-type': 'application/x-www-form-urlencoded' }],
  ['body too large', 'POST', () => `/v1/sessions/${id}/steps`, step({ info: { pad: 'x'.repeat(300 * 1024) } }), 413],
  ['conflicting retry', 'POST', () => `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'different' }, 409],
  ['out of order', 'POST', () => `/v1/sessions/${id}/steps`, step({ step: 5 }), 409],
  ['unknown session', 'POST', () => '/v1/sessions/ses_nope/steps', step({ step: 0 }), 404],
  ['taskId missing', 'POST', () => '/v1/sessions', { instructions: 'x' }, 400, 'body/taskId'],
  ['oversize instructions', 'POST', () => '/v1/sessions', { taskId: 't', instructions: 'x'.repeat(2001) }, 400, 'body/instructions'],
  ['maxAttempts 0', 'POST', () => '/v1/sessions', { taskId: 't', instructions: 'x', maxAttempts: 0 }, 400, 'body/maxAttempts'],
  ['maxAttempts too big', 'POST', () => '/v1/sessions', { taskId: 't', instructions: 'x', maxAttempts: 6 }, 400, 'body/maxAttempts'],
  ['maxSteps negative', 'POST', () => '/v1/sessions', { taskId: 't', instructions: 'x', maxSteps: -3 }, 400, 'body/maxSteps'],
  ['unknown memory mode', 'POST', () => '/v1/sessions', { taskId: 't', instructions: 'x', memory: 'everything' }, 400, 'body/memory'],
  ['temperature negative', 'POST', () => '/v1/sessions', { taskId: 't', instructions: 'x', sampling: { temperature: -1 } }, 400, 'body/sampling/temperature'],
  ['topP 0', 'POST', () => '/v1/sessions', { taskId: 't', instructions: 'x', sampling: { topP: 0 } }, 400, 'body/sampling/topP'],
  ['seed fractional', 'POST', () => '/v1/sessions', { taskId: 't', instructions: 'x', sampling: { seed: 0.5 } }, 400, 'body/sampling/seed'],
  ['metadata a string', 'POST', () => '/v1/sessions', { taskId: 't', instructions: 'x', metadata: 'm' }, 400, 'body/metadata'],
  ['list limit 0', 'GET', () => '/v1/sessions?limit=0', undefined, 400, 'querystring/limit'],
  ['list limit not a number', 'GET', () => '/v1/sessions?limit=abc', undefined, 400, 'querystring/limit'],
  ['list unknown status', 'GET', () => '/v1/sessions?status=weird', undefined, 400, 'querystring/status'],
  ['reflection attempt negative', 'PUT', () => `/v1/sessions/${id}/memory/-1`, { text: 'x' }, 400, 'params/attempt'],
  ['reflection text empty', 'PUT', () => `/v1/sessions/${id}/memory/0`, { text: '' }, 400, 'body/text'],
  ['batch too many items', 'POST', () => '/v1/steps:batch', { items: Array.from({ length: 5 }, () => ({ sessionId: id, attempt: 0, step: 1, observation: 'o' })) }, 400, 'body/items'],
  ['batch item without sessionId', 'POST', () => '/v1/steps:batch', { items: [{ attempt: 0, step: 1, observation: 'o' }] }, 400, 'body/items/0/sessionId'],
  ['unknown route', 'GET', () => '/v2/sessions', undefined, 404],
  ['wrong method', 'PATCH', () => `/v1/sessions/${id}`, {}, 405],
];

describe('bad input', () => {
  it.each(cases)('%s -> %i problem+json, database unchanged', async (_name, method, path, body, status, field, headers) => {
    const before = dumpDb(s.dataDir);
    const r = await s.call(method, path(), body, headers);
    expect(r.status).toBe(status);
    expect(r.type).toContain('application/problem+json');
    expect(r.body.status).toBe(status);
    expect(r.body.type).toMatch(/^https:\/\/lamer-server\.dev\/problems\/[a-z-]+$/);
    expect(typeof r.body.detail).toBe('string');
    if (field !== undefined) {
      expect(r.body.type).toBe('https://lamer-server.dev/problems/validation');
      expect(r.body.errors[0].field).toBe(field);
    }
    expect(dumpDb(s.dataDir)).toBe(before);
  });

  it('the model work of a step is bounded before any is done: candidate tokens and prompt tokens, each limit named', async () => {
    const before = dumpDb(s.dataDir);
    const c = await s.call('POST', `/v1/sessions/${id}/steps`, step({ availableActions: ['é'.repeat(10), 'ü'.repeat(10)] }));
    expect(c.body.errors).toEqual([{ field: 'body/availableActions', message: 'total 42 tokens (UTF-8 bytes + 1 per action); at most 40 per step (LAMER_MAX_CANDIDATE_TOKENS)' }]);
    // instructions of 1,100 three-byte characters: a prompt of more than 3,000 tokens
    const big = (await s.call('POST', '/v1/sessions', { taskId: 't', instructions: '€'.repeat(1100) })).body.id;
    const mid = dumpDb(s.dataDir);
    const p = await s.call('POST', `/v1/sessions/${big}/steps`, { attempt: 0, step: 0, observation: 'o' });
    expect(p.status).toBe(400);
    expect(p.body.errors).toEqual([{ field: 'body', message: 'makes a prompt of 3324 tokens (UTF-8 bytes of the instructions, observations, actions and reflections it shows); at most 3000 (LAMER_MAX_PROMPT_TOKENS)' }]);
    expect(dumpDb(s.dataDir)).toBe(mid);
    expect(before).not.toBe(mid);
    expect((await s.call('DELETE', `/v1/sessions/${big}`)).status).toBe(200);
  });

  it('a body over the limit is 413 naming the limit of its route in bytes', async () => {
    const before = dumpDb(s.dataDir);
    const one = await s.call('POST', `/v1/sessions/${id}/steps`, step({ info: { pad: 'x'.repeat(300 * 1024) } }));
    expect(one.status).toBe(413);
    expect(one.body).toMatchObject({ type: 'https://lamer-server.dev/problems/payload-too-large', detail: 'request body is larger than the limit of 262144 bytes' });
    // steps:batch has its own, larger limit
    const batch = await s.call('POST', '/v1/steps:batch', { items: [{ sessionId: id, attempt: 0, step: 1, observation: 'x'.repeat(600 * 1024) }] });
    expect(batch.status).toBe(413);
    expect(batch.body.detail).toBe('request body is larger than the limit of 524288 bytes');
    expect(dumpDb(s.dataDir)).toBe(before);
  });

  it('the session still accepts the correct next step afterwards', async () => {
    const r = await s.call('POST', `/v1/sessions/${id}/steps`, step({}));
    expect(r.status).toBe(200);
    expect(r.body.session.next).toEqual({ attempt: 0, step: 2 });
  });
});

describe('answers from the router and the HTTP parser are problem+json', () => {
  let s: TestServer;
  let id: string;
  beforeAll(async () => {
    s = await startTestServer();
    id = await sessionAfterFirstStep(s);
  });
  afterAll(async () => {
    await s.close();
  });

  it('a path parameter over 256 characters -> 414 uri-too-long', async () => {
    const r = await s.call('GET', `/v1/sessions/${'x'.repeat(300)}`);
    expect(r.status).toBe(414);
    expect(r.type).toContain('application/problem+json');
    expect(r.body.type).toBe('https://lamer-server.dev/problems/uri-too-long');
    expect(r.body.status).toBe(414);
    expect(r.body.title).toBe('URI Too Long');
  });

  it('a 20 KB query string -> 431 header-too-large', async () => {
    const r = await s.call('GET', `/v1/sessions?taskId=${'x'.repeat(20_000)}`);
    expect(r.status).toBe(431);
    expect(r.type).toContain('application/problem+json');
    expect(r.body.type).toBe('https://lamer-server.dev/problems/header-too-large');
    expect(r.body.status).toBe(431);
    // written by the parser's error handler before any request existed: a request id all the same
    expect(r.body.requestId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(r.headers.get('x-request-id')).toBe(r.body.requestId);
  });

  it('a 20 KB header -> 431 header-too-large', async () => {
    const r = await s.call('GET', '/v1/sessions', undefined, { 'x-pad': 'y'.repeat(20_000) });
    expect(r.status).toBe(431);
    expect(r.body.type).toBe('https://lamer-server.dev/problems/header-too-large');
  });

  it('a known path with the wrong method -> 405 method-not-allowed with Allow', async () => {
    const r = await s.call('PUT', `/v1/sessions/${id}`, {});
    expect(r.status).toBe(405);
    expect(r.body.type).toBe('https://lamer-server.dev/problems/method-not-allowed');
    expect(r.headers.get('allow')).toBe('DELETE, GET, HEAD');
    const batch = await s.call('GET', '/v1/steps:batch');
    expect(batch.status).toBe(405);
    expect(batch.headers.get('allow')).toBe('POST');
    expect((await s.call('GET', '/v1/nothing-here')).status).toBe(404);
  });
});

describe('domain errors are mapped by kind, in this plugin alone', () => {
  it('kind -> status, title, type; details -> errors, expected; Retry-After from details', () => {
    const expected = { attempt: 1, step: 0 };
    expect(toProblem(new DomainError('step-out-of-order', 'expected attempt 1 step 0, got attempt 0 step 3', { expected }), '/v1/sessions/x/steps', 'req-1')).toEqual({
      type: 'https://lamer-server.dev/problems/step-out-of-order',
      title: 'Step Out Of Order',
      status: 409,
      detail: 'expected attempt 1 step 0, got attempt 0 step 3',
      instance: '/v1/sessions/x/steps',
      requestId: 'req-1',
      expected,
    });
    expect(toProblem(invalid('body/n', 'must be 1'), '/i')).toEqual({
      type: 'https://lamer-server.dev/problems/validation', title: 'Bad Request', status: 400, detail: 'body/n must be 1', instance: '/i',
      errors: [{ field: 'body/n', message: 'must be 1' }],
    });
    const busy = overloaded('2 model calls are queued (limit 2); retry this step later', 3);
    expect(toProblem(busy, '/i')).toMatchObject({ type: 'https://lamer-server.dev/problems/overloaded', title: 'Service Unavailable', status: 503 });
    expect(retryAfterOf(busy)).toBe(3);
    expect(retryAfterOf(new DomainError('conflict', 'x'))).toBeNull();
    expect(PROBLEM_STATUS['engine-unavailable']).toEqual({ status: 503, title: 'Engine Unavailable' });
    expect(PROBLEM_STATUS['too-many-sessions']).toEqual({ status: 409, title: 'Too Many Sessions' });
    expect(PROBLEM_STATUS['too-many-jobs']).toEqual({ status: 429, title: 'Too Many Requests' });
  });
});

describe('a client that writes its whole body before it reads', () => {
  it('reads the 413 problem (declared or chunked length, every route), and the server still answers', async () => {
    const big = Buffer.from(JSON.stringify({ taskId: 't', instructions: 'x'.repeat(4 * 1024 * 1024) }));
    const sessionId = await sessionAfterFirstStep(s);
    const paths = ['/v1/sessions', `/v1/sessions/${sessionId}/steps`, '/openai/v1/chat/completions'];
    const results: unknown[] = [];
    for (const path of paths) for (const chunked of [false, true]) for (let i = 0; i < 2; i++) results.push(await writeAllThenRead(s.url, 'POST', path, big, { chunked }));
    for (const r of results) {
      expect(r).toMatchObject({ status: 413 });
      const p = JSON.parse((r as { body: string }).body);
      expect(p).toMatchObject({ type: 'https://lamer-server.dev/problems/payload-too-large', status: 413 });
    }
    expect((await s.call('GET', '/healthz')).status).toBe(200);
  });

  it('reads every early answer (415, 404, 405) sent before the body is read, and nothing changes', async () => {
    const big = Buffer.from(JSON.stringify({ taskId: 't', instructions: 'x'.repeat(4 * 1024 * 1024) }));
    const before = dumpDb(s.dataDir);
    const cases: Array<[method: string, path: string, headers: Record<string, string>, status: number, kind: string]> = [
      ['POST', '/v1/sessions', { 'content-type': 'text/plain' }, 415, 'unsupported-media-type'],
      ['POST', '/v1/sessions', { 'content-encoding': 'gzip' }, 415, 'unsupported-media-type'],
      ['POST', '/v1/no-such-route', {}, 404, 'not-found'],
      ['POST', '/openai/v1/no-such-route', {}, 404, 'not-found'],
      ['PATCH', '/v1/sessions', {}, 405, 'method-not-allowed'],
      ['PUT', '/healthz', {}, 405, 'method-not-allowed'],
    ];
    for (const [method, path, headers, status, kind] of cases) {
      for (const chunked of [false, true]) {
        const r = await writeAllThenRead(s.url, method, path, big, { headers, chunked });
        expect(r, `${method} ${path} ${JSON.stringify(headers)} chunked=${chunked}`).toMatchObject({ status });
        const p = JSON.parse((r as { body: string }).body);
        expect(p).toMatchObject({ type: `https://lamer-server.dev/problems/${kind}`, status });
        if (status === 405) expect((r as { headers: string }).headers).toMatch(/\r\nallow: /i);
      }
    }
    expect(dumpDb(s.dataDir)).toBe(before);
    expect((await s.call('GET', '/healthz')).status).toBe(200);
  });

  it('an unknown route or method is 404/405 whatever its body: never 413, 415 or 400', async () => {
    const big = 'x'.repeat(300 * 1024);
    const unknown = await s.call('POST', '/v1/no-such-route', big, { 'content-type': 'application/json' });
    expect(unknown.status).toBe(404);
    const wrongMethod = await s.call('PATCH', '/v1/sessions', big, { 'content-type': 'application/json' });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('GET, HEAD, POST');
    const textBody = await s.call('PUT', '/v1/no-such-route', 'hello', { 'content-type': 'text/plain' });
    expect(textBody.status).toBe(404);
    const badJson = await s.call('POST', '/v1/no-such-route', '{', { 'content-type': 'application/json' });
    expect(badJson.status).toBe(404);
  });

  it('does not drain a body declared larger than the drain bound: answered at once, as before', async () => {
    const { drainBody } = await import('../../../src/plugins/app/errors.js');
    const { PassThrough } = await import('node:stream');
    const declared = Object.assign(new PassThrough(), { headers: { 'content-length': String(10_000) } });
    await drainBody(declared, { maxBytes: 1000, maxMs: 60_000 }); // resolves without reading
    expect(declared.readableFlowing).toBeNull();
    // a stream that keeps sending: drained up to the byte bound, then given up
    const endless = Object.assign(new PassThrough(), { headers: {} });
    const drained = drainBody(endless, { maxBytes: 1000, maxMs: 60_000 });
    for (let i = 0; i < 5; i++) endless.write(Buffer.alloc(400));
    await drained;
    // and one that stalls: given up after maxMs
    const stalled = Object.assign(new PassThrough(), { headers: {} });
    await drainBody(stalled, { maxBytes: 1000, maxMs: 20 });
    // a body that ends is read to its end
    const ends = Object.assign(new PassThrough(), { headers: {} });
    const whole = drainBody(ends, { maxBytes: 1000, maxMs: 60_000 });
    ends.end(Buffer.alloc(10));
    await whole;
    expect(ends.readableEnded).toBe(true);
  });
});

describe('a client that writes its whole body before it reads, on a server with API keys', () => {
  let keyed: TestServer;
  beforeAll(async () => {
    keyed = await startTestServer({ apiKeys: [{ key: 'key-tenant-a', tenant: 'a', admin: false }] });
  });
  afterAll(async () => {
    await keyed.close();
  });
  const big = Buffer.from(JSON.stringify({ taskId: 't', instructions: 'x'.repeat(4 * 1024 * 1024) }));

  it('reads the 401 sent before the body is read (no key, a wrong key, /openai/v1)', async () => {
    const before = dumpDb(keyed.dataDir);
    const cases: Array<[path: string, headers: Record<string, string>]> = [
      ['/v1/sessions', {}],
      ['/v1/sessions', { authorization: 'Bearer wrong-key-123' }],
      ['/openai/v1/chat/completions', {}],
      ['/v1/steps:batch', {}],
    ];
    for (const [path, headers] of cases) {
      for (const chunked of [false, true]) {
        const r = await writeAllThenRead(keyed.url, 'POST', path, big, { headers, chunked });
        expect(r, `${path} ${JSON.stringify(headers)} chunked=${chunked}`).toMatchObject({ status: 401 });
        expect(JSON.parse((r as { body: string }).body)).toMatchObject({ type: 'https://lamer-server.dev/problems/unauthorized', status: 401 });
      }
    }
    expect(dumpDb(keyed.dataDir)).toBe(before);
    expect((await keyed.call('GET', '/healthz')).status).toBe(200);
  });

  it.skipIf(spawnSync('python3', ['--version']).status !== 0)("Python's urllib reads the 401 of a 4 MB body, not a broken pipe", async () => {
    const code = [
      'import sys, urllib.request, urllib.error',
      "body = b'{\"taskId\":\"t\",\"instructions\":\"' + b'x' * (4 * 1024 * 1024) + b'\"}'",
      "req = urllib.request.Request(sys.argv[1] + '/v1/sessions', data=body, headers={'content-type': 'application/json'}, method='POST')",
      'try:',
      '    urllib.request.urlopen(req, timeout=30)',
      "    print('no error')",
      'except urllib.error.HTTPError as e:',
      "    print(e.code)",
      'except Exception as e:',
      "    print(type(e).__name__, e)",
    ].join('\n');
    const out: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { stdout } = await promisify(execFile)('python3', ['-c', code, keyed.url], { timeout: 30_000 });
      out.push(stdout.trim());
    }
    expect(out).toEqual(['401', '401', '401']);
  });
});
