/**
 * Scale-out with the real parts: nginx with the deployed gateway configuration (docker/nginx.conf,
 * test/helpers/nginx.ts) in front of two `lamer serve` replicas on one real PostgreSQL
 * (test/helpers/postgres.ts) and one data directory (as docker/compose.yaml shares one volume), 32
 * clients playing sessions with the test engine through the gateway, and one replica killed with
 * SIGKILL mid-traffic. Checked: every step a client saw answered is stored exactly once with the
 * answer the client saw; the sessions in progress at the kill go on through the other replica to
 * their end; no client sees an error except for requests in flight at the kill.
 *
 * Two kills: the replica that only serves (LAMER_ROLE=server), and the replica that holds the
 * trainer lease while it runs a training job (the other replica may train too: its job is marked
 * failed, and the other takes the queue once the lease lapses, which PostgreSQL does when the dead
 * replica's connection ends).
 *
 * Skipped, saying why, where nginx or PostgreSQL cannot run here.
 */
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { startDetached, type Started } from './helpers/cli.js';
import { tmpDir, writeTinyGptCheckpoint } from './helpers/index.js';
import { type NginxGateway, nginxUnavailable, startNginx } from './helpers/nginx.js';
import { postgresForTests, type TestPostgres } from './helpers/postgres.js';
import { errorsOutside, playSessions, type PlayResult, type StoredStep, storedOnceProblems } from './helpers/scale-out.js';

const CLIENTS = 32;
const SESSIONS_PER_CLIENT = 3;
const ATTEMPTS = 2;
const STEPS = 4;
const TOTAL_STEPS = CLIENTS * SESSIONS_PER_CLIENT * ATTEMPTS * (STEPS + 1);

const skip = nginxUnavailable();
if (skip) console.warn(`scale-out test skipped: ${skip}`);
const pg = skip ? null : await postgresForTests();

const portOf = (s: Started) => Number(new URL(s.url).port);
const alive = (s: Started | undefined): s is Started => !!s && s.child.exitCode === null && s.child.signalCode === null;

/** Two replicas on a fresh database and one data directory, started one after the other, and nginx in front of them. */
interface Fleet {
  url: string;
  first: Started;
  second: Started;
  gateway: NginxGateway;
}

const fleets: Fleet[] = [];
afterAll(async () => {
  for (const f of fleets) {
    await f.gateway?.stop();
    for (const s of [f.first, f.second]) {
      if (alive(s)) {
        process.kill(-s.child.pid!, 'SIGTERM');
        await s.exited;
      }
    }
  }
});

/**
 * Start the fleet: `roles[0]` first (with a role that trains, it takes the trainer lease), then
 * `roles[1]`; `env` is added to both. Each start is given 90 s: under a full test run on 2 busy
 * cores a start can take long.
 */
async function startFleet(roles: [string, string], env: Record<string, string> = {}): Promise<Fleet> {
  const url = await pg!.freshDatabase();
  const dataDir = tmpDir('lamer-scale-out-');
  const envOf = (role: string) => ({ LAMER_DATABASE_URL: url, LAMER_ROLE: role, LAMER_DATA_DIR: dataDir, LAMER_DATABASE_POLL_MS: '200', ...env });
  const first = await startDetached('node', envOf(roles[0]), [], 90_000);
  const fleet: Partial<Fleet> = { url, first };
  fleets.push(fleet as Fleet);
  fleet.second = await startDetached('node', envOf(roles[1]), [], 90_000);
  const g = await startNginx({ upstreams: [portOf(first), portOf(fleet.second)] });
  if ('skip' in g) throw new Error(`nginx could not start: ${g.skip}`);
  fleet.gateway = g;
  return fleet as Fleet;
}

/** Play the clients' sessions through the gateway; `kill` is called once, a third of the way in. */
function play(f: Fleet, kill: () => void): Promise<PlayResult> {
  return playSessions({
    url: f.gateway.url,
    clients: CLIENTS,
    sessionsPerClient: SESSIONS_PER_CLIENT,
    attempts: ATTEMPTS,
    steps: STEPS,
    onAnswered: (n) => {
      if (n === Math.floor(TOTAL_STEPS / 3)) kill();
    },
  });
}

/**
 * What every kill must leave: no client error but for requests in flight at `killedAt`, every
 * session played to its end (those in progress at the kill through `survivor`), the requests the
 * dead replica held passed on to the survivor, and every answered step stored once with the answer
 * the client saw.
 */
async function expectNothingLost(db: TestPostgres, f: Fleet, played: PlayResult, killedAt: number, dead: Started, survivor: Started): Promise<void> {
  // No error but for requests in flight at the kill (at most one a client). One more case counts as
  // in flight: nginx may reuse an idle keep-alive connection to the killed replica in the moment
  // before it reads that connection's close; a session creation sent on it is answered 502 (never
  // sent twice), where a step is passed on. So a 502 to a creation is allowed, provided the gateway
  // logged each such 502 as the dead replica's answer alone (an event in the log, not a time window).
  const deadAddr = `127.0.0.1:${portOf(dead)}`;
  const created502 = (e: { what: string; detail: string }) => e.what.startsWith('create ') && e.detail === '502';
  const logged502 = f.gateway.accessLog().filter((e) => e.method === 'POST' && e.uri === '/v1/sessions' && e.status === 502);
  expect(logged502.map((e) => e.upstream)).toEqual(logged502.map(() => deadAddr));
  expect(played.errors.filter(created502)).toHaveLength(logged502.length);
  expect(errorsOutside(played, killedAt).filter((e) => !created502(e))).toEqual([]);
  expect(played.errors.length).toBeLessThanOrEqual(CLIENTS);

  // every session ran to its end, those in progress at the kill through the other replica
  expect(played.answered.size).toBe(TOTAL_STEPS);
  const inProgress = played.sessions.filter((s) => s.created < killedAt && s.finished > killedAt);
  expect(inProgress.length).toBeGreaterThan(0);
  for (const s of inProgress) {
    const r = await fetch(`${f.gateway.url}/v1/sessions/${s.id}`);
    expect([s.id, ((await r.json()) as { status: string }).status]).toEqual([s.id, 'completed']);
  }
  expect([...played.answered.values()].filter((s) => s.at > killedAt).length).toBeGreaterThan(0);
  // steps that reached the dead replica were passed on to the live one by the gateway
  for (const e of f.gateway.accessLog().filter((e) => e.upstream.includes(`${deadAddr}, `))) {
    expect([e.uri, e.upstream, e.status]).toEqual([e.uri, `${deadAddr}, 127.0.0.1:${portOf(survivor)}`, e.method === 'POST' && !e.uri.endsWith('/steps') ? 201 : 200]);
  }

  // every answered step stored once, with the answer the client saw; no step stored that no client saw
  const rows = await db.query<StoredStep>('SELECT session_id, attempt, step, kind, answer FROM steps', [], new URL(f.url).pathname.slice(1));
  expect(storedOnceProblems(played, rows)).toEqual([]);
  expect(rows.filter((r) => r.kind === 'reflection')).toHaveLength(CLIENTS * SESSIONS_PER_CLIENT * (ATTEMPTS - 1));
}

describe.skipIf(skip !== null || pg === null)('scale-out: nginx, two replicas on one PostgreSQL, one replica killed with SIGKILL', () => {
  it(`${CLIENTS} clients play ${CLIENTS * SESSIONS_PER_CLIENT} sessions; the serving replica is killed a third of the way in`, async () => {
    const f = await startFleet(['both', 'server']);
    let killedAt = Number.POSITIVE_INFINITY;
    const played = await play(f, () => {
      killedAt = performance.now();
      process.kill(-f.second.child.pid!, 'SIGKILL');
    });
    expect(await f.second.exited).toBe(-1);
    expect(Number.isFinite(killedAt), 'the kill ran during play').toBe(true);
    await expectNothingLost(pg!, f, played, killedAt, f.second, f.first);
  }, 300_000);

  it(`the replica running a training job is killed while ${CLIENTS} clients play: the job is failed, the other replica takes the queue`, async () => {
    const f = await startFleet(['both', 'both']);
    // The test engine serves the sessions; its version has no weights to train. The jobs train a
    // tiny builtin checkpoint, registered beside it as `lamer train --resume` registers one (a
    // candidate builtin version: a row of the models table).
    const tiny = await writeTinyGptCheckpoint(path.join(tmpDir('lamer-scale-out-model-'), 'tiny'), 5);
    await pg!.query(
      "INSERT INTO models (version, parent, job_id, checkpoint_dir, engine, engine_config, status, metrics, created_at) VALUES ('tiny', NULL, NULL, $1, 'builtin', NULL, 'candidate', '{}', $2)",
      [tiny, Date.now()], new URL(f.url).pathname.slice(1),
    );
    const api = async (method: string, p: string, body?: unknown) => {
      const r = await fetch(f.gateway.url + p, { method, ...(body ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}) });
      return { status: r.status, body: (await r.json()) as Record<string, any> };
    };
    const demo = (k: number, steps: number) => ({
      env: 'corridor', taskId: `demo-${k}`, instructions: 'Walk to the end.', memory: 'reflection_only',
      attempts: [{ steps: Array.from({ length: steps + 1 }, (_, t) => ({ observation: `corridor ${k} at ${t}`, action: t < steps ? 'right' : null, reward: 0, done: t === steps, success: t === steps })), reflection: null }],
    });
    // a long job (thousands of iterations) and a short one queued behind it
    const long = await api('POST', '/v1/training/jobs', {
      algorithm: 'sft', baseVersion: 'tiny', version: 'long', demonstrations: { sessions: Array.from({ length: 20 }, (_, k) => demo(k, 8)) },
      hyperparameters: { epochs: 100, minibatchSize: 1, pack: false },
    });
    expect(long.status, JSON.stringify(long.body)).toBe(201);
    const short = await api('POST', '/v1/training/jobs', {
      algorithm: 'sft', baseVersion: 'tiny', version: 'short', demonstrations: { sessions: [demo(99, 2)] }, hyperparameters: { epochs: 1 },
    });
    expect(short.status, JSON.stringify(short.body)).toBe(201);
    // the first replica holds the lease: it runs the long job; the second waits for the lease
    await vi.waitFor(async () => {
      const job = (await api('GET', `/v1/training/jobs/${long.body.id}`)).body;
      expect([job.status, job.iterations > 0, job.error]).toEqual(['running', true, null]);
    }, { timeout: 60_000, interval: 100 });
    expect(f.first.out()).toContain('trainer lease taken');
    expect(f.second.out()).not.toContain('trainer lease taken');

    let killedAt = Number.POSITIVE_INFINITY;
    const played = await play(f, () => {
      killedAt = performance.now();
      process.kill(-f.first.child.pid!, 'SIGKILL');
    });
    expect(await f.first.exited).toBe(-1);
    await expectNothingLost(pg!, f, played, killedAt, f.first, f.second);

    // the second replica took the lease once the dead one's connection ended, failed its job, and ran the queue
    await vi.waitFor(async () => expect((await api('GET', `/v1/training/jobs/${short.body.id}`)).body.status).toBe('succeeded'), { timeout: 120_000, interval: 200 });
    expect(f.second.out()).toContain('trainer lease taken');
    // failed, not finished: it was running when its replica died
    const failed = (await api('GET', `/v1/training/jobs/${long.body.id}`)).body;
    expect(failed).toMatchObject({ status: 'failed', error: 'the server running the job stopped while it was running', resultVersion: null });
    expect((await api('GET', '/v1/models/short')).body).toMatchObject({ version: 'short', status: 'candidate', parent: 'tiny' });
    expect((await api('GET', '/v1/models/long')).status).toBe(404);
  }, 400_000);
});
