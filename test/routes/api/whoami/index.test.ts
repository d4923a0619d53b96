/**
 * `GET /v1/whoami`: the key's tenant and admin flag (what the dashboard reads at sign-in); 401
 * without a key or with an unknown one while keys are configured; tenant default, admin, without keys.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../../helpers/index.js';

let keyed: TestServer;
let open: TestServer;
beforeAll(async () => {
  keyed = await startTestServer({ apiKeys: [{ key: 'k-admin', tenant: 'acme', admin: true }, { key: 'k-user', tenant: 'acme', admin: false }] });
  open = await startTestServer();
});
afterAll(async () => {
  await keyed.close();
  await open.close();
});

describe('GET /v1/whoami', () => {
  it('answers the tenant and admin flag of the key', async () => {
    const a = await keyed.call('GET', '/v1/whoami', undefined, { authorization: 'Bearer k-admin' });
    expect(a.status).toBe(200);
    expect(a.body).toEqual({ tenant: 'acme', admin: true, authRequired: true });
    const u = await keyed.call('GET', '/v1/whoami', undefined, { authorization: 'Bearer k-user' });
    expect(u.body).toEqual({ tenant: 'acme', admin: false, authRequired: true });
  });

  it('is 401 problem+json without a key or with an unknown key', async () => {
    for (const headers of [{}, { authorization: 'Bearer nope' }] as Record<string, string>[]) {
      const r = await keyed.call('GET', '/v1/whoami', undefined, headers);
      expect(r.status).toBe(401);
      expect(r.type).toMatch(/^application\/problem\+json/);
      expect(r.body.type).toBe('https://lamer-server.dev/problems/unauthorized');
    }
  });

  it('without keys configured every request is tenant default with admin rights', async () => {
    const r = await open.call('GET', '/v1/whoami');
    expect(r.body).toEqual({ tenant: 'default', admin: true, authRequired: false });
  });
});
