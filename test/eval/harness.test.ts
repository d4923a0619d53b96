import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { once } from 'node:events';
import { canonicalAction, EvalAbortError, runEval } from '../../src/eval/harness.js';
import { startServer } from '../../src/server.js';
import { tmpDir } from '../helpers/index.js';

describe('eval harness with the reference policies (local)', () => {
  it('solver solves every Sokoban task on attempt 0; results are deterministic', async () => {
    const opts = { env: 'sokoban' as const, tasks: 6, attempts: 3, concurrency: 2, seed: 0, policy: 'solver' as const };
    const r = await runEval(opts);
    expect(r.metrics.passAtK).toEqual({ '1': 1, '2': 1, '3': 1 });
    expect(r.metrics.invalidActionRate).toBe(0);
    expect(r.seeds).toEqual({ first: 1_000_000_000, last: 1_000_000_005 });
    expect(r.sessions.map((s) => s.taskId)).toEqual([0, 1, 2, 3, 4, 5].map((i) => `sokoban-6x6-2:seed=${1_000_000_000 + i}`));
    const again = await runEval(opts);
    expect(again.sessions).toEqual(r.sessions);
  });

  it('random MineSweeper plays hidden cells only and stops at a success', async () => {
    const r = await runEval({ env: 'minesweeper', tasks: 20, attempts: 3, concurrency: 4, seed: 5, policy: 'random' });
    expect(r.metrics.invalidActionRate).toBe(0);
    for (const s of r.sessions) {
      const firstWin = s.attempts.findIndex((a) => a.success);
      expect(s.attempts.length).toBe(firstWin >= 0 ? firstWin + 1 : 3);
      for (const a of s.attempts) expect(a.actions).toBeLessThanOrEqual(7);
    }
  });

  it('rejects bad options', async () => {
    await expect(runEval({ env: 'sokoban', tasks: 0, attempts: 3, concurrency: 1, seed: 0, policy: 'solver' })).rejects.toThrow(/tasks/);
    await expect(runEval({ env: 'sokoban', tasks: 1, attempts: 3, concurrency: 1, seed: 0, policy: 'model' })).rejects.toThrow(/server/);
  });

  it('canonical actions', () => {
    expect(canonicalAction('minesweeper', 'click (2,3) now')).toBe('(2, 3)');
    expect(canonicalAction('minesweeper', 'nothing')).toBe('invalid');
    expect(canonicalAction('sokoban', 'Up, left')).toBe('up,left');
  });
});

describe('eval harness against a real in-process server (engine test)', () => {
  let srv: Awaited<ReturnType<typeof startServer>>;
  let dir: string;
  beforeAll(async () => {
    dir = tmpDir('lamer-eval-test-');
    srv = await startServer({ port: 0, host: '127.0.0.1', dataDir: dir, engine: 'test', apiKeys: [], logLevel: 'silent' });
  });
  afterAll(async () => {
    await srv?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('plays sessions through the protocol; the server records what the env saw', async () => {
    const r = await runEval({ env: 'minesweeper', tasks: 3, attempts: 2, concurrency: 3, seed: 0, policy: 'model', server: srv.url });
    expect(r.metrics.errors).toBe(0);
    // The test engine answers "move <n>" without availableActions: every MineSweeper action is invalid (-1).
    expect(r.metrics.invalidActionRate).toBe(1);
    expect(r.metrics.passAtK).toEqual({ '1': 0, '2': 0 });
    for (const s of r.sessions) {
      expect(s.attempts.map((a) => [a.attempt, a.actions, a.return, a.endReason])).toEqual([
        [0, 7, -7, 'max_steps'],
        [1, 7, -7, 'max_steps'],
      ]);
      const res = await fetch(`${srv.url}/v1/sessions/${s.sessionId}`);
      const ses = (await res.json()) as { modelVersion: string; status: string; mode: string; taskId: string; attempts: Array<{ return: number; success: boolean }>; reflections: unknown[] };
      expect(ses).toMatchObject({ status: 'completed', mode: 'eval', taskId: s.taskId, modelVersion: r.modelVersion });
      expect(s.modelVersion).toBe(r.modelVersion);
      expect(ses.attempts.map((a) => [a.return, a.success])).toEqual([[-7, false], [-7, false]]);
      expect(ses.reflections).toHaveLength(1);
      // the reflection the server wrote after attempt 0 is kept on that attempt's record
      const text = (ses.reflections[0] as { text: string }).text;
      expect(s.attempts[0].reflection).toBe(text);
      expect(s.attempts[1].reflection).toBeUndefined();
    }
  });

  it('with availableActions the actions are legal', async () => {
    const r = await runEval({ env: 'sokoban', tasks: 2, attempts: 1, concurrency: 2, seed: 3, policy: 'model', server: srv.url, availableActions: true });
    expect(r.metrics.errors).toBe(0);
    expect(r.metrics.invalidActionRate).toBe(0);
    expect(r.sessions.every((s) => s.attempts.length === 1 && s.attempts[0].actions >= 1)).toBe(true);
  });

  it('a 4xx on session creation stops the run with EvalAbortError naming the problem', async () => {
    const run = runEval({ env: 'sokoban', tasks: 5, attempts: 1, concurrency: 1, seed: 0, policy: 'model', server: srv.url, modelVersion: 'no-such-version' });
    await expect(run).rejects.toBeInstanceOf(EvalAbortError);
    await expect(run).rejects.toThrow(/^server rejected the session: 400 validation: .*no-such-version/);
  });

  it('a server that stops mid-run stops the run at the first refused connection, naming the cause, after telling of the retry', async () => {
    const d = tmpDir('lamer-eval-lost-');
    const lost = await startServer({ port: 0, host: '127.0.0.1', dataDir: d, engine: 'test', apiKeys: [], logLevel: 'silent' });
    const retries: string[] = [];
    let closing: Promise<void> | null = null;
    try {
      const run = runEval({
        env: 'sokoban', tasks: 40, attempts: 2, concurrency: 4, seed: 0, policy: 'model', server: lost.url,
        onSession: (done) => {
          if (done === 3) closing = lost.close();
        },
        onRetry: (r) => retries.push(`${r.method} ${r.why} ${r.nextTry}/${r.tries}`),
      });
      await expect(run).rejects.toBeInstanceOf(EvalAbortError);
      await expect(run).rejects.toThrow(/^lost the server after \d+ of 40 sessions: cannot reach http:\/\/127\.0\.0\.1:\d+ \(connection refused\)$/);
      // the first refused connection leads to the /healthz probe and the stop: at most one refused
      // retry per session in flight, and no request retried to exhaustion (5 retries of every
      // session left)
      const refused = retries.filter((r) => r.startsWith('POST connection refused'));
      expect(refused.length).toBeGreaterThanOrEqual(1);
      expect(refused.length).toBeLessThanOrEqual(4);
      expect(retries.every((r) => Number(/ (\d)\/6$/.exec(r)?.[1]) <= 3)).toBe(true);
      // while it closed the server answered 503 shutting-down; then nothing listened
      expect(retries.some((r) => /^POST connection refused [2-6]\/6$/.test(r))).toBe(true);
    } finally {
      await closing;
      rmSync(d, { recursive: true, force: true });
    }
  }, 60_000);

  it('failures after a session was created are recorded per session, not thrown', async () => {
    let steps = 0;
    const fake = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.setHeader('content-type', 'application/json');
        if (req.url === '/v1/sessions') return void res.end(JSON.stringify({ id: 'sess1', modelVersion: 'v1' }));
        if (req.url?.endsWith('/steps')) {
          steps++;
          res.statusCode = 500;
          return void res.end('{"detail":"boom"}');
        }
        res.end('{}');
      });
    });
    fake.listen(0, '127.0.0.1');
    await once(fake, 'listening');
    try {
      const url = `http://127.0.0.1:${(fake.address() as { port: number }).port}`;
      const r = await runEval({ env: 'sokoban', tasks: 2, attempts: 1, concurrency: 1, seed: 0, policy: 'model', server: url });
      expect(r.metrics.errors).toBe(2);
      expect(r.sessions.map((s) => s.error)).toEqual(['POST /v1/sessions/sess1/steps: HTTP 500 {"detail":"boom"}', 'POST /v1/sessions/sess1/steps: HTTP 500 {"detail":"boom"}']);
      expect(steps).toBe(2);
    } finally {
      fake.close();
    }
  });
});
