/**
 * A fresh user's review of the server (real HTTP, engine 'test'): deeply nested JSON, lone
 * surrogates, forbidden keys, content encodings and types, cursors, over-long paths and headers,
 * batch items validated one by one, step metrics. Each case failed before its fix.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countRows, startTestServer, type TestServer } from '../helpers/index.js';

let s: TestServer;
let id: string;

beforeAll(async () => {
  s = await startTestServer();
  id = (await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' })).body.id;
  await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o' });
});
afterAll(async () => {
  await s.close();
});

const VALIDATION = 'https://lamer-server.dev/problems/validation';
const nested = (depth: number): string => '{"a":'.repeat(depth - 1) + '{}' + '}'.repeat(depth - 1);

describe('JSON nesting depth (LAMER_MAX_JSON_DEPTH, default 64)', () => {
  it('metadata nested 5,000 levels -> 400 validation naming the path, nothing stored', async () => {
    const before = countRows(s.dataDir, 'SELECT count(*) AS n FROM sessions');
    const r = await s.call('POST', '/v1/sessions', `{"taskId":"t","instructions":"x","metadata":${nested(5000)}}`);
    expect(r.status).toBe(400);
    expect(r.type).toContain('application/problem+json');
    expect(r.body.type).toBe(VALIDATION);
    // body = level 1, metadata = level 2, ... the first object at level 65 is 63 "a"s below metadata.
    expect(r.body.errors[0].field).toBe('body/metadata' + '/a'.repeat(63));
    expect(countRows(s.dataDir, 'SELECT count(*) AS n FROM sessions')).toBe(before);
  });

  it('info nested 5,000 levels on a step -> 400; 64 levels in all is accepted', async () => {
    const deep = await s.call('POST', `/v1/sessions/${id}/steps`, `{"attempt":0,"step":1,"observation":"o","info":${nested(5000)}}`);
    expect(deep.status).toBe(400);
    expect(deep.body.errors[0].field).toBe('body/info' + '/a'.repeat(63));
    const ok = await s.call('POST', '/v1/sessions', `{"taskId":"t","instructions":"x","metadata":${nested(63)}}`);
    expect(ok.status).toBe(201);
  });

  it('the batch route too', async () => {
    const r = await s.call('POST', '/v1/steps:batch', `{"items":[{"sessionId":"${id}","attempt":0,"step":1,"observation":"o","info":${nested(5000)}}]}`);
    expect(r.status).toBe(400);
    expect(r.body.errors[0].field).toBe('body/items/0/info' + '/a'.repeat(61));
  });
});

describe('lone UTF-16 surrogates', () => {
  it.each<[string, () => string, string, string]>([
    ['observation', () => `/v1/sessions/${id}/steps`, '{"attempt":0,"step":1,"observation":"a\\ud800b"}', 'body/observation'],
    ['available action', () => `/v1/sessions/${id}/steps`, '{"attempt":0,"step":1,"observation":"o","availableActions":["x","\\udc00"]}', 'body/availableActions/1'],
    ['instructions', () => '/v1/sessions', '{"taskId":"t","instructions":"\\ud83d"}', 'body/instructions'],
    ['reflection text', () => `/v1/sessions/${id}/memory/0`, '{"text":"ok \\udfff"}', 'body/text'],
  ])('%s -> 400 naming the field', async (_name, path, body, field) => {
    const r = await s.call(_name === 'reflection text' ? 'PUT' : 'POST', path(), body);
    expect(r.status).toBe(400);
    expect(r.body.type).toBe(VALIDATION);
    expect(r.body.errors[0].field).toBe(field);
  });

  it('a well-formed surrogate pair (an emoji) is kept as sent', async () => {
    const r = await s.call('POST', '/v1/sessions', '{"taskId":"t","instructions":"go \\ud83d\\ude00"}');
    expect(r.status).toBe(201);
    const got = await s.call('GET', `/v1/sessions/${r.body.id}`);
    expect(got.status).toBe(200);
  });
});

describe('clearer errors', () => {
  it('a __proto__ key -> 400 saying it is a forbidden key, with its path', async () => {
    const r = await s.call('POST', '/v1/sessions', '{"taskId":"t","instructions":"x","metadata":{"__proto__":{"admin":true}}}');
    expect(r.status).toBe(400);
    expect(r.body.detail).toBe('body/metadata/__proto__ is a forbidden key (prototype poisoning)');
  });

  it('a constructor.prototype key -> 400 forbidden key', async () => {
    const r = await s.call('POST', '/v1/sessions', '{"taskId":"t","instructions":"x","metadata":{"constructor":{"prototype":{}}}}');
    expect(r.status).toBe(400);
    expect(r.body.detail).toBe('body/metadata/constructor is a forbidden key (prototype poisoning)');
  });
});

describe('content encodings and types, methods', () => {
  it('content-encoding: gzip -> 415 saying encodings are not supported', async () => {
    const r = await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' }, { 'content-encoding': 'gzip' });
    expect(r.status).toBe(415);
    expect(r.body.type).toBe('https://lamer-server.dev/problems/unsupported-media-type');
    expect(r.body.detail).toBe('content-encoding gzip is not supported; send the body uncompressed');
  });

  it('content-type: text/plain with a JSON body -> 415', async () => {
    const r = await s.call('POST', '/v1/sessions', JSON.stringify({ taskId: 't', instructions: 'x' }), { 'content-type': 'text/plain' });
    expect(r.status).toBe(415);
    expect(r.body.type).toBe('https://lamer-server.dev/problems/unsupported-media-type');
  });
});

/** Raw HTTP/1.1 exchange on one socket: the whole answer text until the server closes. */
function rawExchange(port: number, onConnected: (sock: import('node:net').Socket) => void): Promise<{ text: string; error: string | null }> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1', () => onConnected(sock));
    let text = '';
    sock.on('data', (d) => (text += d.toString('utf8')));
    sock.on('error', (e) => resolve({ text, error: (e as NodeJS.ErrnoException).code ?? e.message }));
    sock.on('close', () => resolve({ text, error: null }));
  });
}

describe('graceful shutdown', () => {
  it('a request whose bytes arrived just before close gets 503 shutting-down problem+json with Retry-After, not a reset', async () => {
    const t = await startTestServer();
    const port = Number(new URL(t.url).port);
    const req = 'GET /v1/sessions HTTP/1.1\r\nhost: x\r\n\r\n';
    let closed: Promise<void> | undefined;
    const answer = await rawExchange(port, (sock) => {
      // Connected and idle; then the request bytes reach the server in the same turn as close().
      setTimeout(() => {
        sock.write(req);
        const until = Date.now() + 30;
        while (Date.now() < until); // the event loop is busy (a forward pass): the bytes wait unread
        closed = t.close();
      }, 50);
    });
    await closed;
    expect(answer.error).toBeNull();
    expect(answer.text).toMatch(/^HTTP\/1\.1 503 /);
    expect(answer.text).toMatch(/content-type: application\/problem\+json/i);
    expect(answer.text).toMatch(/retry-after: 1\r\n/i);
    expect(answer.text).toContain('"type":"https://lamer-server.dev/problems/shutting-down"');
  });

  it('a connection still in the accept backlog (event loop busy) at close gets the 503 answer, not a reset', async () => {
    const t = await startTestServer();
    const port = Number(new URL(t.url).port);
    // A client in another process connects and sends a request while this process is busy.
    const marker = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'lamer-backlog-')), 'sent');
    const client = spawn(process.execPath, ['-e', `
      const s = require('node:net').connect(${port}, '127.0.0.1', () => { s.write('GET /healthz HTTP/1.1\\r\\nhost: x\\r\\n\\r\\n'); console.log('SENT'); require('node:fs').writeFileSync(${JSON.stringify(marker)}, ''); });
      let t = ''; s.on('data', (d) => t += d); s.on('error', (e) => { console.log('ERROR ' + e.code); });
      s.on('close', () => console.log('ANSWER ' + t.split('\\r\\n')[0]));
    `]);
    let out = '';
    client.stdout.on('data', (d) => (out += d));
    const exited = new Promise((r) => client.once('exit', r));
    // Busy until the client has sent (its bytes sit in the backlog, unread), then close. The client
    // says so with a file (this event loop cannot read its output); a slow machine may need seconds.
    const until = Date.now() + 20_000;
    while (!fs.existsSync(marker) && Date.now() < until);
    await t.close();
    await exited;
    expect(out).not.toContain('ERROR');
    expect(out).toContain('ANSWER HTTP/1.1 503 Service Unavailable');
  });
});

describe('answers from the router and the HTTP parser are problem+json', () => {
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

describe('GET /v1/sessions cursor', () => {
  it.each([
    ['garbage', 'garbage'],
    ['a tampered cursor (right shape, no such session)', 'ses_000000000000000000000'],
  ])('%s -> 400 naming querystring/cursor', async (_name, cursor) => {
    const r = await s.call('GET', `/v1/sessions?cursor=${cursor}`);
    expect(r.status).toBe(400);
    expect(r.body.type).toBe(VALIDATION);
    expect(r.body.errors[0].field).toBe('querystring/cursor');
  });

  it('a tampered real cursor -> 400; the real one pages on', async () => {
    const page = await s.call('GET', '/v1/sessions?limit=1');
    const cursor: string = page.body.nextCursor;
    expect(cursor).toMatch(/^ses_/);
    const tampered = cursor.slice(0, -1) + (cursor.endsWith('0') ? '1' : '0');
    expect((await s.call('GET', `/v1/sessions?limit=1&cursor=${tampered}`)).status).toBe(400);
    const next = await s.call('GET', `/v1/sessions?limit=1&cursor=${cursor}`);
    expect(next.status).toBe(200);
    expect(next.body.items).toHaveLength(1);
  });
});

/** One sample of /metrics, 0 when absent. */
async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${s.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.slice(name.length + 1)) : 0;
}

describe('step metrics', () => {
  const REJECTED = 'lamer_step_requests_total{outcome="rejected"}';

  it('every 4xx answer of the step routes counts as rejected once', async () => {
    const url = `/v1/sessions/${id}/steps`;
    const cases: Array<[unknown, Record<string, string>, number]> = [
      [{ attempt: '0', step: 1, observation: 'o' }, {}, 400], // schema validation
      ['{"attempt":0,"step":1,"observation":"' + 'x'.repeat(3 * 1024 * 1024) + '"}', {}, 413],
      ['{"attempt":0,"step":1,"observation":"o"}', { 'content-type': 'text/plain' }, 415],
      [{ attempt: 0, step: 7, observation: 'o' }, {}, 409], // out of order (from the agent)
    ];
    for (const [body, headers, status] of cases) {
      const before = await metric(REJECTED);
      expect((await s.call('POST', url, body, headers)).status).toBe(status);
      expect(await metric(REJECTED), `status ${status}`).toBe(before + 1);
    }
  });

  it('batch: a whole-batch 400 counts once, each rejected item once; the route label is /v1/steps:batch', async () => {
    let before = await metric(REJECTED);
    expect((await s.call('POST', '/v1/steps:batch', { items: [] })).status).toBe(400);
    expect(await metric(REJECTED)).toBe(before + 1);
    before = await metric(REJECTED);
    const items = [
      { sessionId: id, attempt: 0, step: 9, observation: 'o' },
      { sessionId: 'ses_nope', attempt: 0, step: 0, observation: 'o' },
    ];
    const r = await s.call('POST', '/v1/steps:batch', { items });
    expect(r.status).toBe(200);
    expect(r.body.results.map((x: { error: { status: number } }) => x.error.status)).toEqual([409, 404]);
    expect(await metric(REJECTED)).toBe(before + 2);
    expect(await metric('http_request_duration_seconds_count{method="POST",route="/v1/steps:batch",status_code="200"}')).toBeGreaterThanOrEqual(1);
    expect(await metric('http_request_duration_seconds_count{method="POST",route="/v1/steps::batch",status_code="200"}')).toBe(0);
  });
});

describe('POST /v1/steps:batch validates each item on its own', () => {
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
