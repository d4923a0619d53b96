/**
 * `lamer replay` (src/cli/replay.ts) against a real server on an ephemeral port (test engine):
 * the printed agreement and logprob difference of a replay, one session as JSON, the calls that
 * differ most, and the exit codes: 2 for bad options (nothing sent), 1 for a refused replay or a
 * server that cannot be reached.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatReplay, replayRequest, run } from '../../src/cli/replay.js';
import { countRows, quietConsole, startTestServer, type TestServer } from '../helpers/index.js';

let s: TestServer;
let since: string;
const ids: string[] = [];

beforeAll(async () => {
  s = await startTestServer();
  await s.call('POST', '/v1/sessions', { taskId: 'old', instructions: 'x' }); // before --since
  await new Promise((r) => setTimeout(r, 5));
  since = new Date().toISOString();
  for (let i = 0; i < 2; i++) {
    const id = (await s.call('POST', '/v1/sessions', { taskId: `t${i}`, instructions: 'Pick a door.', env: 'doors', maxAttempts: 1 })).body.id as string;
    for (const [step, body] of [[0, { availableActions: ['door 1', 'door 2'] }], [1, {}], [2, { done: true, success: true, reward: 1 }]] as const) {
      expect((await s.call('POST', `/v1/sessions/${id}/steps`, { attempt: 0, step, observation: `room ${step}`, ...body })).status).toBe(200);
    }
    ids.push(id);
  }
});
afterAll(async () => {
  await s?.close();
});

/** Runs the command with the console captured: the exit code, stdout and stderr lines. */
async function lamer(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const q = quietConsole();
  try {
    const code = await run(argv);
    return { code, out: q.logs().join('\n'), err: q.errors().join('\n') };
  } finally {
    q.restore();
  }
}

describe('lamer replay', () => {
  it('prints the agreement and the mean logprob difference of the sessions since a time', async () => {
    const r = await lamer('--version', 'test', '--server', s.url, '--since', since);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    const lines = r.out.split('\n');
    expect(lines[0]).toMatch(/^replay rpl_\w+: 4 recorded calls of 2 sessions \(recorded with test\) on test, decoding greedy \(temperature 0\)$/);
    expect(lines[1]).toBe("agreement:        100.0% (4 of 4 replayed calls: test's action equals the recorded one)");
    expect(lines[2]).toMatch(/^logprob diff: {5}mean \+0\.000 nats \(test minus recorded, over 4 scored calls; recorded mean -\d+\.\d{3}, test mean -\d+\.\d{3}\)$/);
    const id = /^report: GET \/v1\/replays\/(rpl_\w+)$/.exec(lines.at(-1)!)![1]!;
    const stored = await s.call('GET', `/v1/replays/${id}`);
    expect(stored.body.sessions.map((x: { id: string }) => x.id)).toEqual([ids[1], ids[0]]);
    expect(stored.body.request.filter).toEqual({ since });
  });

  it('replays one session and prints the whole report as JSON', async () => {
    const r = await lamer('--version', 'test', '--server', s.url, '--session', ids[0]!, '--decoding', 'sampled', '--json');
    expect(r.code).toBe(0);
    const report = JSON.parse(r.out);
    expect(report).toMatchObject({ modelVersion: 'test', decoding: 'sampled', request: { sessionId: ids[0] } });
    expect(report.steps).toHaveLength(2);
  });

  it('lists the calls where the versions differ most', () => {
    const step = (action: string, agrees: boolean, diff: number | null) => ({
      sessionId: 'ses_a', attempt: 0, step: 1, kind: 'step', skipped: null, logprobDiff: diff,
      recorded: { action: 'up', logprob: -0.5 }, replayed: { action, agrees, logprob: diff === null ? null : -0.5 + diff },
    });
    const text = formatReplay({
      id: 'rpl_x', modelVersion: 'v2', decoding: 'greedy', sessions: [{ id: 'ses_a', modelVersion: 'v1', calls: 2 }],
      summary: {
        calls: 2, replayed: 2, skipped: 0, agreeing: 1, agreement: 0.5, scored: 2, meanLogprobDiff: -1, meanRecordedLogprob: -0.5, meanReplayedLogprob: -1.5,
        outsideSupport: 0, mostDifferent: [1, 0],
      },
      steps: [step('up', true, -0.25), step('down', false, -1.75)],
    });
    expect(text.split('\n')).toEqual([
      'replay rpl_x: 2 recorded calls of 1 session (recorded with v1) on v2, decoding greedy (temperature 0)',
      "agreement:        50.0% (1 of 2 replayed calls: v2's action equals the recorded one)",
      'logprob diff:     mean -1.000 nats (v2 minus recorded, over 2 scored calls; recorded mean -0.500, v2 mean -1.500)',
      'differ most:',
      '  ses_a attempt 0 step 1 (step): recorded "up" -0.500, under v2 -2.250 (diff -1.750); v2 would do "down"',
      '  ses_a attempt 0 step 1 (step): recorded "up" -0.500, under v2 -0.750 (diff -0.250); v2 would do the same',
      'report: GET /v1/replays/rpl_x',
    ]);
  });

  it('exits 2 for bad options, with nothing sent', async () => {
    const before = countRows(s.dataDir, 'SELECT count(*) AS n FROM replays');
    const cases: Array<[string[], string]> = [
      [['--server', s.url], '--version is required'],
      [['--version', 'test', '--bogus'], "Unknown option '--bogus'"],
      [['--version', 'test', '--decoding', 'beam'], '--decoding must be one of greedy, sampled'],
      [['--version', 'test', '--since', 'yesterday'], '--since must be an ISO 8601 date/time'],
      [['--version', 'test', '--limit', '0'], '--limit must be an integer in [1, 100]'],
      [['--version', 'test', '--session', 'ses_x', '--env', 'doors'], '--env filters sessions; it does not go with --session'],
      [['--version', 'test', '--server', 'ftp://x'], '--server must be an http(s) URL'],
    ];
    for (const [argv, msg] of cases) {
      const r = await lamer(...argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.err).toContain(`lamer replay: `);
      expect(r.err).toContain(msg);
    }
    expect(countRows(s.dataDir, 'SELECT count(*) AS n FROM replays')).toBe(before);
  });

  it('exits 1 with the problem when the server refuses the replay or cannot be reached', async () => {
    const refused = await lamer('--version', 'nope', '--server', s.url);
    expect(refused.code).toBe(1);
    expect(refused.err).toBe(`lamer replay: ${s.url}/v1/replays: 400 validation: body/modelVersion unknown model version 'nope'`);
    const none = await lamer('--version', 'test', '--server', s.url, '--env', 'no-such-env');
    expect(none.code).toBe(1);
    expect(none.err).toContain('409 conflict: none of the 0 sessions matching the filter');
    // a port nobody listens on
    const port = await new Promise<number>((resolve) => {
      const srv = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (srv.address() as net.AddressInfo).port;
        srv.close(() => resolve(p));
      });
    });
    const gone = await lamer('--version', 'test', '--server', `http://127.0.0.1:${port}`);
    expect(gone.code).toBe(1);
    expect(gone.err).toBe(`lamer replay: http://127.0.0.1:${port}/v1/replays: connection refused`);
  });

  it('builds the request from the options', () => {
    expect(replayRequest({ version: 'v2', since: '0', 'model-version': 'v1', limit: '5', 'no-logprobs': true, 'max-steps': '9' })).toEqual({
      path: '/v1/replays',
      body: { modelVersion: 'v2', decoding: 'greedy', logprobs: false, maxSteps: 9, filter: { since: '1970-01-01T00:00:00.000Z', modelVersion: 'v1', limit: 5 } },
    });
  });
});
