/**
 * Every way of starting the server stops gracefully on SIGINT / SIGTERM, under load: `npm start`,
 * `node bin/lamer.js serve` and `node --import tsx src/cli/index.ts serve`, as real child
 * processes in their own process group, the signal sent to the group (Ctrl-C in a terminal) or to
 * the pid (kill, docker stop). Load: concurrent clients opening a new connection per request on
 * 127.0.0.1 until the server is gone. Asserted: no connection reset, every answer 2xx or 503
 * `shutting-down` problem+json, exit code 0, the shutdown log line, no -wal file left.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { startDetached, type How } from '../helpers/cli.js';

interface Outcome {
  status?: number;
  type?: string;
  error?: string;
  /** Retry-After, seconds. */
  retryAfter?: number;
}

/** One request on a new connection (no keep-alive); the answer or the socket error code. */
function request(url: string, method: string, p: string, body?: unknown): Promise<Outcome & { json?: any }> {
  return new Promise((resolve) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(url + p, { method, agent: false, headers: data ? { 'content-type': 'application/json' } : {} }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => {
        let json: any;
        try {
          json = JSON.parse(text);
        } catch {
          /* not JSON */
        }
        const ra = res.headers['retry-after'];
        resolve({ status: res.statusCode, type: json?.type, json, ...(ra !== undefined ? { retryAfter: Number(ra) } : {}) });
      });
      res.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
    });
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
    req.end(data);
  });
}

/**
 * `clients` loops of session + steps until the server refuses connections (it is gone); every
 * outcome is collected. Like a well-behaved client, a 503 with Retry-After waits that long.
 */
async function load(url: string, clients: number, outcomes: Outcome[]): Promise<void> {
  const send = async (method: string, p: string, body: unknown) => {
    const r = await request(url, method, p, body);
    outcomes.push(r);
    if (r.status === 503 && r.retryAfter !== undefined) await new Promise((res) => setTimeout(res, r.retryAfter! * 1000));
    return r;
  };
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      for (let i = 0; i < 10_000; i++) {
        const s = await send('POST', '/v1/sessions', { taskId: `sig-${c}-${i}`, instructions: 'Play.', maxAttempts: 1, maxSteps: 3 });
        if (s.error === 'ECONNREFUSED') return;
        if (s.status !== 201) continue;
        for (let t = 0; t < 3; t++) {
          const r = await send('POST', `/v1/sessions/${s.json.id}/steps`, { attempt: 0, step: t, observation: `o${t}`, availableActions: ['a', 'b'] });
          if (r.error === 'ECONNREFUSED') return;
          if (r.status !== 200) break;
        }
      }
    }),
  );
}

const SHUTTING_DOWN = 'https://lamer-server.dev/problems/shutting-down';

/** Start, load, signal, and check everything the shutdown promises. */
async function stopUnderLoad(how: How, target: 'group' | 'pid', signals: NodeJS.Signals[], untilExit = false): Promise<void> {
  const s = await startDetached(how);
  const pid = s.child.pid!;
  try {
    const outcomes: Outcome[] = [];
    const loading = load(s.url, 12, outcomes);
    while (outcomes.filter((o) => o.status === 200).length < 30) await new Promise((r) => setTimeout(r, 10));
    for (const [i, sig] of signals.entries()) {
      if (i > 0) await new Promise((r) => setTimeout(r, 30));
      process.kill(target === 'group' ? -pid : pid, sig);
    }
    const t0 = performance.now();
    let exited = false;
    // With `untilExit`, the last signal is sent again every 25 ms until the process is gone, so
    // some land after the shutdown finished, while the process winds down.
    const repeating = (async () => {
      for (let n = 0; untilExit && !exited && n < 400; n++) {
        await new Promise((r) => setTimeout(r, 25));
        try {
          if (!exited) process.kill(target === 'group' ? -pid : pid, signals.at(-1)!);
        } catch {
          break; // already gone
        }
      }
    })();
    const code = await s.exited;
    exited = true;
    await repeating;
    const t1 = performance.now();
    await loading;
    if (process.env.LAMER_TEST_VERBOSE) console.log(how, target, signals.join('+'), `exit after ${(t1 - t0).toFixed(0)} ms, answers: ${outcomes.filter((o) => o.status === 200 || o.status === 201).length} 2xx, ${outcomes.filter((o) => o.status === 503).length} 503, ${outcomes.filter((o) => o.error).length} refused`);
    const errors = outcomes.filter((o) => o.error !== undefined && o.error !== 'ECONNREFUSED');
    expect(errors, s.out()).toEqual([]);
    const bad = outcomes.filter((o) => o.status !== undefined && !(o.status >= 200 && o.status < 300) && !(o.status === 503 && o.type === SHUTTING_DOWN));
    expect(bad).toEqual([]);
    expect(code, s.out()).toBe(0);
    expect(s.out()).toMatch(/"msg":"shut down"/);
    const wal = path.join(s.dataDir, 'lamer.db-wal');
    expect(fs.existsSync(wal) ? fs.statSync(wal).size : 0).toBe(0);
    expect(fs.existsSync(path.join(s.dataDir, 'lamer.pid'))).toBe(false);
    // Each 503 refusal is one info line without a stack trace; nothing is logged as an error.
    const logs = s.out().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number; msg: string; err?: unknown });
    expect(logs.filter((l) => l.level >= 50)).toEqual([]);
    const refusals = logs.filter((l) => l.msg === 'request refused: shutting down');
    expect(refusals.length).toBe(outcomes.filter((o) => o.status === 503).length);
    expect(refusals.every((l) => l.level === 30 && l.err === undefined)).toBe(true);
    if (signals.length > 1) expect(s.out()).toMatch(/"msg":"already shutting down; signal ignored/);
  } finally {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

describe('graceful stop on signals, under load, no connection reset', () => {
  it('npm start, SIGINT to the process group (Ctrl-C)', () => stopUnderLoad('npm', 'group', ['SIGINT']), 120_000);
  it('npm start, SIGTERM to npm', () => stopUnderLoad('npm', 'pid', ['SIGTERM']), 120_000);
  it('bin/lamer.js serve, SIGTERM to its pid', () => stopUnderLoad('bin', 'pid', ['SIGTERM']), 120_000);
  it('bin/lamer.js serve, SIGINT to the process group', () => stopUnderLoad('bin', 'group', ['SIGINT']), 120_000);
  it('node --import tsx src/cli/index.ts serve, SIGTERM to its pid, repeated twice during the shutdown (ignored)', async () => {
    await stopUnderLoad('node', 'pid', ['SIGTERM', 'SIGINT', 'SIGTERM']);
  }, 120_000);
  it('bin/lamer.js serve, SIGTERM to its pid again every 25 ms until it exits (late signals ignored, exit 0)', () =>
    stopUnderLoad('bin', 'pid', ['SIGTERM'], true), 120_000);
});
