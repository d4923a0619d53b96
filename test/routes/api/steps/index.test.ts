/**
 * `POST /v1/steps:batch` under the `info` size limit: an item whose `info` is over
 * LAMER_MAX_INFO_BYTES fails alone with a 400 naming `body/items/<i>/info`; the others succeed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultLimits } from '../../../../src/config.js';
import { countRows, sessionAfterFirstStep, startTestServer, type TestServer } from '../../../helpers/index.js';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ limits: { ...defaultLimits, infoBytes: 1000 } });
});
afterAll(async () => {
  await s.close();
});

describe('batch items and the info limit', () => {
  it('the oversized item fails alone, naming its field; the step can then be posted', async () => {
    const a = (await s.call('POST', '/v1/sessions', { taskId: 'a', instructions: 'x' })).body.id;
    const b = (await s.call('POST', '/v1/sessions', { taskId: 'b', instructions: 'x' })).body.id;
    const r = await s.call('POST', '/v1/steps:batch', {
      items: [
        { sessionId: a, attempt: 0, step: 0, observation: 'o', info: { k: 'v' } },
        { sessionId: b, attempt: 0, step: 0, observation: 'o', info: { k: 'v'.repeat(1000) } },
      ],
    });
    expect(r.status).toBe(200);
    expect(r.body.results[0].ok).toBe(true);
    expect(r.body.results[1]).toMatchObject({
      ok: false,
      error: { status: 400, type: 'https://lamer-server.dev/problems/validation', errors: [{ field: 'body/items/1/info' }] },
    });
    expect(r.body.results[1].error.detail).toContain('LAMER_MAX_INFO_BYTES');
    const again = await s.call('POST', '/v1/steps:batch', { items: [{ sessionId: b, attempt: 0, step: 0, observation: 'o', info: { k: 'v' } }] });
    expect(again.body.results[0].ok).toBe(true);
  });
});

const VALIDATION = 'https://lamer-server.dev/problems/validation';

describe('POST /v1/steps:batch validates each item on its own', () => {
  let s: TestServer;
  let id: string;
  beforeAll(async () => {
    s = await startTestServer();
    id = await sessionAfterFirstStep(s);
  });
  afterAll(async () => {
    await s.close();
  });

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
