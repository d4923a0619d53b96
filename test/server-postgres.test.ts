/**
 * The server on PostgreSQL (LAMER_DATABASE_URL, src/server.ts openStore): real servers on ephemeral
 * ports over a real PostgreSQL on loopback (test/helpers/postgres.ts; skipped, saying why, where
 * none can start). No owner lock: servers on one data directory and one database start side by
 * side and serve the same sessions; `/readyz` follows the database.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { buildApp } from '../src/app.js';
import { loadConfig, type PostgresConfig } from '../src/config.js';
import { openPgDatabase } from '../src/db/pg/connection.js';
import { pgRepositories } from '../src/db/pg/repositories.js';
import { pgStore } from '../src/db/pg/store.js';
import { sessionStats } from '../src/agent/session-stats.js';
import { TestEngine } from '../src/policy/test-engine.js';
import { call, startTestServer, tmpDir, writeTinyGptCheckpoint, type TestServer } from './helpers/index.js';
import { postgresForTests, startPostgres } from './helpers/postgres.js';
import { finishTwice } from './helpers/stats-sessions.js';

const pg = await postgresForTests();

/** The store settings of a server on `url`: a small pool, a short poll. */
export function pgSettings(url: string, over: Partial<PostgresConfig> = {}): PostgresConfig {
  return { url, maxConnections: 4, connectTimeoutMs: 5_000, statementTimeoutMs: 30_000, idleTimeoutMs: 30_000, migrationLockTimeoutMs: 60_000, pollMs: 200, ...over };
}

const open: TestServer[] = [];
afterAll(async () => {
  for (const s of open.splice(0)) await s.close();
});

async function server(url: string, dataDir: string, over: Partial<Parameters<typeof startTestServer>[0]> = {}): Promise<TestServer> {
  const s = await startTestServer({ dataDir, postgres: pgSettings(url), ...over });
  open.push(s);
  return s;
}

describe.skipIf(!pg)('one server on PostgreSQL', () => {
  it('keeps sessions in the database: a second server on the same data directory starts beside it and goes on with them', async () => {
    const url = await pg!.freshDatabase();
    const dir = tmpDir('lamer-pg-server-');
    const a = await server(url, dir);
    const id = (await a.call('POST', '/v1/sessions', { taskId: 't', instructions: 'Reach the goal.', maxAttempts: 2, maxSteps: 5 })).body.id as string;
    expect((await a.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'start' })).status).toBe(200);
    // no owner lock on PostgreSQL, and no SQLite file in the data directory
    const b = await server(url, dir);
    expect(fs.existsSync(path.join(dir, 'lamer.db'))).toBe(false);
    expect(fs.existsSync(path.join(dir, 'lamer.lock'))).toBe(false);
    expect((await b.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 1, observation: 'next', reward: 1 })).status).toBe(200);
    await a.close();
    const c = await server(url, dir);
    const got = await c.call('GET', `/v1/sessions/${id}`);
    expect(got.body).toMatchObject({ id, status: 'active' });
    const traj = await c.call('GET', `/v1/sessions/${id}/trajectory`);
    expect(traj.body.steps.map((s: { step: number }) => s.step)).toEqual([0, 1]);
    expect((await c.call('GET', '/readyz')).body).toMatchObject({ status: 'ready', database: true, storage: 'ok' });
  }, 120_000);

  it('/readyz is 503 while the database refuses connections, and ready again once it takes them', async () => {
    const url = await pg!.freshDatabase();
    const name = new URL(url).pathname.slice(1);
    const s = await server(url, tmpDir('lamer-pg-ready-'));
    expect((await s.call('GET', '/readyz')).status).toBe(200);
    await pg!.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
    await pg!.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
    try {
      await vi.waitFor(async () => expect((await s.call('GET', '/readyz')).status).toBe(503), { timeout: 20_000, interval: 100 });
      expect((await s.call('GET', '/readyz')).body).toMatchObject({ status: 'not-ready', database: false });
    } finally {
      await pg!.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
    }
    await vi.waitFor(async () => expect((await s.call('GET', '/readyz')).status).toBe(200), { timeout: 20_000, interval: 100 });
  }, 120_000);

  it('a database that went away: steps are 503 storage-unavailable (nothing recorded), /readyz 503', async () => {
    const own = await startPostgres();
    if ('skip' in own) return;
    try {
      const s = await server(await own.freshDatabase(), tmpDir('lamer-pg-gone-'));
      const id = (await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' })).body.id as string;
      await own.stop();
      const r = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o' });
      expect(r.status).toBe(503);
      expect(r.body).toMatchObject({ type: expect.stringContaining('storage-unavailable') });
      expect(r.headers.get('retry-after')).not.toBeNull();
      expect((await s.call('GET', '/readyz')).body).toMatchObject({ status: 'not-ready', database: false });
    } finally {
      await own.stop();
    }
  }, 120_000);
});

/** A test engine whose free actions differ from the plain one's: two replicas that both recorded a step would answer differently. */
class OtherTestEngine extends TestEngine {
  override async act(req: Parameters<TestEngine['act']>[0]) {
    const g = await super.act(req);
    return req.availableActions ? g : { ...g, output: `other ${g.output}` };
  }
}

/** A replica built from its parts (to give it another engine), listening on an ephemeral port. */
async function replicaWithEngine(url: string, dataDir: string, engine: TestEngine): Promise<TestServer> {
  const config = { ...loadConfig({}), host: '127.0.0.1', port: 0, engine: 'test' as const, logLevel: 'silent' as const, dataDir, postgres: pgSettings(url) };
  const conn = await openPgDatabase(url, { maxConnections: 4 });
  const app = await buildApp(config, { store: pgStore(conn, url), engine });
  const base = await app.listen({ host: '127.0.0.1', port: 0 });
  const s: TestServer = {
    url: base, app, dataDir,
    call: (method, p, body, headers) => call(base, method, p, body, headers),
    close: () => app.close(),
  };
  open.push(s);
  return s;
}

const stepRows = async (db: string, id: string) =>
  (await pg!.query<{ attempt: number; step: number; kind: string; n: number }>(
    'SELECT attempt, step, kind, count(*)::int AS n FROM steps WHERE session_id = $1 GROUP BY attempt, step, kind ORDER BY attempt, step, kind', [id], db,
  ));

describe.skipIf(!pg)('two replicas on one database', () => {
  it('the same step posted to both at once: one row, the same answer to both', async () => {
    const url = await pg!.freshDatabase();
    const db = new URL(url).pathname.slice(1);
    const dir = tmpDir('lamer-pg-race-');
    const a = await replicaWithEngine(url, dir, new TestEngine());
    const b = await replicaWithEngine(url, dir, new OtherTestEngine());
    const id = (await a.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x', maxAttempts: 1, maxSteps: 40 })).body.id as string;
    const actions = new Set<string>();
    for (let step = 0; step < 12; step++) {
      const body = { attempt: 0, step, observation: `room ${step}`, reward: 0 };
      const [ra, rb] = await Promise.all([a.call('POST', `/v1/sessions/${id}/steps`, body), b.call('POST', `/v1/sessions/${id}/steps`, body)]);
      expect([ra.status, rb.status]).toEqual([200, 200]);
      expect(ra.body).toEqual(rb.body);
      actions.add(String(ra.body.action).startsWith('other ') ? 'b' : 'a');
    }
    const rows = await stepRows(db, id);
    expect(rows).toHaveLength(12);
    expect(rows.every((r) => r.n === 1)).toBe(true);
    // of each pair one request recorded the step and the other answered the stored one
    const outcomes = async (s: TestServer, outcome: string) => {
      const text = await (await fetch(`${s.url}/metrics`)).text();
      return Number(new RegExp(`^lamer_step_requests_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
    };
    expect((await outcomes(a, 'recorded')) + (await outcomes(b, 'recorded'))).toBe(12);
    expect((await outcomes(a, 'replayed')) + (await outcomes(b, 'replayed'))).toBe(12);
    // the stored actions are each what its answers said
    const traj = await b.call('GET', `/v1/sessions/${id}/trajectory`);
    expect(traj.body.steps.map((s: { step: number }) => s.step)).toEqual([...Array(12).keys()]);
    expect(actions.size).toBeGreaterThan(0);
  }, 120_000);

  it('a session moves between replicas at every step: each answers from the stored session (stale state re-read, no step refused)', async () => {
    const url = await pg!.freshDatabase();
    const dir = tmpDir('lamer-pg-move-');
    const [a, b] = [await server(url, dir), await server(url, dir)];
    const id = (await a.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x', maxAttempts: 2, maxSteps: 6, memory: 'reflection_only' })).body.id as string;
    const replicas = [a, b, b, a, a, b, a, b];
    let i = 0;
    for (let attempt = 0; attempt < 2; attempt++) {
      for (let step = 0; step < 4; step++) {
        const done = step === 3;
        const r = await replicas[i++ % replicas.length]!.call('POST', `/v1/sessions/${id}/steps`, { attempt, step, observation: `o${attempt}.${step}`, done, success: done && attempt === 1 });
        expect(r.status, JSON.stringify(r.body)).toBe(200);
      }
    }
    expect((await a.call('GET', `/v1/sessions/${id}`)).body.status).toBe('completed');
    // a retry of an old step on either replica is the stored answer
    const first = await a.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o0.0', done: false, success: false });
    const again = await b.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step: 0, observation: 'o0.0', done: false, success: false });
    expect(first.status).toBe(200);
    expect(again.body).toEqual(first.body);
  }, 120_000);

  it('the final step of each session posted to both at once and retried: each completion counted once in the statistics of both', async () => {
    const url = await pg!.freshDatabase();
    const dir = tmpDir('lamer-pg-stats-');
    const [a, b] = [await server(url, dir), await server(url, dir)];
    // each replica's diversity answer kept from before the completions, then brought up to date
    for (const s of [a, b]) expect((await s.call('GET', '/v1/stats/diversity?env=twice')).body.scanned).toBe(0);
    const ids = await finishTwice(a, b, 'twice-task', 10);
    const conn = await openPgDatabase(url, { maxConnections: 1 });
    try {
      const repos = pgRepositories(conn);
      const completed = await repos.sessions.completed('default', { env: 'twice' });
      expect(completed.map((r) => r.id).sort()).toEqual([...ids].sort());
      expect(await repos.sessions.completionSeq('default')).toBe(ids.length);
      expect([...(await repos.sessions.completionsBetween('default', 0, 100))].sort()).toEqual([...ids].sort());
      for (const s of [a, b]) {
        for (const retries of [1, 3]) {
          const got = await s.call('GET', `/v1/stats?env=twice&retries=${retries}`);
          expect(got.status).toBe(200);
          expect(got.body).toEqual(sessionStats(completed, retries));
        }
        const diversity = await s.call('GET', '/v1/stats/diversity?env=twice');
        expect(diversity.body.scanned).toBe(ids.length);
        expect(diversity.body.groups.map((g: { sessions: number }) => g.sessions).reduce((x: number, y: number) => x + y, 0)).toBe(ids.length);
      }
    } finally {
      await conn.close();
    }
  }, 120_000);

  it("a reflection edited on one replica is what the other's next step shows, although it held the session", async () => {
    const url = await pg!.freshDatabase();
    const dir = tmpDir('lamer-pg-edit-');
    const [a, b] = [await server(url, dir), await server(url, dir)];
    const id = (await a.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x', maxAttempts: 2, maxSteps: 6, memory: 'reflection_only' })).body.id as string;
    for (let step = 0; step < 3; step++) {
      expect((await a.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step, observation: `o${step}`, done: step === 2 })).status).toBe(200);
    }
    expect((await b.call('PUT', `/v1/sessions/${id}/memory/0`, { text: 'Human note: try the left door.' })).status).toBe(200);
    expect((await a.call('POST', `/v1/sessions/${id}/steps`, { attempt: 1, step: 0, observation: 'again' })).status).toBe(200);
    const traj = await a.call('GET', `/v1/sessions/${id}/trajectory`);
    const row = traj.body.steps.find((s: { attempt: number; step: number; kind: string }) => s.attempt === 1 && s.step === 0 && s.kind === 'action');
    expect(row.prompt).toContain('Human note: try the left door.');
  }, 120_000);

  it('the open-session cap counts every replica\'s sessions of the tenant', async () => {
    const url = await pg!.freshDatabase();
    const dir = tmpDir('lamer-pg-cap-');
    const protection = { ...loadConfig({}).protection, maxOpenSessionsPerTenant: 3 };
    const [a, b] = [await server(url, dir, { protection }), await server(url, dir, { protection })];
    const create = (s: TestServer) => s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' });
    const made = await Promise.all([create(a), create(b), create(a), create(b), create(a)]);
    expect(made.map((r) => r.status).sort()).toEqual([201, 201, 201, 409, 409]);
    expect((await create(b)).body).toMatchObject({ type: expect.stringContaining('too-many-sessions') });
    // at the cap a create the server would refuse for its body is refused for the cap; below it, for its body
    const unknownVersion = (s: TestServer) => s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x', modelVersion: 'no-such-version' });
    expect((await unknownVersion(a)).body).toMatchObject({ type: expect.stringContaining('too-many-sessions') });
    const [first] = (await a.call('GET', '/v1/sessions')).body.items as Array<{ id: string }>;
    expect((await b.call('DELETE', `/v1/sessions/${first!.id}`)).status).toBe(200);
    expect(await unknownVersion(a)).toMatchObject({ status: 400, body: { type: expect.stringContaining('validation') } });
    expect((await a.call('GET', '/v1/sessions?status=active')).body.items).toHaveLength(2);
  }, 120_000);

  it('activation and rollback reach the other replica (by notification, or by the poll when none came); pinned sessions keep their version', async () => {
    const url = await pg!.freshDatabase();
    const dir = tmpDir('lamer-pg-activate-');
    const pollMs = 500;
    const [a, b] = [await server(url, dir, { postgres: pgSettings(url, { pollMs }) }), await server(url, dir, { postgres: pgSettings(url, { pollMs }) })];
    await a.app.repos.models.insert({
      version: 'v2', parent: 'test', jobId: null, checkpointDir: '', status: 'candidate', metrics: {}, createdAt: Date.now(), engine: 'builtin', engineConfig: null,
    });
    const pinnedOld = (await b.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' })).body.id as string;
    expect((await a.call('POST', '/v1/models/v2/activate')).status).toBe(200);
    const activeOn = async (s: TestServer) => (await s.call('GET', '/v1/models')).body.active;
    // Each wait polls until the change is seen; its deadline only stops a test that would hang.
    const untilSeen = { timeout: 30_000, interval: 20 };
    await vi.waitFor(async () => expect(await activeOn(b)).toBe('v2'), untilSeen);
    const created = await b.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' });
    expect(created.body.modelVersion).toBe('v2');
    const ready = { status: 'ready', model: { version: 'v2', loaded: true } };
    await vi.waitFor(async () => expect((await b.call('GET', '/readyz')).body).toMatchObject(ready), untilSeen);
    // a session pinned before the activation is served by its version on either replica
    for (const [s, step] of [[a, 0], [b, 1]] as const) {
      expect((await s.call('POST', `/v1/sessions/${pinnedOld}/steps`, { attempt: 0, step, observation: 'o' })).status).toBe(200);
    }
    const traj = await a.call('GET', `/v1/sessions/${pinnedOld}/trajectory`);
    expect(traj.body.steps.map((s: { modelVersion: string }) => s.modelVersion)).toEqual(['test', 'test']);
    // a change no notification announced (a missed one) is read by the poll
    await pg!.query("UPDATE models SET status = CASE WHEN version = 'test' THEN 'active' ELSE 'retired' END", [], new URL(url).pathname.slice(1));
    await vi.waitFor(async () => expect([await activeOn(a), await activeOn(b)]).toEqual(['test', 'test']), untilSeen);
    // rollback through the API on b reaches a
    expect((await b.call('POST', '/v1/models/v2/activate')).status).toBe(200);
    await vi.waitFor(async () => expect(await activeOn(a)).toBe('v2'), untilSeen);
  }, 120_000);
});

describe.skipIf(!pg)('two replicas with the builtin model', () => {
  it('a session started on one replica goes on on the other: the KV cache is rebuilt from the recorded prompt, logprobs within 1e-5', async () => {
    const url = await pg!.freshDatabase();
    const dir = tmpDir('lamer-pg-kv-');
    const model = await writeTinyGptCheckpoint(path.join(dir, 'model'), 11, 1024);
    const builtin = { engine: 'builtin' as const, tfjsBackend: 'wasm' as const, baseModelDir: model, logLevel: 'error' as const };
    const [a, b] = [await server(url, dir, builtin), await server(url, dir, builtin)];
    type Row = { attempt: number; step: number; kind: string; promptTokenIds: number[]; outputTokenIds: number[]; logprobs: number[]; action: string };
    /** Plays 5 steps of one seeded session, step i on replicas[i]; returns its action rows. */
    const play = async (replicas: TestServer[]): Promise<Row[]> => {
      const sampling = { temperature: 1, topP: 1, topK: 0, seed: 1234 };
      const id = (await replicas[0]!.call('POST', '/v1/sessions', { taskId: 'lr', instructions: 'Go left or right.', maxAttempts: 1, maxSteps: 10, sampling })).body.id;
      for (const [step, s] of replicas.entries()) {
        const r = await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step, observation: `corridor ${step}` });
        expect(r.status, JSON.stringify(r.body)).toBe(200);
      }
      return (await a.call('GET', `/v1/sessions/${id}/trajectory`)).body.steps as Row[];
    };
    const one = await play([a, a, a, a, a]);
    // steps 2 and 3 on b, which never saw the session (its cache is built from the whole prompt);
    // step 4 back on a, whose cache holds the session as of step 1 (extended from the common prefix)
    const moved = await play([a, a, b, b, a]);
    expect(moved.map((r) => r.promptTokenIds)).toEqual(one.map((r) => r.promptTokenIds));
    expect(moved.map((r) => r.outputTokenIds)).toEqual(one.map((r) => r.outputTokenIds));
    expect(moved.map((r) => r.action)).toEqual(one.map((r) => r.action));
    for (const [i, row] of moved.entries()) {
      expect(row.logprobs).toHaveLength(one[i]!.logprobs.length);
      row.logprobs.forEach((lp, k) => expect(Math.abs(lp - one[i]!.logprobs[k]!)).toBeLessThanOrEqual(1e-5));
    }
    // free text: every output token sampled from the model's distribution
    expect(one.every((r) => r.logprobs.length > 1 && r.logprobs.every((lp) => lp < 0) && r.promptTokenIds.length > 0)).toBe(true);

  }, 300_000);
});

describe.skipIf(!pg)('LAMER_ROLE on PostgreSQL', () => {
  it('a server replica queues jobs and runs none; a trainer replica runs them and serves no sessions', async () => {
    const url = await pg!.freshDatabase();
    const dir = tmpDir('lamer-pg-roles-');
    const s = await server(url, dir, { role: 'server' });
    expect((await s.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' })).status).toBe(201);
    const job = await s.call('POST', '/v1/training/jobs', { algorithm: 'rloo' });
    expect(job.status).toBe(201);
    expect((await s.call('GET', `/v1/training/jobs/${job.body.id}`)).body.status).toBe('queued');
    const t = await server(url, dir, { role: 'trainer' });
    expect((await t.call('POST', '/v1/sessions', { taskId: 't', instructions: 'x' })).status).toBe(404);
    expect((await t.call('GET', '/readyz')).status).toBe(200);
    // the trainer takes the job queued on the server replica (no training sessions yet: it fails saying so)
    await vi.waitFor(async () => expect((await s.call('GET', `/v1/training/jobs/${job.body.id}`)).body.status).toBe('failed'), { timeout: 30_000, interval: 50 });
    expect((await t.call('GET', `/v1/training/jobs/${job.body.id}`)).body).toMatchObject({ error: expect.stringMatching(/^no training samples/) });
  }, 120_000);
});
