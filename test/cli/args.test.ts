import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { run as evalRun } from '../../src/cli/eval.js';
import { run as demosRun } from '../../src/cli/demos.js';
import { run as exportRun } from '../../src/cli/export.js';
import { run as trainRun } from '../../src/cli/train.js';
import { writeFileSync } from 'node:fs';
import { joinNegativeValues } from '../../src/cli/args.js';
import { quietConsole, tmpDir } from '../helpers/index.js';

/** Run a command with console captured: exit code, the error lines, the log lines. */
async function cli(fn: (a: string[]) => Promise<number>, argv: string[]): Promise<{ code: number; err: string[]; log: string[] }> {
  const c = quietConsole();
  try {
    const code = await fn(argv);
    return { code, err: c.errors(), log: c.logs() };
  } finally {
    c.restore();
  }
}

describe('lamer eval / demos option checks (src/cli/args.ts)', () => {
  it('negative numbers get the range message in one line, not parseArgs "ambiguous" + usage', async () => {
    expect(joinNegativeValues(['--tasks', '-3', '--quiet', '--seed', '5'], { tasks: { type: 'string' }, seed: { type: 'string' }, quiet: { type: 'boolean' } }))
      .toEqual(['--tasks=-3', '--quiet', '--seed', '5']);
    for (const [opt, v, msg] of [
      ['--tasks', '-3', "--tasks must be an integer in [1, 3294967296] written in digits, got '-3'"],
      ['--seed', '-5', "--seed must be an integer in [0, 3294967295] written in digits, got '-5'"],
      ['--temperature', '-1', "--temperature must be a number in [0, 10], got '-1'"],
    ]) {
      const r = await cli(evalRun, ['--env', 'sokoban', opt, v]);
      expect(r.code).toBe(2);
      expect(r.err).toEqual([`lamer eval: ${msg}`]);
    }
    const d = await cli(demosRun, ['--env', 'sokoban', '--tasks', '-3', '--out', '/tmp/x.jsonl']);
    expect(d).toMatchObject({ code: 2, err: ["lamer demos: --tasks must be an integer >= 1 written in digits, got '-3'"] });
  });

  it('counts must be integers written as digits, within the eval seeds; --env is required; unknown options are one line', async () => {
    // the message says digits: '1e12' is an integer to the reader, and one past the eval seeds is refused as well
    for (const v of ['1e2', '1e12', '2.5', '0x10', '', '3294967297', '1000000000000']) {
      const r = await cli(evalRun, ['--env', 'sokoban', '--tasks', v]);
      expect(r).toMatchObject({ code: 2, err: [`lamer eval: --tasks must be an integer in [1, 3294967296] written in digits, got '${v}'`] });
    }
    expect(await cli(evalRun, ['--env', 'sokoban', '--seed', '3294967286', '--tasks', '11'])).toMatchObject({
      code: 2, err: ['lamer eval: --seed + --tasks must be at most 3294967296 (the eval seeds [1000000000, 2^32)), got 3294967297'],
    });
    expect(await cli(evalRun, ['--tasks', '2'])).toMatchObject({ code: 2, err: ['lamer eval: --env is required'] });
    expect(await cli(demosRun, ['--tasks', '2', '--out', '/tmp/x'])).toMatchObject({ code: 2, err: ['lamer demos: --env is required'] });
    // a value that starts with '-' but is not a number is read as an option: say how to write it
    expect(await cli(evalRun, ['--env', 'sokoban', '--out', '-r.json'])).toMatchObject({
      code: 2, err: ["lamer eval: --out needs a value (one that starts with '-' must be written --out=VALUE) (lamer eval --help for the options)"],
    });
    const u = await cli(evalRun, ['--bogus']);
    expect(u.code).toBe(2);
    expect(u.err).toHaveLength(1);
    expect(u.err[0]).toMatch(/^lamer eval: Unknown option '--bogus'.*--help/);
  });

  it('--attempts, --max-steps and --top-k past what the server accepts: one line before any server starts, exit 2', async () => {
    const err = (flag: string, v: string, line: string) => ({ code: 2, err: [`lamer eval: ${flag} ${v} is more than the server allows: ${line}`], log: [] });
    expect(await cli(evalRun, ['--env', 'minesweeper', '--attempts', '99'])).toEqual(err('--attempts', '99', 'at most 10 attempts per session (LAMER_MAX_ATTEMPTS)'));
    expect(await cli(evalRun, ['--env', 'minesweeper', '--max-steps', '1001'])).toEqual(err('--max-steps', '1001', 'at most 1000 turns per attempt (LAMER_MAX_STEPS_CAP)'));
    expect(await cli(evalRun, ['--env', 'minesweeper', '--top-k', '1000001'])).toEqual({
      code: 2, err: ["lamer eval: --top-k must be an integer in [0, 1000000] written in digits, got '1000001'"], log: [],
    });
    // the in-process server's limits are this process's configuration
    process.env.LAMER_MAX_ATTEMPTS = '12';
    try {
      expect(await cli(evalRun, ['--env', 'minesweeper', '--attempts', '13'])).toEqual(err('--attempts', '13', 'at most 12 attempts per session (LAMER_MAX_ATTEMPTS)'));
    } finally {
      delete process.env.LAMER_MAX_ATTEMPTS;
    }
    // the reference policies play without a server: no session limits
    expect(await cli(evalRun, ['--env', 'minesweeper-4x4-2', '--policy', 'solver', '--tasks', '1', '--attempts', '11', '--quiet', '--out', join(tmpDir('args-'), 'r.json')])).toMatchObject({ code: 0, err: [] });
  });

  it('--params: bad values and foreign keys are one-line errors naming the valid keys', async () => {
    const cases: Array<[string, string, string]> = [
      ['minesweeper', '{"mines":99}', 'lamer eval: --params: minesweeper: at most rows*cols-2 = 34 mines'],
      ['sokoban', '{"rows":2}', 'lamer eval: --params: sokoban: rows and cols must be in 5..10'],
      ['minesweeper', '{"boxes":3}', 'lamer eval: --params: boxes is not a parameter of minesweeper (valid: rows, cols, mines)'],
      ['sokoban', '{"mines":1,"x":2}', 'lamer eval: --params: mines, x are not parameters of sokoban (valid: rows, cols, boxes, minMoves, maxMoves)'],
      ['sokoban', '[1]', "lamer eval: --params must be a JSON object, got '[1]'"],
    ];
    for (const [env, p, msg] of cases) expect(await cli(evalRun, ['--env', env, '--params', p])).toMatchObject({ code: 2, err: [msg] });
    const d = await cli(demosRun, ['--env', 'minesweeper', '--tasks', '1', '--out', '/tmp/x.jsonl', '--params', '{"boxes":3}']);
    expect(d).toMatchObject({ code: 2, err: ['lamer demos: --params: boxes is not a parameter of minesweeper (valid: rows, cols, mines)'] });
  });

  it('--env accepts sized names (minesweeper-4x4-2) as a shorthand for --params', async () => {
    const dir = tmpDir('args-');
    const out = join(dir, 'r.json');
    const r = await cli(evalRun, ['--env', 'minesweeper-4x4-2', '--policy', 'solver', '--tasks', '2', '--attempts', '1', '--quiet', '--out', out]);
    expect(r.code).toBe(0);
    expect(JSON.parse(readFileSync(out, 'utf8'))).toMatchObject({ env: 'minesweeper-4x4-2', tasks: 2 });
    const d = await cli(demosRun, ['--env', 'sokoban-7x7-2', '--tasks', '1', '--fail-rate', '0', '--out', join(dir, 'd.jsonl')]);
    expect(d.code).toBe(0);
    expect(JSON.parse(readFileSync(join(dir, 'd.jsonl'), 'utf8')).taskId).toBe('sokoban-7x7-2:seed=0');
    expect(await cli(evalRun, ['--env', 'chess'])).toMatchObject({ code: 2 });
  });

  it('--out is checked before playing: missing directory or a directory is exit 2, nothing played', async () => {
    const dir = tmpDir('args-out-');
    for (const [out, msg] of [
      [join(dir, 'nope', 'r.json'), `lamer eval: --out ${join(dir, 'nope', 'r.json')}: directory ${join(dir, 'nope')} does not exist`],
      [dir, `lamer eval: --out ${dir} is a directory`],
    ]) {
      const r = await cli(evalRun, ['--env', 'sokoban', '--policy', 'solver', '--tasks', '2', '--quiet', '--out', out]);
      expect(r).toEqual({ code: 2, err: [msg], log: [] });
    }
    const d = await cli(demosRun, ['--env', 'sokoban', '--tasks', '1', '--out', join(dir, 'nope', 'd.jsonl')]);
    expect(d.code).toBe(2);
    expect(existsSync(join(dir, 'nope'))).toBe(false);
  });

  it('--out is created and removed again by the check: a run that fails later leaves no file; an existing file is untouched', async () => {
    const dir = tmpDir('args-out-');
    const out = join(dir, 'r.json');
    // The check passes, then the server is unreachable (exit 1): no report file is left behind.
    const r = await cli(evalRun, ['--env', 'sokoban', '--tasks', '2', '--quiet', '--server', 'http://127.0.0.1:1', '--out', out]);
    expect(r.code).toBe(1);
    expect(r.err).toHaveLength(1);
    expect(r.err[0]).toMatch(/^lamer eval: cannot reach http:\/\/127\.0\.0\.1:1/);
    expect(readdirSync(dir)).toEqual([]);
    writeFileSync(out, 'old');
    expect((await cli(evalRun, ['--env', 'sokoban', '--tasks', '2', '--quiet', '--server', 'http://127.0.0.1:1', '--out', out])).code).toBe(1);
    expect(readFileSync(out, 'utf8')).toBe('old');
  });

  // As root, access(W_OK) allows /proc, but creating /proc/ms.json is ENOENT: found before playing.
  it.skipIf(process.platform !== 'linux' || process.getuid?.() !== 0 || !existsSync('/proc/self'))(
    '--out where the file system refuses the file (/proc/ms.json as root): exit 2 before playing',
    async () => {
      const r = await cli(evalRun, ['--env', 'sokoban', '--policy', 'solver', '--tasks', '2', '--quiet', '--out', '/proc/ms.json']);
      expect(r).toEqual({ code: 2, err: ['lamer eval: --out /proc/ms.json cannot be created (ENOENT)'], log: [] });
    },
  );
});

describe('lamer export / train use the same option module', () => {
  it('export: --out into a missing directory is exit 2 before reading; --mode checked', async () => {
    const dir = tmpDir('args-export-');
    writeFileSync(join(dir, 'lamer.db'), '');
    const out = join(dir, 'nope', 'x.jsonl');
    expect(await cli(exportRun, ['--data-dir', dir, '--out', out])).toEqual({ code: 2, err: [`lamer export: --out ${out}: directory ${join(dir, 'nope')} does not exist`], log: [] });
    expect(await cli(exportRun, ['--data-dir', dir, '--mode', 'both'])).toMatchObject({ code: 2, err: ["lamer export: --mode must be one of train, eval, got 'both'"] });
  });

  it('train: negative counts, missing --env and foreign --params keys are one line, exit 2', async () => {
    expect(await cli(trainRun, ['--env', 'minesweeper', '--algorithm', 'lamer', '--iterations', '-3'])).toEqual({ code: 2, err: ["lamer train: --iterations must be an integer >= 1 written in digits, got '-3'"], log: [] });
    expect(await cli(trainRun, ['--algorithm', 'lamer'])).toMatchObject({ code: 2, err: ['lamer train: --env is required'] });
    expect(await cli(trainRun, ['--env', 'sokoban', '--algorithm', 'lamer', '--params', '{"mines":2}'])).toMatchObject({
      code: 2, err: ['lamer train: --params: mines is not a parameter of sokoban (valid: rows, cols, boxes, minMoves, maxMoves)'],
    });
    expect(await cli(trainRun, ['--env', 'sokoban', '--algorithm', 'lamer', '--lr', '-1'])).toMatchObject({ code: 2, err: ["lamer train: --lr must be a number in [1e-12, 1], got '-1'"] });
    expect(await cli(trainRun, ['--env', 'sokoban', '--algorithm', 'lamer', '--top-k', '1000001'])).toMatchObject({
      code: 2, err: ["lamer train: --top-k must be an integer in [0, 1000000] written in digits, got '1000001'"],
    });
  });
});

describe('lamer eval against a server that is down or rejects sessions', () => {
  let server: Server;
  let url: string;
  let creates = 0;
  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (req.url === '/healthz') return void res.end('{"status":"ok"}');
        if (req.method === 'POST' && req.url === '/v1/sessions') {
          creates++;
          res.writeHead(400, { 'content-type': 'application/problem+json' });
          return void res.end(JSON.stringify({ type: 'https://lamer-server.dev/problems/validation', title: 'Bad Request', status: 400, detail: 'body/maxAttempts must be <= 10' }));
        }
        res.writeHead(404).end();
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => server.close());

  it('a 4xx on session creation stops the run with one line, exit 1, no table of zeros', async () => {
    const r = await cli(evalRun, ['--env', 'minesweeper', '--server', url, '--tasks', '40', '--concurrency', '2', '--attempts', '11', '--quiet']);
    expect(r).toEqual({ code: 1, err: ['lamer eval: server rejected the session: 400 validation: body/maxAttempts must be <= 10'], log: [] });
    expect(creates).toBeLessThanOrEqual(2);
  });

  it('an unreachable server is one line, exit 1', async () => {
    const dead = createServer();
    dead.listen(0, '127.0.0.1');
    await once(dead, 'listening');
    const port = (dead.address() as { port: number }).port;
    dead.close();
    await once(dead, 'close');
    const r = await cli(evalRun, ['--env', 'minesweeper', '--server', `http://127.0.0.1:${port}`, '--tasks', '3', '--quiet']);
    expect(r).toEqual({ code: 1, err: [`lamer eval: cannot reach http://127.0.0.1:${port} (connection refused)`], log: [] });
  });
});
