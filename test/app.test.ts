/**
 * JSON body handling of src/app.ts over real HTTP: a number that is not finite after parsing
 * (an exponent overflow, or an integer literal too long for a double) is a 400 naming its path
 * wherever it is (metadata, info, batch items) and nothing is stored; an empty body with a JSON
 * content type is no body on DELETE and on routes that take none; bodies must be UTF-8 (invalid
 * bytes are a 400, a charset other than utf-8 is a 415, nothing stored either way).
 */
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { firstInvalidUtf8 } from '../src/plugins/app/json-body.js';
import { call, countRows, dumpDb, rawCall, sessionAfterFirstStep, startTestServer, type Res, type TestServer } from './helpers/index.js';

let s: TestServer;
let id: string;
const BIG = '1' + '0'.repeat(400); // 401 digits: JSON.parse gives Infinity

beforeAll(async () => {
  s = await startTestServer();
  id = await sessionAfterFirstStep(s);
});
afterAll(async () => {
  await s.close();
});

describe('numbers that are not finite after parsing', () => {
  const cases: Array<[name: string, method: string, path: () => string, body: () => string, field: string]> = [
    ['metadata on create', 'POST', () => '/v1/sessions', () => `{"taskId":"t","instructions":"x","metadata":{"big":${BIG}}}`, 'body/metadata/big'],
    ['negative, nested in metadata', 'POST', () => '/v1/sessions', () => `{"taskId":"t","instructions":"x","metadata":{"a":[1,{"b":-${BIG}}]}}`, 'body/metadata/a/1/b'],
    ['info on a step', 'POST', () => `/v1/sessions/${id}/steps`, () => `{"attempt":0,"step":1,"observation":"o","info":{"n":${BIG}}}`, 'body/info/n'],
    ['a 400-digit decimal with a fraction', 'POST', () => `/v1/sessions/${id}/steps`, () => `{"attempt":0,"step":1,"observation":"o","info":{"n":${BIG}.5}}`, 'body/info/n'],
    ['exponent overflow in info', 'POST', () => `/v1/sessions/${id}/steps`, () => `{"attempt":0,"step":1,"observation":"o","info":{"n":[1e400]}}`, 'body/info/n/0'],
    ['a batch item', 'POST', () => '/v1/steps:batch', () => `{"items":[{"sessionId":"${id}","attempt":0,"step":1,"observation":"o","info":{"n":${BIG}}}]}`, 'body/items/0/info/n'],
    ['a batch item reward', 'POST', () => '/v1/steps:batch', () => `{"items":[{"sessionId":"${id}","attempt":0,"step":1,"observation":"o","reward":-${BIG}}]}`, 'body/items/0/reward'],
  ];
  for (const [name, method, path, body, field] of cases) {
    it(`${name}: 400 naming ${field}, nothing stored`, async () => {
      const before = dumpDb(s.dataDir);
      const r = await s.call(method, path(), body());
      expect(r.status).toBe(400);
      expect(r.type).toMatch(/^application\/problem\+json/);
      expect(r.body.type).toBe('https://lamer-server.dev/problems/validation');
      expect(r.body.errors).toEqual([{ field, message: 'must be a finite number' }]);
      expect(dumpDb(s.dataDir)).toBe(before);
    });
  }

  it('large but finite floats and safe integers are kept as sent', async () => {
    const r = await s.call(
      'POST',
      '/v1/sessions',
      `{"taskId":"t","instructions":"x","metadata":{"small":1e-400,"max":1.7976931348623157e308,"e":1.5e300,"safe":9007199254740991,"neg":-9007199254740991,"s":"12345678901234567890123"}}`,
    );
    expect(r.status).toBe(201);
    expect(r.body.metadata).toEqual({ small: 0, max: 1.7976931348623157e308, e: 1.5e300, safe: 9007199254740991, neg: -9007199254740991, s: '12345678901234567890123' });
  });
});

describe('integer literals a double cannot hold exactly', () => {
  const cases: Array<[name: string, path: () => string, body: () => string, field: string]> = [
    ['2^60 + 1 in info', () => `/v1/sessions/${id}/steps`, () => `{"attempt":0,"step":1,"observation":"o","info":{"n":1152921504606846977}}`, 'body/info/n'],
    ['2^53 + 1, negative, in metadata', () => '/v1/sessions', () => `{"taskId":"t","instructions":"x","metadata":{"a":[-9007199254740993]}}`, 'body/metadata/a/0'],
    ['a 300-digit integer in metadata', () => '/v1/sessions', () => `{"taskId":"t","instructions":"x","metadata":{"big":${'9'.repeat(300)}}}`, 'body/metadata/big'],
    ['a batch item info', () => '/v1/steps:batch', () => `{"items":[{"sessionId":"${id}","attempt":0,"step":1,"observation":"o","info":{"id":12345678901234567890}}]}`, 'body/items/0/info/id'],
  ];
  for (const [name, path, body, field] of cases) {
    it(`${name}: 400 naming ${field}, nothing stored`, async () => {
      const before = dumpDb(s.dataDir);
      const r = await s.call('POST', path(), body());
      expect(r.status).toBe(400);
      expect(r.body.type).toBe('https://lamer-server.dev/problems/validation');
      expect(r.body.errors).toEqual([{ field, message: 'is an integer beyond +-(2^53 - 1), which cannot be stored exactly; send it as a string' }]);
      expect(dumpDb(s.dataDir)).toBe(before);
    });
  }
});

describe('integer literals a double cannot hold exactly, in typed fields', () => {
  it('a bounded integer field (maxAttempts) answers with its range, the same for the number and for the string', async () => {
    const before = dumpDb(s.dataDir);
    const asNumber = await s.call('POST', '/v1/sessions', `{"taskId":"t","instructions":"x","maxAttempts":99999999999999999999}`);
    expect(asNumber.status).toBe(400);
    expect(asNumber.body.type).toBe('https://lamer-server.dev/problems/validation');
    expect(asNumber.body.errors).toHaveLength(1);
    expect(asNumber.body.errors[0].field).toBe('body/maxAttempts');
    expect(asNumber.body.errors[0].message).toMatch(/^must be <= \d+$/);
    expect(JSON.stringify(asNumber.body)).not.toContain('string');
    const asString = await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x', maxAttempts: '99999999999999999999' });
    expect(asString.status).toBe(400);
    expect(asString.body.errors[0].field).toBe('body/maxAttempts');
    expect(dumpDb(s.dataDir)).toBe(before);
  });

  it('other bounded number fields (reward, sampling.topP) answer with their range too', async () => {
    const before = dumpDb(s.dataDir);
    const r = await s.call('POST', `/v1/sessions/${id}/steps`, `{"attempt":0,"step":1,"observation":"o","reward":12345678901234567890}`);
    expect(r.status).toBe(400);
    expect(r.body.errors).toEqual([{ field: 'body/reward', message: expect.stringMatching(/^must be <= \d+$/) }]);
    const t = await s.call('POST', '/v1/sessions', `{"taskId":"t","instructions":"x","sampling":{"topP":-12345678901234567890}}`);
    expect(t.status).toBe(400);
    expect(t.body.errors).toEqual([{ field: 'body/sampling/topP', message: expect.stringMatching(/^must be >=? 0$/) }]);
    expect(dumpDb(s.dataDir)).toBe(before);
  });
});

describe('empty bodies with a JSON content type', () => {
  it('DELETE /v1/sessions/{id} with content-type application/json and no body closes the session', async () => {
    const c = await s.call('POST', '/v1/sessions', { taskId: 'del', instructions: 'x' });
    const r = await rawCall(s.url, 'DELETE', `/v1/sessions/${c.body.id}`, undefined, { 'content-type': 'application/json' });
    expect(r.status).toBe(200);
    expect(r.body.status).toBe('abandoned');
    // Also with an explicit content-length: 0.
    const c2 = await s.call('POST', '/v1/sessions', { taskId: 'del2', instructions: 'x' });
    const r2 = await rawCall(s.url, 'DELETE', `/v1/sessions/${c2.body.id}`, undefined, { 'content-type': 'application/json', 'content-length': '0' });
    expect(r2.status).toBe(200);
    expect(r2.body.status).toBe('abandoned');
  });

  it('a POST route without a body takes an empty JSON body; one with a body schema still refuses it', async () => {
    const a = await rawCall(s.url, 'POST', '/v1/models/test/activate', undefined, { 'content-type': 'application/json', 'content-length': '0' });
    expect(a.status).toBe(200);
    const e = await rawCall(s.url, 'POST', '/v1/sessions', undefined, { 'content-type': 'application/json', 'content-length': '0' });
    expect(e.status).toBe(400);
    expect(e.body.type).toBe('https://lamer-server.dev/problems/bad-request');
  });
});

describe('slow clients are cut off (LAMER_HEADERS_TIMEOUT_MS, LAMER_REQUEST_TIMEOUT_MS)', () => {
  const HEADERS_MS = 800;
  const REQUEST_MS = 1500;
  let slow: TestServer;
  beforeAll(async () => {
    slow = await startTestServer({ http: { headersTimeoutMs: HEADERS_MS, requestTimeoutMs: REQUEST_MS, keepAliveTimeoutMs: 5000 } });
  });
  afterAll(async () => {
    await slow.close();
  });

  /**
   * Open a raw TCP connection, write `head` at once, then one byte of `dribble` every `everyMs`
   * until the server closes the connection (or `giveUpMs`: then it rejects, so a resolved dribble
   * was cut off by the server). Resolves with what the server sent, how long after connecting it
   * closed and how many bytes were dripped by then.
   */
  async function dribble(head: string, drip: string, everyMs: number, giveUpMs = 10_000): Promise<{ closedAfterMs: number; received: string; dripped: number }> {
    const net = await import('node:net');
    const u = new URL(slow.url);
    return new Promise((resolve, reject) => {
      const t0 = Date.now();
      let received = '';
      let i = 0;
      const sock = net.connect(Number(u.port), u.hostname, () => {
        if (head !== '') sock.write(head);
      });
      const timer = setInterval(() => {
        if (!sock.destroyed && sock.writable && drip !== '') sock.write(drip[i++ % drip.length]!);
      }, everyMs);
      const giveUp = setTimeout(() => {
        clearInterval(timer);
        sock.destroy();
        reject(new Error(`still open after ${giveUpMs} ms`));
      }, giveUpMs);
      sock.on('data', (d: Buffer) => (received += d.toString('utf8')));
      sock.on('error', () => {});
      sock.on('close', () => {
        clearInterval(timer);
        clearTimeout(giveUp);
        resolve({ closedAfterMs: Date.now() - t0, received, dripped: i });
      });
    });
  }

  it('headers dribbled a byte at a time: 408 and closed within the headers timeout', async () => {
    const drip = 'x-slow: ' + 'a'.repeat(92); // 100 bytes: 10 s at one byte per 100 ms
    const r = await dribble('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n', drip, 100, 60_000);
    // Not before the timeout; and cut off by the server, long before the client was done (a count,
    // not a time: under load both clocks stretch alike).
    expect(r.closedAfterMs).toBeGreaterThanOrEqual(HEADERS_MS - 50);
    expect(r.dripped).toBeLessThan(drip.length);
    expect(r.received).toMatch(/^HTTP\/1\.1 408 /);
    expect(r.received).toContain('"type":"https://lamer-server.dev/problems/request-timeout"');
  });

  it('a body dribbled a byte at a time: 408 and closed within the request timeout, nothing stored', async () => {
    const before = dumpDb(slow.dataDir);
    const body = JSON.stringify({ taskId: 'slow', instructions: 'x'.repeat(200) });
    const head = `POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`;
    const r = await dribble(head, body, 100, 60_000);
    expect(r.closedAfterMs).toBeGreaterThanOrEqual(REQUEST_MS - 50);
    expect(r.dripped).toBeLessThan(body.length);
    expect(r.received).toMatch(/^HTTP\/1\.1 408 /);
    expect(dumpDb(slow.dataDir)).toBe(before);
  });

  it('an idle keep-alive connection outlives the headers timeout (LAMER_KEEP_ALIVE_TIMEOUT_MS) and serves the next request', async () => {
    const net = await import('node:net');
    const u = new URL(slow.url);
    const sock = net.connect(Number(u.port), u.hostname);
    let got = '';
    sock.on('data', (d: Buffer) => (got += d.toString('utf8')));
    let closed = false;
    sock.on('close', () => (closed = true));
    sock.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    await new Promise((r) => setTimeout(r, 2 * HEADERS_MS));
    expect(closed).toBe(false);
    sock.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    // Polls until the second answer has arrived; the deadline only bounds how long the test waits.
    await vi.waitFor(() => expect(got.match(/HTTP\/1\.1 \d+/g)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 200']), { timeout: 20_000, interval: 20 });
    sock.destroy();
  });

  it('a request sent on a new connection while the event loop is blocked longer than the headers timeout is answered, not 408', async () => {
    // Node starts a connection's headers clock when it accepts it, and its periodic check runs in
    // the timers phase, before the poll phase reads what arrived during a block (a long synchronous
    // forward pass): without the server's grace turn this request, whose bytes were all there, got 408.
    const net = await import('node:net');
    const u = new URL(slow.url);
    const accepted = new Promise<void>((r) => slow.app.server.once('connection', () => r()));
    const sock = net.connect(Number(u.port), u.hostname);
    let got = '';
    sock.on('data', (d: Buffer) => (got += d.toString('utf8')));
    sock.on('error', () => {});
    const closed = new Promise<void>((r) => sock.on('close', () => r()));
    await accepted;
    sock.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
    const until = Date.now() + 2 * HEADERS_MS;
    while (Date.now() < until) {
      /* blocks the event loop: the request waits in the kernel's socket buffer */
    }
    await closed;
    expect(got).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('a connection that sends nothing is closed; 100 dribbling connections are all closed while others are served', async () => {
    // The dribbles never finish their headers, so each one resolving (not giving up) means the
    // server closed it; /healthz is answered meanwhile (latencies under this load: bench/, not here).
    const idle = dribble('', '', 1000, 60_000);
    const many = Array.from({ length: 100 }, () => dribble('POST /v1/sessions HTTP/1.1\r\n', 'Host: 127.0.0.1\r\n', 300, 60_000));
    await new Promise((r) => setTimeout(r, 300));
    expect((await slow.call('GET', '/healthz')).status).toBe(200);
    const idleClosed = await idle;
    expect(idleClosed.closedAfterMs).toBeGreaterThanOrEqual(HEADERS_MS - 50);
    const closed = await Promise.all(many);
    expect(closed).toHaveLength(100);
    for (const r of closed) expect(r.received).toMatch(/^HTTP\/1\.1 408 /);
  });
});

describe('the request timeout bounds receiving a request, not answering it', () => {
  it('an answer that takes longer than the request timeout is still delivered', async () => {
    const { buildApp } = await import('../src/app.js');
    const { loadConfig } = await import('../src/config.js');
    const { openDatabase } = await import('../src/db/index.js');
    const { sqliteStore } = await import('../src/db/store.js');
    const { TestEngine } = await import('../src/policy/test-engine.js');
    const { tmpDir, call } = await import('./helpers/index.js');
    const dir = tmpDir();
    const config = { ...loadConfig({}), engine: 'test' as const, logLevel: 'silent' as const, dataDir: dir, http: { headersTimeoutMs: 300, requestTimeoutMs: 600, keepAliveTimeoutMs: 5000 } };
    const app = await buildApp(config, { store: sqliteStore(openDatabase(dir)), engine: new TestEngine() });
    // Stands for a long model call (a reflection on CPU can take many seconds).
    app.post('/slow-answer', async (req) => {
      await new Promise((r) => setTimeout(r, 1500));
      return { got: req.body };
    });
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const r = await call(url, 'POST', '/slow-answer', { a: 1 });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ got: { a: 1 } });
    } finally {
      await app.close();
    }
  });
});

describe('HTTP timeout and body-drain configuration', () => {
  it('defaults and LAMER_* variables', async () => {
    const { loadConfig } = await import('../src/config.js');
    expect(loadConfig({}).http).toEqual({ headersTimeoutMs: 10_000, requestTimeoutMs: 60_000, keepAliveTimeoutMs: 72_000, drainBodyBytes: 64 * 1024 * 1024, drainBodyMs: 10_000 });
    expect(
      loadConfig({ LAMER_HEADERS_TIMEOUT_MS: '2000', LAMER_REQUEST_TIMEOUT_MS: '0', LAMER_KEEP_ALIVE_TIMEOUT_MS: '5000', LAMER_BODY_DRAIN_BYTES: '0', LAMER_BODY_DRAIN_MS: '500' }).http,
    ).toEqual({ headersTimeoutMs: 2000, requestTimeoutMs: 0, keepAliveTimeoutMs: 5000, drainBodyBytes: 0, drainBodyMs: 500 });
    expect(() => loadConfig({ LAMER_BODY_DRAIN_BYTES: '-1' })).toThrow(/LAMER_BODY_DRAIN_BYTES/);
    expect(() => loadConfig({ LAMER_HEADERS_TIMEOUT_MS: '20000', LAMER_REQUEST_TIMEOUT_MS: '10000' })).toThrow(/LAMER_HEADERS_TIMEOUT_MS=20000 exceeds/);
    expect(() => loadConfig({ LAMER_HEADERS_TIMEOUT_MS: '5' })).toThrow(/LAMER_HEADERS_TIMEOUT_MS/);
  });
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

/** POST raw bytes (UTF-8 or not) with `contentType`; the answer parsed like `call`'s. */
async function postBytes(path: string, bytes: Uint8Array<ArrayBuffer>, contentType = 'application/json'): Promise<Res> {
  const r = await fetch(s.url + path, { method: 'POST', headers: { 'content-type': contentType }, body: bytes });
  const text = await r.text();
  return { status: r.status, body: text === '' ? null : JSON.parse(text), type: r.headers.get('content-type') ?? '', headers: r.headers };
}

const bytesOf = (...parts: Array<string | number[]>): Buffer<ArrayBuffer> => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : Buffer.from(p))));
const BAD_REQUEST = 'https://lamer-server.dev/problems/bad-request';
const UNSUPPORTED = 'https://lamer-server.dev/problems/unsupported-media-type';

describe('JSON bodies must be UTF-8', () => {
  const CREATE = '{"taskId":"t","instructions":"a';
  it.each<[string, number[]]>([
    ['0xff 0xfe (never in UTF-8)', [0xff, 0xfe]],
    ['a lone continuation byte', [0x80]],
    ['an overlong "/" (0xc0 0xaf)', [0xc0, 0xaf]],
    ['a UTF-8-encoded surrogate (0xed 0xa0 0x80)', [0xed, 0xa0, 0x80]],
    ['a sequence cut short (0xe2 0x82 then ")', [0xe2, 0x82]],
  ])('%s inside a string -> 400 bad-request naming the offset; nothing stored', async (_name, bad) => {
    const before = dumpDb(s.dataDir);
    const r = await postBytes('/v1/sessions', bytesOf(CREATE, bad, 'b"}'));
    expect(r.status).toBe(400);
    expect(r.type).toMatch(/^application\/problem\+json/);
    expect(r.body.type).toBe(BAD_REQUEST);
    const hex = bad[0]!.toString(16).padStart(2, '0');
    expect(r.body.detail).toBe(`body is not valid UTF-8 (the byte at offset ${CREATE.length}, 0x${hex}); JSON must be sent as UTF-8`);
    expect(dumpDb(s.dataDir)).toBe(before);
  });

  it('in a step observation and in a batch item: 400 for the whole request, nothing recorded', async () => {
    const before = dumpDb(s.dataDir);
    const step = await postBytes(`/v1/sessions/${id}/steps`, bytesOf('{"attempt":0,"step":1,"observation":"', [0xff], '"}'));
    expect(step.status).toBe(400);
    expect(step.body.type).toBe(BAD_REQUEST);
    const batch = await postBytes('/v1/steps:batch', bytesOf(`{"items":[{"sessionId":"${id}","attempt":0,"step":1,"observation":"`, [0xfe], '"}]}'));
    expect(batch.status).toBe(400);
    expect(batch.body.detail).toMatch(/^body is not valid UTF-8 \(the byte at offset \d+, 0xfe\)/);
    expect(dumpDb(s.dataDir)).toBe(before);
  });

  it('non-ASCII UTF-8 (é, an emoji, CJK) is kept exactly as sent, in a session and in a step', async () => {
    const text = 'café 😀 地図';
    const c = await postBytes('/v1/sessions', bytesOf(`{"taskId":"utf8","instructions":"${text}","metadata":{"note":"${text}"}}`));
    expect(c.status).toBe(201);
    expect(c.body.metadata).toEqual({ note: text });
    const sid = c.body.id as string;
    const st = await postBytes(`/v1/sessions/${sid}/steps`, bytesOf(`{"attempt":0,"step":0,"observation":"${text}","availableActions":["é","😀"]}`));
    expect(st.status).toBe(200);
    expect(['é', '😀']).toContain(st.body.action);
    const t = await s.call('GET', `/v1/sessions/${sid}/trajectory`);
    expect(t.body.steps[0]).toMatchObject({ observation: text, availableActions: ['é', '😀'] });
    expect(t.body.steps[0].prompt).toContain(text);
  });

  it.each(['application/json; charset=latin1', 'application/json; charset="ISO-8859-1"', 'application/json;charset=utf-16', 'application/json; charset=utf-8; charset=latin1'])(
    'content-type %s -> 415 naming the charset; nothing stored',
    async (contentType) => {
      const before = dumpDb(s.dataDir);
      const r = await postBytes('/v1/sessions', bytesOf('{"taskId":"t","instructions":"x"}'), contentType);
      expect(r.status).toBe(415);
      expect(r.type).toMatch(/^application\/problem\+json/);
      expect(r.body.type).toBe(UNSUPPORTED);
      const named = /charset="?([^";]+)"?$/.exec(contentType)![1]!.toLowerCase();
      expect(r.body.detail).toBe(`charset=${named} is not supported; send JSON as UTF-8 (content-type: application/json, or application/json; charset=utf-8)`);
      expect(dumpDb(s.dataDir)).toBe(before);
    },
  );

  it.each(['application/json; charset=utf-8', 'application/json; charset=UTF-8', 'application/json;charset="utf-8"', 'application/json; charset=utf8'])(
    'content-type %s is accepted and read as UTF-8',
    async (contentType) => {
      const r = await postBytes('/v1/sessions', bytesOf('{"taskId":"t","instructions":"é"}'), contentType);
      expect(r.status).toBe(201);
      expect((await s.call('GET', `/v1/sessions/${r.body.id}`)).status).toBe(200);
    },
  );

  it('the body limit still answers 413 before any decoding', async () => {
    const small = await startTestServer({ limits: { ...(await import('../src/config.js')).defaultLimits, bodyBytes: 1024 } });
    try {
      const r = await call(small.url, 'POST', '/v1/sessions', { taskId: 't', instructions: 'é'.repeat(600) });
      expect(r.status).toBe(413);
      expect(r.body.type).toBe('https://lamer-server.dev/problems/payload-too-large');
    } finally {
      await small.close();
    }
  });

  it('firstInvalidUtf8 finds invalid bytes exactly where a strict decoder fails', () => {
    const strict = new TextDecoder('utf-8', { fatal: true });
    const valid = (b: Uint8Array) => {
      try {
        strict.decode(b);
        return true;
      } catch {
        return false;
      }
    };
    // random bytes, and UTF-8 text with a few random bytes between two valid parts
    const utf8 = (x: string) => Buffer.from(x, 'utf8');
    const mixed = fc
      .tuple(fc.string({ unit: 'binary', maxLength: 8 }), fc.uint8Array({ maxLength: 4 }), fc.string({ unit: 'binary', maxLength: 8 }))
      .map(([a, mid, c]) => new Uint8Array(Buffer.concat([utf8(a), Buffer.from(mid), utf8(c)])));
    fc.assert(
      fc.property(fc.oneof(fc.uint8Array({ maxLength: 24 }), mixed), (b) => {
        const at = firstInvalidUtf8(b);
        expect(at === -1).toBe(valid(b));
        // everything before the reported byte is UTF-8
        if (at >= 0) expect(valid(b.subarray(0, at))).toBe(true);
      }),
      { numRuns: 5000 },
    );
    expect(firstInvalidUtf8(Buffer.from('café 😀', 'utf8'))).toBe(-1);
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

/**
 * LAMER_TRUST_PROXY (docs/deploy.md, "behind a gateway"; Fastify `trustProxy` in src/app.ts):
 * X-Forwarded-For is believed only from the configured gateway addresses. Observed through the
 * per-IP rate limit (no API keys): with the gateway trusted, two end clients behind it get separate
 * buckets; without it, the header is ignored and every request counts against the gateway's own
 * address.
 */
describe('LAMER_TRUST_PROXY', () => {
  const protection = { rateLimitMax: 1, rateLimitWindowSeconds: 60, maxOpenSessionsPerTenant: 0, maxQueuedSteps: 0, overloadRetryAfterSeconds: 1 };
  const fromClient = (ip: string) => ({ 'x-forwarded-for': ip });
  let server: TestServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('from a trusted gateway, each forwarded client has its own rate-limit bucket', async () => {
    server = await startTestServer({ trustProxy: ['127.0.0.1'], protection });
    expect((await call(server.url, 'GET', '/v1/sessions', undefined, fromClient('203.0.113.5'))).status).toBe(200);
    expect((await call(server.url, 'GET', '/v1/sessions', undefined, fromClient('203.0.113.6'))).status).toBe(200);
    const again = await call(server.url, 'GET', '/v1/sessions', undefined, fromClient('203.0.113.5'));
    expect(again.status).toBe(429);
  });

  it('without it, X-Forwarded-For is ignored: the header cannot buy a fresh bucket', async () => {
    server = await startTestServer({ protection });
    expect((await call(server.url, 'GET', '/v1/sessions', undefined, fromClient('203.0.113.5'))).status).toBe(200);
    const spoofed = await call(server.url, 'GET', '/v1/sessions', undefined, fromClient('203.0.113.6'));
    expect(spoofed.status).toBe(429);
  });
});

describe('every answer says X-Content-Type-Options: nosniff', () => {
  /** The raw header block of one request written as is on a new socket (read until the server closes). */
  async function rawHeaders(request: string): Promise<string> {
    const { connect } = await import('node:net');
    const u = new URL(s.url);
    return new Promise((resolve, reject) => {
      const sock = connect(Number(u.port), u.hostname);
      const chunks: Buffer[] = [];
      sock.once('error', reject);
      sock.on('data', (c: Buffer) => chunks.push(c));
      sock.once('close', () => resolve(Buffer.concat(chunks).toString('latin1').split('\r\n\r\n')[0]!));
      sock.write(request);
    });
  }

  it('successes, every kind of error, the dashboard, /docs, and answers from the router and the HTTP parser', async () => {
    const answers: Array<[string, Res]> = [
      ['healthz', await s.call('GET', '/healthz')],
      ['metrics', await s.call('GET', '/metrics')],
      ['list', await s.call('GET', '/v1/sessions')],
      ['created', await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' })],
      ['validation', await s.call('POST', '/v1/sessions', { taskId: 1 })],
      ['not found', await s.call('GET', '/v1/sessions/nope')],
      ['no route', await s.call('GET', '/nope')],
      ['wrong method', await s.call('PATCH', '/v1/sessions')],
      ['415', await s.call('POST', '/v1/sessions', 'x', { 'content-type': 'text/plain' })],
      ['413', await s.call('POST', '/v1/sessions', JSON.stringify({ taskId: 't', instructions: 'x'.repeat(3 * 1024 * 1024) }))],
      ['414', await rawCall(s.url, 'GET', `/v1/sessions/${'x'.repeat(300)}`)],
      ['bad URL', await rawCall(s.url, 'GET', '/v1/sessions/%E0%A4%A')],
      ['dashboard', await s.call('GET', '/ui/')],
      ['dashboard asset', await s.call('GET', '/ui/assets/app.js')],
      ['docs', await s.call('GET', '/docs/')],
      ['openapi', await s.call('GET', '/docs/json')],
    ];
    for (const [name, r] of answers) {
      expect(r.status, name).toBeGreaterThan(0);
      expect(r.headers.get('x-content-type-options'), `${name} (${r.status})`).toBe('nosniff');
    }
    expect(answers.find(([n]) => n === '414')![1].status).toBe(414);
    // 431 and 400 are written on the raw socket by Node's parser error handler
    const huge = await rawHeaders(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nx-big: ${'y'.repeat(20_000)}\r\n\r\n`);
    expect(huge).toMatch(/^HTTP\/1\.1 431 /);
    expect(huge).toMatch(/\r\nx-content-type-options: nosniff\r\n/i);
    const garbage = await rawHeaders('NOT HTTP AT ALL\r\n\r\n');
    expect(garbage).toMatch(/^HTTP\/1\.1 400 /);
    expect(garbage).toMatch(/\r\nx-content-type-options: nosniff\r\n/i);
  });
});
