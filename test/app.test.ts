/**
 * JSON body handling of src/app.ts over real HTTP: a number that is not finite after parsing
 * (an exponent overflow, or an integer literal too long for a double) is a 400 naming its path
 * wherever it is (metadata, info, batch items) and nothing is stored; an empty body with a JSON
 * content type is no body on DELETE and on routes that take none.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dumpDb, rawCall, startTestServer, type TestServer } from './server/helpers.js';

let s: TestServer;
let id: string;
const BIG = '1' + '0'.repeat(400); // 401 digits: JSON.parse gives Infinity

beforeAll(async () => {
  s = await startTestServer();
  id = (await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' })).body.id;
  expect((await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o' })).status).toBe(200);
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

  it('large but finite numbers are kept as sent', async () => {
    const big = '9'.repeat(300);
    const r = await s.call('POST', '/v1/sessions', `{"taskId":"t","instructions":"x","metadata":{"big":${big},"small":1e-400,"max":1.7976931348623157e308}}`);
    expect(r.status).toBe(201);
    expect(r.body.metadata).toEqual({ big: Number(big), small: 0, max: 1.7976931348623157e308 });
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
