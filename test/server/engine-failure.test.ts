/**
 * A failing policy engine: the step is 503 engine-unavailable, nothing is recorded, and the same
 * step succeeds once the engine recovers. /readyz is 503 while the active model is not loaded.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/index.js';
import { EngineError, type ActRequest } from '../../src/policy/engine.js';
import { TestEngine } from '../../src/policy/test-engine.js';
import { call, dumpDb, tmpDir } from './helpers.js';

class FlakyEngine extends TestEngine {
  failing = false;
  unloaded = false;
  /** Report this many earliest steps as dropped to fit the context. */
  drop = 0;
  override async act(req: ActRequest) {
    if (this.failing) throw new EngineError('out of memory');
    const g = await super.act(req);
    return { ...g, droppedSteps: Math.min(this.drop, req.prompt.steps.length) };
  }
  override isLoaded(version: string): boolean {
    return !this.unloaded && super.isLoaded(version);
  }
}

let app: FastifyInstance;
let url: string;
let dir: string;
const engine = new FlakyEngine();

beforeAll(async () => {
  dir = tmpDir();
  const config = { ...loadConfig({}), engine: 'test' as const, logLevel: 'silent' as const, dataDir: dir, apiKeys: [] };
  app = await buildApp(config, { database: openDatabase(dir), engine });
  url = await app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await app.close();
});

describe('engine failures', () => {
  it('503 engine-unavailable records nothing; the retry after recovery succeeds', async () => {
    const id = (await call(url, 'POST', '/v1/sessions', { taskId: 't', instructions: 'x' })).body.id;
    const before = dumpDb(dir);
    engine.failing = true;
    const r = await call(url, 'POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o' });
    expect(r.status).toBe(503);
    expect(r.type).toContain('application/problem+json');
    expect(r.body).toMatchObject({ type: 'https://lamer-server.dev/problems/engine-unavailable', detail: 'out of memory' });
    expect(dumpDb(dir)).toBe(before);
    engine.failing = false;
    const ok = await call(url, 'POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o' });
    expect(ok.status).toBe(200);
    expect(ok.body.session.next).toEqual({ attempt: 0, step: 1 });
  });

  it('the stored prompt is the one the engine saw: dropped steps are left out', async () => {
    const id = (await call(url, 'POST', '/v1/sessions', { taskId: 't', instructions: 'RULES' })).body.id;
    engine.drop = 1;
    for (let t = 0; t < 3; t++) {
      expect((await call(url, 'POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: t, observation: `O${t}` })).status).toBe(200);
    }
    engine.drop = 0;
    const rows = (await call(url, 'GET', `/v1/sessions/${id}/trajectory`)).body.steps;
    expect(rows.map((r: any) => r.droppedSteps)).toEqual([0, 1, 1]);
    expect(rows[2].prompt).toBe(`RULES\nInitial observation:\nO0\nObservation:\nO1\nAction: ${rows[1].action}\nObservation:\nO2\nAction:`);
  });

  it('/readyz is 503 while the active model is not loaded', async () => {
    engine.unloaded = true;
    const r = await call(url, 'GET', '/readyz');
    expect(r.status).toBe(503);
    expect(r.body).toMatchObject({ status: 'not-ready', database: true, model: { version: 'test', loaded: false } });
    engine.unloaded = false;
    expect((await call(url, 'GET', '/readyz')).status).toBe(200);
  });
});
