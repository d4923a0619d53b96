/**
 * Scale-out with the real parts: nginx with the deployed gateway configuration (docker/nginx.conf,
 * test/helpers/nginx.ts) in front of two `lamer serve` replicas on one real PostgreSQL
 * (test/helpers/postgres.ts), 32 clients playing sessions with the test engine through the
 * gateway, and one replica killed with SIGKILL mid-traffic. Checked: every step a client saw
 * answered is stored exactly once with the answer the client saw; the sessions in progress at the
 * kill go on through the other replica to their end; no client sees an error except for requests
 * in flight at the kill.
 *
 * It runs once the server can select PostgreSQL: it skips, saying why, while src/config.ts does
 * not read LAMER_DATABASE_URL, and where nginx or PostgreSQL cannot run here. LAMER_ROLE (server,
 * trainer or both) is passed only once src/config.ts reads it: the replica killed serves only.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDetached, type Started } from './helpers/cli.js';
import { type NginxGateway, nginxUnavailable, startNginx } from './helpers/nginx.js';
import { postgresForTests } from './helpers/postgres.js';
import { errorsOutside, playSessions, type PlayResult, type StoredStep, storedOnceProblems } from './helpers/scale-out.js';

const config = readFileSync(path.join(import.meta.dirname, '..', 'src', 'config.ts'), 'utf8');
const readsDatabaseUrl = /\bLAMER_DATABASE_URL\b/.test(config);
const readsRole = /\bLAMER_ROLE\b/.test(config);

const CLIENTS = 32;
const SESSIONS_PER_CLIENT = 3;
const ATTEMPTS = 2;
const STEPS = 4;
const TOTAL_STEPS = CLIENTS * SESSIONS_PER_CLIENT * ATTEMPTS * (STEPS + 1);

const skip = !readsDatabaseUrl
  ? 'the server cannot run on PostgreSQL yet (src/config.ts does not read LAMER_DATABASE_URL)'
  : nginxUnavailable();
if (skip) console.warn(`scale-out test skipped: ${skip}`);
const pg = skip ? null : await postgresForTests();

describe.skipIf(skip !== null || pg === null)('scale-out: nginx, two replicas on one PostgreSQL, one replica killed with SIGKILL', () => {
  let url: string;
  let trainer: Started;
  let server: Started;
  let gateway: NginxGateway;
  const portOf = (s: Started) => Number(new URL(s.url).port);

  beforeAll(async () => {
    url = await pg!.freshDatabase();
    const env = (role: string) => ({ LAMER_DATABASE_URL: url, ...(readsRole ? { LAMER_ROLE: role } : {}) });
    // one after the other, each given 90 s: under a full test run on 2 busy cores a start can take long
    trainer = await startDetached('node', env('both'), [], 90_000);
    server = await startDetached('node', env('server'), [], 90_000);
    const g = await startNginx({ upstreams: [portOf(trainer), portOf(server)] });
    if ('skip' in g) throw new Error(`nginx could not start: ${g.skip}`);
    gateway = g;
  }, 200_000);

  afterAll(async () => {
    await gateway?.stop();
    for (const s of [trainer, server]) {
      if (s && s.child.exitCode === null && s.child.signalCode === null) {
        process.kill(-s.child.pid!, 'SIGTERM');
        await s.exited;
      }
    }
  });

  it(`${CLIENTS} clients play ${CLIENTS * SESSIONS_PER_CLIENT} sessions; the serving replica is killed a third of the way in`, async () => {
    let killedAt = Number.POSITIVE_INFINITY;
    const played: PlayResult = await playSessions({
      url: gateway.url,
      clients: CLIENTS,
      sessionsPerClient: SESSIONS_PER_CLIENT,
      attempts: ATTEMPTS,
      steps: STEPS,
      onAnswered: (n) => {
        if (n === Math.floor(TOTAL_STEPS / 3)) {
          killedAt = performance.now();
          process.kill(-server.child.pid!, 'SIGKILL');
        }
      },
    });
    expect(await server.exited).toBe(-1);
    expect(killedAt).toBeLessThan(Number.POSITIVE_INFINITY);

    // No error but for requests in flight at the kill (at most one a client). One more case counts as
    // in flight: nginx may reuse an idle keep-alive connection to the killed replica in the moment
    // before it reads that connection's close; a session creation sent on it is answered 502 (never
    // sent twice), where a step is passed on. So a 502 to a creation begun within 1 s of the kill is allowed.
    const unexplained = errorsOutside(played, killedAt).filter((e) => !(e.what.startsWith('create ') && e.detail === '502' && e.start - killedAt < 1000));
    expect(unexplained).toEqual([]);
    expect(played.errors.length).toBeLessThanOrEqual(CLIENTS);

    // every session ran to its end, those in progress at the kill through the other replica
    expect(played.answered.size).toBe(TOTAL_STEPS);
    const inProgress = played.sessions.filter((s) => s.created < killedAt && s.finished > killedAt);
    expect(inProgress.length).toBeGreaterThan(0);
    for (const s of inProgress) {
      const r = await fetch(`${gateway.url}/v1/sessions/${s.id}`);
      expect([s.id, ((await r.json()) as { status: string }).status]).toEqual([s.id, 'completed']);
    }
    expect([...played.answered.values()].filter((s) => s.at > killedAt).length).toBeGreaterThan(0);
    // steps that reached the dead replica were passed on to the live one by the gateway
    const dead = `127.0.0.1:${portOf(server)}`;
    for (const e of gateway.accessLog().filter((e) => e.upstream.includes(`${dead}, `))) {
      expect([e.uri, e.upstream, e.status]).toEqual([e.uri, `${dead}, 127.0.0.1:${portOf(trainer)}`, e.method === 'POST' && !e.uri.endsWith('/steps') ? 201 : 200]);
    }

    // every answered step stored once, with the answer the client saw; no step stored that no client saw
    const rows = await pg!.query<StoredStep>('SELECT session_id, attempt, step, kind, answer FROM steps', [], new URL(url).pathname.slice(1));
    expect(storedOnceProblems(played, rows)).toEqual([]);
    expect(rows.filter((r) => r.kind === 'reflection')).toHaveLength(CLIENTS * SESSIONS_PER_CLIENT * (ATTEMPTS - 1));
  }, 120_000);
});
