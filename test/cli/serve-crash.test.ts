/**
 * Durability of `lamer serve`: the server runs as a real child process (tsx src/cli/serve.ts,
 * engine test); many sessions are driven concurrently; the process is killed with SIGKILL in the
 * middle; a new server on the same data directory must hold every step whose answer a client
 * received, with the same action, and statistics aggregates that count exactly the sessions the
 * file holds as completed, read before anything reopens it through the server (which would rebuild
 * them). Also: SIGTERM shuts down gracefully (exit 0) and keeps the same guarantee.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { describe, expect, it } from 'vitest';
import { sessionStats, statsFromGroups } from '../../src/agent/session-stats.js';
import * as schema from '../../src/db/schema.js';
import { SessionsRepo } from '../../src/db/sessions-repo.js';
import { statsAggregates } from '../../src/db/stats-aggregates.js';
import { call, startTestServer, tmpDir } from '../helpers/index.js';
import { track } from '../helpers/children.js';

const root = path.resolve(import.meta.dirname, '..', '..');

function spawnServer(dataDir: string): Promise<{ child: ChildProcess; url: string }> {
  const child = track(
    spawn(process.execPath, ['--import', 'tsx', 'src/cli/serve.ts'], {
      cwd: root,
      env: { ...process.env, LAMER_ENGINE: 'test', LAMER_PORT: '0', LAMER_HOST: '127.0.0.1', LAMER_DATA_DIR: dataDir, LAMER_LOG_LEVEL: 'info', LAMER_API_KEYS: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      // not left running when the test gives up on it
      child.kill('SIGKILL');
      reject(new Error(`server did not start:\n${out}`));
    }, 120_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /"url":"(http:\/\/[^"]+)"/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: m[1]! });
      }
    });
    child.stderr!.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.on('exit', (code) => reject(new Error(`server exited early (${code}):\n${out}`)));
  });
}

interface Received {
  sessionId: string;
  attempt: number;
  step: number;
  action: string | null;
}

/** Drive `n` sessions until `stop()` is true or a request fails; collect every answer received. */
async function driveSessions(url: string, n: number, received: Received[], stop: () => boolean): Promise<void> {
  await Promise.all(
    Array.from({ length: n }, async (_, c) => {
      try {
        while (!stop()) {
          const cr = await call(url, 'POST', '/v1/sessions', { taskId: `crash-${c}`, instructions: 'Reach the goal.', maxAttempts: 2, maxSteps: 5 });
          if (cr.status !== 201) return;
          const id = cr.body.id as string;
          for (let a = 0; a < 2 && !stop(); a++) {
            for (let t = 0; t <= 5 && !stop(); t++) {
              const done = t === 5;
              const r = await call(url, 'POST', `/v1/sessions/${id}/steps`, {
                attempt: a,
                step: t,
                observation: `client ${c} attempt ${a} step ${t}`,
                reward: t === 0 ? 0 : -0.1,
                done,
                success: done && a === 1,
                availableActions: ['up', 'down', 'left', 'right'],
              });
              if (r.status !== 200) return;
              received.push({ sessionId: id, attempt: a, step: t, action: r.body.action });
            }
          }
        }
      } catch {
        // Connection reset by the kill: stop this client.
      }
    }),
  );
}

async function verify(dataDir: string, received: Received[]): Promise<void> {
  const s = await startTestServer({ dataDir });
  try {
    const bySession = new Map<string, Received[]>();
    for (const r of received) bySession.set(r.sessionId, [...(bySession.get(r.sessionId) ?? []), r]);
    for (const [id, rs] of bySession) {
      const t = await s.call('GET', `/v1/sessions/${id}/trajectory`);
      expect(t.status).toBe(200);
      const recorded = new Map(
        (t.body.steps as any[]).filter((x) => x.kind === 'action').map((x) => [`${x.attempt}.${x.step}`, x.action as string | null]),
      );
      for (const r of rs) {
        expect(recorded.has(`${r.attempt}.${r.step}`), `${id} ${r.attempt}.${r.step}`).toBe(true);
        expect(recorded.get(`${r.attempt}.${r.step}`)).toBe(r.action);
      }
      // No duplicates, and the session's next position follows its last recorded step.
      const keys = (t.body.steps as any[]).map((x) => `${x.attempt}.${x.step}.${x.kind}`);
      expect(new Set(keys).size).toBe(keys.length);
    }
  } finally {
    await s.close();
  }
}

/**
 * The statistics aggregates in the file as the dead server left it (opened directly, not through
 * openDatabase, which would rebuild them) count every completed session once and answer as the
 * full computation; returns the number of completed sessions.
 */
function expectAggregatesExact(dataDir: string): number {
  const sqlite = new Database(path.join(dataDir, 'lamer.db'));
  try {
    const repo = new SessionsRepo(drizzle(sqlite, { schema }));
    const completed = repo.completed('default', {});
    for (const retries of [1, 3]) expect(statsFromGroups(repo.statsGroups('default'), {}, retries)).toEqual(sessionStats(completed, retries));
    expect(repo.completionSeq('default')).toBe(completed.length);
    expect([...repo.completionsBetween('default', 0, completed.length)].sort()).toEqual(completed.map((r) => r.id).sort());
    expect(statsAggregates(sqlite).rebuildIfStale()).toBe(false);
    return completed.length;
  } finally {
    sqlite.close();
  }
}

describe('process death', () => {
  it('kill -9 mid-flight loses no step whose answer was received', async () => {
    const dataDir = tmpDir('lamer-crash-');
    const { child, url } = await spawnServer(dataDir);
    const exited = new Promise((resolve) => child.once('exit', resolve));
    const received: Received[] = [];
    let killed = false;
    const driving = driveSessions(url, 24, received, () => killed);
    // Kill once enough traffic has flowed, while requests are in flight.
    while (received.length < 400) await new Promise((r) => setTimeout(r, 20));
    child.kill('SIGKILL');
    killed = true;
    await driving;
    await exited;
    expect(received.length).toBeGreaterThanOrEqual(400);
    expect(expectAggregatesExact(dataDir)).toBeGreaterThan(0);
    await verify(dataDir, received);
  }, 180_000);

  it('SIGTERM finishes in-flight steps, closes the database and exits 0', async () => {
    const dataDir = tmpDir('lamer-term-');
    const { child, url } = await spawnServer(dataDir);
    const received: Received[] = [];
    let stopped = false;
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const driving = driveSessions(url, 8, received, () => stopped);
    while (received.length < 100) await new Promise((r) => setTimeout(r, 20));
    child.kill('SIGTERM');
    const code = await exited;
    stopped = true;
    await driving;
    expect(code).toBe(0);
    expectAggregatesExact(dataDir);
    await verify(dataDir, received);
  }, 180_000);
});
