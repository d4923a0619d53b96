/**
 * Protection (src/plugins/external/rate-limit.ts, the agent's queue bound) over real HTTP with small limits: a load test past the rate limit
 * (per API key), the bound on queued model calls and the cap on open sessions gets 429 / 503 /
 * 409 problem+json answers (429 and 503 with Retry-After), /healthz stays up, and every step that
 * was answered 200 is recorded, while refused steps left no record and succeed when retried.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import Database from 'better-sqlite3';
import path from 'node:path';
import { buildApp } from '../../../src/app.js';
import { loadConfig } from '../../../src/config.js';
import { openDatabase } from '../../../src/db/index.js';
import { sqliteStore } from '../../../src/db/store.js';
import type { ActRequest, ReflectRequest } from '../../../src/policy/engine.js';
import { TestEngine } from '../../../src/policy/test-engine.js';
import { rateLimitKey } from '../../../src/plugins/external/rate-limit.js';
import { selectTrainingRecords } from '../../../src/training/data/select.js';
import { call, tmpDir, type Res } from '../../helpers/index.js';

/** The bound on model calls in the engine at once (LAMER_MAX_QUEUED_STEPS) in this file. */
const MAX_QUEUED = 2;

/**
 * TestEngine whose model calls take `delayMs`, so that concurrent steps queue up. After `hold()`
 * the calls also wait until `release()`, so that concurrent steps reach the queue bound whatever
 * the speed of the machine; `maxInFlight` is the most calls that were inside at once.
 */
class SlowEngine extends TestEngine {
  delayMs = 40;
  inFlight = 0;
  maxInFlight = 0;
  private gate: { held: Promise<void>; open: () => void } | null = null;
  hold(): void {
    let open!: () => void;
    const held = new Promise<void>((r) => (open = r));
    this.gate = { held, open };
  }
  release(): void {
    this.gate?.open();
    this.gate = null;
  }
  private async slow<T>(fn: () => Promise<T>): Promise<T> {
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      // More calls inside than the bound allows: let them all go, so that the test fails on its
      // counts instead of waiting for a refusal that will not come.
      if (this.inFlight > MAX_QUEUED) this.release();
      await this.gate?.held;
      await new Promise((r) => setTimeout(r, this.delayMs));
      return await fn();
    } finally {
      this.inFlight--;
    }
  }
  override act(req: ActRequest) {
    return this.slow(() => super.act(req));
  }
  override reflect(req: ReflectRequest) {
    return this.slow(() => super.reflect(req));
  }
}

const KEY_A = 'key-a-0123456789';
const KEY_B = 'key-b-0123456789';
const RATE_MAX = 60;
const auth = (k: string) => ({ authorization: `Bearer ${k}` });

let app: FastifyInstance;
let engine: SlowEngine;
let url: string;
let dir: string;

beforeAll(async () => {
  dir = tmpDir();
  const base = loadConfig({});
  const config = {
    ...base,
    engine: 'test' as const,
    logLevel: 'silent' as const,
    dataDir: dir,
    apiKeys: [
      { key: KEY_A, tenant: 'a', admin: false },
      { key: KEY_B, tenant: 'b', admin: false },
    ],
    protection: { rateLimitMax: RATE_MAX, rateLimitWindowSeconds: 60, maxOpenSessionsPerTenant: 4, maxQueuedSteps: MAX_QUEUED, overloadRetryAfterSeconds: 1 },
  };
  app = await buildApp(config, { store: sqliteStore(openDatabase(dir)), engine: (engine = new SlowEngine()) });
  url = await app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await app.close();
});

function expectProblem(r: Res, status: number, kind: string) {
  expect(r.status).toBe(status);
  expect(r.type).toMatch(/^application\/problem\+json/);
  expect(r.body.type).toBe(`https://lamer-server.dev/problems/${kind}`);
  expect(r.body.status).toBe(status);
}

/** Positions (attempt/step) of the action records of a session, from the database. */
function recordedPositions(id: string): string[] {
  const db = new Database(path.join(dir, 'lamer.db'), { readonly: true });
  try {
    const rows = db.prepare("SELECT attempt, step FROM steps WHERE session_id = ? AND kind = 'action' ORDER BY attempt, step").all(id) as Array<{ attempt: number; step: number }>;
    return rows.map((r) => `${r.attempt}/${r.step}`);
  } finally {
    db.close();
  }
}

describe('protection under load', () => {
  it('429 rate-limited, 503 overloaded and 409 too-many-sessions; healthz up; every answered step recorded', async () => {
    let requestsA = 0;
    const callA = (method: string, p: string, body?: unknown) => {
      requestsA++;
      return call(url, method, p, body, auth(KEY_A));
    };
    // Open sessions: 4 allowed per tenant, the 5th is refused until one is closed.
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await callA('POST', '/v1/sessions', { taskId: `t${i}`, instructions: 'x', maxSteps: 1000 });
      expect(r.status).toBe(201);
      ids.push(r.body.id);
    }
    const fifth = await callA('POST', '/v1/sessions', { taskId: 't4', instructions: 'x' });
    expectProblem(fifth, 409, 'too-many-sessions');
    expect(fifth.headers.get('retry-after')).toBeNull();
    // at the cap, a create the server would refuse for its body is refused for the cap
    expectProblem(await callA('POST', '/v1/sessions', { taskId: 't4', instructions: 'x', modelVersion: 'no-such-version' }), 409, 'too-many-sessions');
    // Another tenant has its own cap.
    const other = await call(url, 'POST', '/v1/sessions', { taskId: 'b0', instructions: 'x' }, auth(KEY_B));
    expect(other.status).toBe(201);

    // Load: 4 sessions step concurrently (2 model calls may queue), retrying a refused step at once,
    // until the rate limit of key A stops them. The first model calls are held until a step has
    // been refused: with 2 calls held, the other sessions' steps are refused whatever the timing.
    engine.hold();
    const answered = new Map<string, string[]>(ids.map((id) => [id, []]));
    const counts = { ok: 0, overloaded: 0, limited: 0 };
    const retryAfter503 = new Set<string>();
    const retryAfter429 = new Set<string>();
    await Promise.all(
      ids.map(async (id) => {
        let step = 0;
        for (;;) {
          const r = await callA('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step, observation: `obs ${step}` });
          if (r.status === 200) {
            expect(r.body.step).toBe(step);
            answered.get(id)!.push(`0/${step}`);
            counts.ok++;
            step++;
          } else if (r.status === 503) {
            expectProblem(r, 503, 'overloaded');
            engine.release();
            retryAfter503.add(r.headers.get('retry-after') ?? 'missing');
            counts.overloaded++;
          } else {
            expectProblem(r, 429, 'rate-limited');
            retryAfter429.add(r.headers.get('retry-after') ?? 'missing');
            counts.limited++;
            break;
          }
          const h = await call(url, 'GET', '/healthz');
          expect(h.status).toBe(200);
        }
      }),
    );
    expect(counts.overloaded).toBeGreaterThan(0);
    expect(engine.maxInFlight).toBe(MAX_QUEUED);
    expect(counts.limited).toBe(4);
    expect([...retryAfter503]).toEqual(['1']);
    for (const v of retryAfter429) expect(Number(v)).toBeGreaterThanOrEqual(1);
    for (const v of retryAfter429) expect(Number(v)).toBeLessThanOrEqual(60);
    // Exactly RATE_MAX requests of key A were let through (6 creates + step posts answered 200 or 503).
    expect(6 + counts.ok + counts.overloaded).toBe(RATE_MAX);
    expect(requestsA).toBe(RATE_MAX + counts.limited);

    // Every step answered 200 is recorded, and nothing else (refused steps left no record).
    for (const id of ids) expect(recordedPositions(id)).toEqual(answered.get(id));
    expect(counts.ok).toBe(ids.reduce((n, id) => n + recordedPositions(id).length, 0));

    // Key B is counted apart: it still gets answers, and the server is up.
    const b = await call(url, 'GET', '/v1/sessions', undefined, auth(KEY_B));
    expect(b.status).toBe(200);
    expect(b.headers.get('x-ratelimit-remaining')).toBe(String(RATE_MAX - 2));
    expect((await call(url, 'GET', '/healthz')).status).toBe(200);
    const limited = await callA('GET', '/v1/sessions');
    expectProblem(limited, 429, 'rate-limited');

    // /metrics (not rate limited) counted the refusals.
    const m = await call(url, 'GET', '/metrics');
    expect(m.status).toBe(200);
    const text = String(m.body);
    expect(text).toContain(`lamer_rate_limited_total ${counts.limited + 1}`);
    expect(text).toContain(`lamer_step_requests_total{outcome="overloaded"} ${counts.overloaded}`);
    expect(text).toContain(`lamer_step_requests_total{outcome="recorded"} ${counts.ok}`);
    expect(text).toContain('lamer_model_calls_in_flight 0');
  });

  it('rate-limit keys: the API key digest, or the client IP without one', () => {
    const req = (h: Record<string, string>) => ({ headers: h, ip: '10.0.0.7' }) as never;
    expect(rateLimitKey(req({ authorization: 'Bearer abc' }))).toBe(
      'key:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
    expect(rateLimitKey(req({}))).toBe('ip:10.0.0.7');
  });
});

describe('idle expiry and training data', () => {
  it('an expired session is kept, answers 409 session-not-active, and is never selected for training', async () => {
    const created = await call(url, 'POST', '/v1/sessions', { taskId: 'idle', instructions: 'x' }, auth(KEY_B));
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    expect((await call(url, 'POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o' }, auth(KEY_B))).status).toBe(200);
    // as of 1 ms after its last update (the step), with a TTL of 0
    const updatedAt = (await call(url, 'GET', `/v1/sessions/${id}`, undefined, auth(KEY_B))).body.updatedAt as string;
    const expired = await app.agent.expireIdle(0, Date.parse(updatedAt) + 1);
    expect(expired).toContain(id);
    const got = await call(url, 'GET', `/v1/sessions/${id}`, undefined, auth(KEY_B));
    expect(got.body.status).toBe('expired');
    const r = await call(url, 'POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 1, observation: 'o' }, auth(KEY_B));
    expectProblem(r, 409, 'session-not-active');
    const records = await selectTrainingRecords(app.repos.trainingData, {});
    expect(records.filter((x) => x.sessionId === id)).toEqual([]);
    expect(recordedPositions(id)).toEqual(['0/0']);
  });
});

describe('batch route under the queue bound', () => {
  it('items over the bound are 503 overloaded with Retry-After on the answer; reposting them succeeds', async () => {
    const listed = await call(url, 'GET', '/v1/sessions?status=active', undefined, auth(KEY_B));
    const ids: string[] = listed.body.items.map((x: { id: string }) => x.id);
    while (ids.length < 4) {
      const r = await call(url, 'POST', '/v1/sessions', { taskId: `bb${ids.length}`, instructions: 'x' }, auth(KEY_B));
      expect(r.status).toBe(201);
      ids.push(r.body.id);
    }
    const items = ids.map((sessionId) => ({ sessionId, attempt: 0, step: 0, observation: 'start' }));
    const r = await call(url, 'POST', '/v1/steps:batch', { items }, auth(KEY_B));
    expect(r.status).toBe(200);
    const ok = r.body.results.map((x: { ok: boolean }) => x.ok);
    expect(ok.filter(Boolean)).toHaveLength(2);
    for (const x of r.body.results.filter((y: { ok: boolean }) => !y.ok)) {
      expect(x.error.status).toBe(503);
      expect(x.error.type).toBe('https://lamer-server.dev/problems/overloaded');
    }
    expect(r.headers.get('retry-after')).toBe('1');
    const again = items.filter((_, i) => !ok[i]);
    const r2 = await call(url, 'POST', '/v1/steps:batch', { items: again }, auth(KEY_B));
    expect(r2.body.results.map((x: { ok: boolean }) => x.ok)).toEqual([true, true]);
    expect(r2.headers.get('retry-after')).toBeNull();
    for (const id of ids) expect(recordedPositions(id)).toEqual(['0/0']);
  });
});

describe('protection configuration', () => {
  it('defaults and LAMER_* variables', () => {
    expect(loadConfig({}).protection).toEqual({
      rateLimitMax: 0,
      rateLimitWindowSeconds: 60,
      maxOpenSessionsPerTenant: 1000,
      maxQueuedSteps: 1024,
      overloadRetryAfterSeconds: 1,
    });
    expect(
      loadConfig({
        LAMER_RATE_LIMIT_MAX: '100',
        LAMER_RATE_LIMIT_WINDOW_SECONDS: '10',
        LAMER_MAX_OPEN_SESSIONS_PER_TENANT: '0',
        LAMER_MAX_QUEUED_STEPS: '8',
        LAMER_OVERLOAD_RETRY_AFTER_SECONDS: '5',
      }).protection,
    ).toEqual({ rateLimitMax: 100, rateLimitWindowSeconds: 10, maxOpenSessionsPerTenant: 0, maxQueuedSteps: 8, overloadRetryAfterSeconds: 5 });
    expect(() => loadConfig({ LAMER_RATE_LIMIT_WINDOW_SECONDS: '0' })).toThrow(/LAMER_RATE_LIMIT_WINDOW_SECONDS=0/);
    expect(() => loadConfig({ LAMER_MAX_QUEUED_STEPS: '-1' })).toThrow(/LAMER_MAX_QUEUED_STEPS/);
  });
});
