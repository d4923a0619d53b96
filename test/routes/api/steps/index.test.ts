/**
 * `POST /v1/steps:batch` under the `info` size limit: an item whose `info` is over
 * LAMER_MAX_INFO_BYTES fails alone with a 400 naming `body/items/<i>/info`; the others succeed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultLimits } from '../../../../src/config.js';
import { startTestServer, type TestServer } from '../../../helpers/index.js';

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
