/**
 * The generated Python client (clients/python/lamer_client) run by the machine's python3:
 *  - against a recording stub HTTP server: request method, path, query, body and Bearer header,
 *    and a problem+json answer raised as `LamerProblem` with its type and Retry-After;
 *  - the MineSweeper example playing a full session against a live in-process server
 *    (`startServer({ engine: 'test' })`), in eval mode unless told otherwise;
 *  - the example's MineSweeper equal to the builtin env (src/envs/minesweeper.ts): instructions,
 *    task ids, boards drawn from seeds, a hand-made board, observations, legal actions and rewards.
 */
import { execFile, spawnSync } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { startTestServer } from '../helpers/index.js';
import { MineSweeperEnv } from '../../src/envs/minesweeper.js';
import { taskId } from '../../src/envs/index.js';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..', '..');
const PY_DIR = join(ROOT, 'clients', 'python');
const hasMypy = spawnSync('python3', ['-m', 'mypy', '--version']).status === 0;

interface Seen {
  method: string;
  url: string;
  auth: string | undefined;
  contentType: string | undefined;
  body: unknown;
}

async function withStub(
  answer: (req: IncomingMessage, res: ServerResponse, body: unknown) => void,
  fn: (url: string, seen: Seen[]) => Promise<void>,
): Promise<void> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const body = raw ? (JSON.parse(raw) as unknown) : null;
      seen.push({ method: req.method!, url: req.url!, auth: req.headers.authorization, contentType: req.headers['content-type'], body });
      answer(req, res, body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    await fn(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen);
  } finally {
    await new Promise<void>((r) => server.close(() => r()));
  }
}

function python(code: string): Promise<{ stdout: string; stderr: string }> {
  return run('python3', ['-c', code], { cwd: PY_DIR, timeout: 30_000 });
}

describe('Python client against a stub server', () => {
  it('sends typed requests with the Bearer key and decodes JSON answers', async () => {
    await withStub(
      (req, res, body) => {
        res.writeHead(req.method === 'POST' ? 201 : 200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ echo: body, url: req.url }));
      },
      async (url, seen) => {
        const { stdout } = await python(
          `import json; from lamer_client import LamerClient
c = LamerClient(${JSON.stringify(url + '/')}, api_key="k-12345678")
a = c.create_session({"taskId": "t:seed=1", "instructions": "play"})
b = c.list_sessions(status="active", limit=5)
d = c.post_step("ses/1 x", {"attempt": 0, "step": 0, "observation": "Row 1: ?"})
print(json.dumps([a, b, d]))`,
        );
        expect(JSON.parse(stdout)).toEqual([
          { echo: { taskId: 't:seed=1', instructions: 'play' }, url: '/v1/sessions' },
          { echo: null, url: '/v1/sessions?status=active&limit=5' },
          { echo: { attempt: 0, step: 0, observation: 'Row 1: ?' }, url: '/v1/sessions/ses%2F1%20x/steps' },
        ]);
        expect(seen.map((s) => [s.method, s.auth, s.contentType ?? null])).toEqual([
          ['POST', 'Bearer k-12345678', 'application/json'],
          ['GET', 'Bearer k-12345678', null],
          ['POST', 'Bearer k-12345678', 'application/json'],
        ]);
      },
    );
  });

  it('raises LamerProblem for problem+json answers, and retries 503 after Retry-After when asked', async () => {
    let calls = 0;
    await withStub(
      (req, res) => {
        calls++;
        if (req.url === '/v1/sessions/missing') {
          res.writeHead(404, { 'content-type': 'application/problem+json' });
          res.end(JSON.stringify({ type: 'https://lamer.dev/problems/not-found', title: 'Not Found', status: 404, detail: 'no session missing' }));
        } else if (calls <= 3) {
          res.writeHead(503, { 'content-type': 'application/problem+json', 'retry-after': '0' });
          res.end(JSON.stringify({ type: 'https://lamer.dev/problems/overloaded', title: 'Overloaded', status: 503 }));
        } else {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ status: 'ok' }));
        }
      },
      async (url) => {
        const { stdout } = await python(
          `import json; from lamer_client import LamerClient, LamerProblem
c = LamerClient(${JSON.stringify(url)})
out = []
try:
    c.get_session("missing")
except LamerProblem as e:
    out.append([e.status, e.kind, e.title, e.detail, e.retry_after])
try:
    c.get_healthz()
except LamerProblem as e:
    out.append([e.status, e.kind, e.retry_after])
out.append(LamerClient(${JSON.stringify(url)}, retries=1).get_healthz())
print(json.dumps(out))`,
        );
        // calls: 1 = 404; 2 = 503 (first client: no retries); 3 = 503 then 4 = 200 (second client retries once)
        expect(JSON.parse(stdout)).toEqual([
          [404, 'not-found', 'Not Found', 'no session missing', null],
          [503, 'overloaded', 0],
          { status: 'ok' },
        ]);
        expect(calls).toBe(4);
      },
    );
  });
});

describe('Python client retries', () => {
  it('retries a 408 request-timeout (no Retry-After) when asked, and returns the answer', async () => {
    let calls = 0;
    await withStub(
      (_req, res) => {
        calls++;
        if (calls === 1) {
          res.writeHead(408, { 'content-type': 'application/problem+json', connection: 'close' });
          res.end(JSON.stringify({ type: 'https://lamer-server.dev/problems/request-timeout', title: 'Request Timeout', status: 408, detail: 'the request was not received in time' }));
        } else {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ status: 'ok' }));
        }
      },
      async (url) => {
        const { stdout } = await python(
          `import json; from lamer_client import LamerClient
print(json.dumps(LamerClient(${JSON.stringify(url)}, retries=1).get_healthz()))`,
        );
        expect(JSON.parse(stdout)).toEqual({ status: 'ok' });
        expect(calls).toBe(2);
      },
    );
  });
});

// mypy is not installed on every machine (pip install mypy); where it is, the generated client
// and the example must type-check strictly for the oldest and the current Python it supports.
describe.skipIf(!hasMypy)('Python client typing', () => {
  it.each(['3.10', '3.11'])('mypy --strict --python-version %s passes on the client and the example', async (v) => {
    const { stdout } = await run('python3', ['-m', 'mypy', '--strict', '--no-incremental', '--python-version', v, 'lamer_client', 'examples/play_minesweeper.py'], {
      cwd: PY_DIR,
      timeout: 120_000,
    });
    expect(stdout).toContain('Success: no issues found in 3 source files');
  });
});

/** The example's MineSweeper, driven from Python: per case the instructions, task id and every step's answer. */
const EXAMPLE_CASES = [
  { rows: 6, cols: 6, mines: 3, seed: 7 },
  { rows: 6, cols: 6, mines: 3, seed: 1_000_000_042 },
  { rows: 6, cols: 6, mines: 3, seed: 4_294_967_295 },
  { rows: 8, cols: 8, mines: 10, seed: 3 },
  { rows: 10, cols: 12, mines: 5, seed: 99 },
];
// invalid text, out of range, each cell in turn (already revealed ones are useless clicks), a mine at the end
const actionsFor = (rows: number, cols: number) => ['no cell here', '(0, 3)', `(${rows + 1}, 1)`, ...Array.from({ length: rows * cols }, (_, i) => `think (9, 9) then (${Math.floor(i / cols) + 1}, ${(i % cols) + 1})`)];

describe('MineSweeper example env equals the builtin env', () => {
  it('draws the same boards from the same seeds, with the same texts, actions and rewards', async () => {
    const code = `import json, sys
sys.path.insert(0, "examples")
from play_minesweeper import MineSweeper
out = []
for c in json.loads(sys.argv[1]):
    env = MineSweeper(c["rows"], c["cols"], c["mines"])
    steps = [[env.reset(c["seed"]), env.available_actions()]]
    for a in c["actions"]:
        r = env.step(a)
        steps.append([r.observation, r.reward, r.done, r.success, r.invalid_action, env.available_actions()])
        if r.done:
            break
    out.append({"instructions": env.instructions, "taskId": env.task_id(c["seed"]), "steps": steps})
env = MineSweeper()
out.append({"board": env.set_board(["*.....", "......", "..*...", "......", "....*.", "......"], [(6, 1)]), "actions": env.available_actions()})
print(json.dumps(out))`;
    const cases = EXAMPLE_CASES.map((c) => ({ ...c, actions: actionsFor(c.rows, c.cols) }));
    const { stdout } = await run('python3', ['-c', code, JSON.stringify(cases)], { cwd: PY_DIR, timeout: 30_000 });
    const got = JSON.parse(stdout) as unknown[];
    const want: unknown[] = cases.map((c) => {
      const env = new MineSweeperEnv({ rows: c.rows, cols: c.cols, mines: c.mines });
      const first = env.reset(c.seed);
      const steps: unknown[] = [[first.observation, first.availableActions]];
      for (const a of c.actions) {
        const r = env.step(a);
        steps.push([r.observation, r.reward, r.done, r.success, r.invalidAction, env.legalActions()]);
        if (r.done) break;
      }
      return { instructions: env.instructions, taskId: taskId(env.name, c.seed), steps };
    });
    const fixed = new MineSweeperEnv();
    const board = fixed.setBoard(['*.....', '......', '..*...', '......', '....*.', '......'], [[6, 1]]);
    want.push({ board: board.observation, actions: board.availableActions });
    expect(got).toEqual(want);
    // the fixed board as the builtin model reads it: a header of column numbers, one line per row
    expect((got.at(-1) as { board: string }).board).toBe(['  123456', '1 ??????', '2 12????', '3 .1????', '4 .112??', '5 ...1??', '6 ...1??'].join('\n'));
  });
});

describe('MineSweeper example against a live server', () => {
  it('prints one clean line and exits 1 when the server is down', async () => {
    // A port that was free a moment ago: nothing listens there.
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', () => r()));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((r) => probe.close(r));
    const r = spawnSync('python3', [join(PY_DIR, 'examples', 'play_minesweeper.py'), '--url', `http://127.0.0.1:${port}`, '--quiet'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`error: cannot reach the server at http://127.0.0.1:${port}: [Errno 111] Connection refused\n`);
  });

  it('reads the 413 problem of a body over the limit (urllib writes the whole body before reading)', async () => {
    const server = await startTestServer();
    try {
      const { stdout } = await python(
        `import json; from lamer_client import LamerClient, LamerProblem
c = LamerClient(${JSON.stringify(server.url)})
out = []
for size in [4_000_000, 2_100_000] * 3:
    try:
        c.create_session({"taskId": "t", "instructions": "x" * size})
        out.append("created")
    except LamerProblem as e:
        out.append([e.status, e.kind])
    except Exception as e:
        out.append(repr(e))
print(json.dumps(out))`,
      );
      expect(JSON.parse(stdout)).toEqual(Array.from({ length: 6 }, () => [413, 'payload-too-large']));
    } finally {
      await server.close();
    }
  });

  it('plays a full session: 3 attempts, or fewer ending in a success', async () => {
    const server = await startTestServer();
    try {
      const { stdout } = await run('python3', [join(PY_DIR, 'examples', 'play_minesweeper.py'), '--url', server.url, '--seed', '7', '--json', '--quiet'], {
        timeout: 60_000,
      });
      const session = JSON.parse(stdout.trim().split('\n').pop()!) as {
        status: string;
        maxAttempts: number;
        taskId: string;
        mode: string;
        attempts: Array<{ attempt: number; success: boolean; steps: number; status: string }>;
      };
      expect(session.status).toBe('completed');
      expect(session.taskId).toBe('minesweeper-6x6-3:seed=7');
      expect(session.mode).toBe('eval');
      expect(session.maxAttempts).toBe(3);
      const won = session.attempts.findIndex((a) => a.success);
      if (won >= 0) expect(session.attempts.length).toBe(won + 1);
      else expect(session.attempts.map((a) => a.attempt)).toEqual([0, 1, 2]);
      for (const a of session.attempts) expect(a.status).toBe(a.success ? 'succeeded' : 'failed');
      for (const a of session.attempts) expect(a.steps).toBeGreaterThanOrEqual(1);
    } finally {
      await server.close();
    }
  });
});
