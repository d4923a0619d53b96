import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { DEFAULT_OUT_DIR, defaultOutPath, run as evalRun } from '../../src/cli/eval.js';
import { run as demosRun } from '../../src/cli/demos.js';
import { quietConsole, startTestServer, tmpDir } from '../helpers/index.js';

describe('lamer eval / lamer demos command lines', () => {
  it('bad values are exit code 2 with a message naming the option', async () => {
    const c = quietConsole();
    try {
      expect(await evalRun(['--env', 'chess'])).toBe(2);
      expect(c.err.mock.calls.at(-1)![0]).toMatch(/--env must be one of minesweeper, sokoban/);
      expect(await evalRun(['--env', 'sokoban', '--tasks', 'ten'])).toBe(2);
      expect(c.err.mock.calls.at(-1)![0]).toMatch(/--tasks must be an integer in \[1, \d+\] written in digits/);
      expect(await evalRun(['--env', 'sokoban', '--policy', 'oracle'])).toBe(2);
      expect(await evalRun(['--env', 'sokoban', '--top-p', '2'])).toBe(2);
      expect(c.err.mock.calls.at(-1)![0]).toMatch(/--top-p must be a number in/);
      expect(await evalRun(['--env', 'sokoban', '--server', 'localhost:1'])).toBe(2);
      expect(await evalRun(['--bogus'])).toBe(2);
      expect(await demosRun(['--env', 'sokoban', '--tasks', '2'])).toBe(2);
      expect(c.err.mock.calls.at(-1)![0]).toMatch(/--out is required/);
    } finally {
      c.restore();
    }
  });

  it('--help of eval and demos names --env NAME and the sized env names, as lamer train --help does', async () => {
    for (const [cmd, run, usage] of [['eval', evalRun, 'usage: lamer eval --env NAME '], ['demos', demosRun, 'usage: lamer demos (--env NAME | --curriculum LIST) ']] as const) {
      const c = quietConsole();
      let code;
      try {
        code = await run(['--help']);
      } finally {
        c.restore();
      }
      expect(code, cmd).toBe(0);
      const help = c.logs().join('\n');
      expect(help.startsWith(usage), cmd).toBe(true);
      expect(help, cmd).not.toContain('minesweeper|sokoban');
      expect(help, cmd).toMatch(/--env NAME +minesweeper \| sokoban \(default sizes\), or a sized name: minesweeper-RxC-M\n/);
      expect(help, cmd).toContain('e.g. minesweeper-6x6-3');
      expect(help, cmd).toContain('e.g. sokoban-6x6-2');
    }
    // the names the help gives are accepted (a solver run of one task each, its report in a temporary folder)
    const c = quietConsole();
    const cwd = process.cwd();
    process.chdir(tmpDir('eval-help-'));
    try {
      for (const env of ['minesweeper-6x6-3', 'sokoban-6x6-2']) {
        expect(await evalRun(['--env', env, '--policy', 'solver', '--tasks', '1', '--attempts', '1', '--quiet']), env).toBe(0);
      }
    } finally {
      process.chdir(cwd);
      c.restore();
    }
  });

  it('a solver run prints pass@k and writes the JSON report', async () => {
    const dir = tmpDir('eval-cli-');
    const out = join(dir, 'r.json');
    const c = quietConsole();
    try {
      expect(await evalRun(['--env', 'sokoban', '--policy', 'solver', '--tasks', '3', '--attempts', '2', '--out', out, '--quiet'])).toBe(0);
      expect(c.logs().join('\n')).toContain('pass@1 100.0%  pass@2 100.0%');
    } finally {
      c.restore();
    }
    const report = JSON.parse(readFileSync(out, 'utf8'));
    expect(report).toMatchObject({ env: 'sokoban-6x6-2', policy: 'solver', tasks: 3, attempts: 2, metrics: { passAtK: { '1': 1, '2': 1 }, errors: 0 } });
    expect(report.sessions).toHaveLength(3);
  });

  it('without --out the report goes to eval-results/ under the current folder, which git ignores', async () => {
    const repo = process.cwd();
    const dir = tmpDir('eval-default-out-');
    const c = quietConsole();
    process.chdir(dir);
    try {
      expect(await evalRun(['--env', 'minesweeper-4x4-2', '--policy', 'random', '--tasks', '2', '--attempts', '1', '--quiet'])).toBe(0);
    } finally {
      process.chdir(repo);
      c.restore();
    }
    const files = readdirSync(join(dir, DEFAULT_OUT_DIR));
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(/^minesweeper-4x4-2-random-\d{8}T\d{6}Z\.json$/);
    expect(c.logs().join('\n')).toContain(`wrote ${join(DEFAULT_OUT_DIR, files[0]!)}`);
    expect(JSON.parse(readFileSync(join(dir, DEFAULT_OUT_DIR, files[0]!), 'utf8'))).toMatchObject({ env: 'minesweeper-4x4-2', policy: 'random', tasks: 2 });
    expect(readdirSync(dir)).toEqual([DEFAULT_OUT_DIR]);
    // in this repository the folder is ignored
    expect(spawnSync('git', ['check-ignore', '-q', `${DEFAULT_OUT_DIR}/x.json`], { cwd: repo }).status).toBe(0);
    expect(defaultOutPath('sokoban', { boxes: 1 }, 'model', new Date('2025-01-02T03:04:05.678Z'))).toBe(join('eval-results', 'sokoban-6x6-1-model-20250102T030405Z.json'));
  });

  it('lamer demos writes JSONL sessions', async () => {
    const dir = tmpDir('demos-cli-');
    const out = join(dir, 'd.jsonl');
    const c = quietConsole();
    try {
      expect(await demosRun(['--env', 'minesweeper', '--tasks', '4', '--seed', '10', '--out', out])).toBe(0);
    } finally {
      c.restore();
    }
    const lines = readFileSync(out, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((s) => s.taskId)).toEqual([10, 11, 12, 13].map((i) => `minesweeper-6x6-3:seed=${i}`));
  });
});

describe('lamer eval exit status and clean-up', () => {
  it('exits 1 and says how many when some sessions (not all) failed with errors; the report is still written', async () => {
    const http = await import('node:http');
    const real = await startTestServer();
    // A proxy in front of the real server: the steps of every second session answer 500.
    let created = 0;
    const broken = new Set<string>();
    const proxy = http.createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const sid = /^\/v1\/sessions\/([^/]+)\/steps$/.exec(req.url ?? '')?.[1];
      if (sid && broken.has(sid)) {
        res.writeHead(500, { 'content-type': 'application/problem+json' }).end(JSON.stringify({ type: 'about:blank', title: 'boom', status: 500, detail: 'injected' }));
        return;
      }
      const r = await fetch(real.url + req.url, { method: req.method, headers: { 'content-type': 'application/json' }, ...(chunks.length ? { body: Buffer.concat(chunks) } : {}) });
      const text = await r.text();
      if (req.method === 'POST' && req.url === '/v1/sessions' && r.status === 201 && created++ % 2 === 1) broken.add((JSON.parse(text) as { id: string }).id);
      res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/json' }).end(text);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(proxy.address() as import('node:net').AddressInfo).port}`;
    const out = join(tmpDir('eval-cli-'), 'r.json');
    const c = quietConsole();
    try {
      expect(await evalRun(['--env', 'minesweeper', '--tasks', '4', '--attempts', '1', '--concurrency', '1', '--server', url, '--out', out, '--quiet'])).toBe(1);
      expect(c.errors()).toContainEqual(expect.stringMatching(/^lamer eval: 2 of 4 sessions failed with errors \(first: .*500.*\)$/));
      // The summary says that the errored sessions are in the pass@k denominators.
      expect(c.logs().join('\n')).toMatch(/\nerrors: 2 of 4 sessions failed with errors; pass@k and mean returns above count each as a failed attempt \(first: .*500.*\)/);
    } finally {
      c.restore();
      proxy.close();
      await real.close();
    }
    const report = JSON.parse(readFileSync(out, 'utf8')) as { metrics: { errors: number; sessions: number }; sessions: Array<{ error?: string; attempts: unknown[] }> };
    expect(report.metrics.errors).toBe(2);
    expect(report.metrics.sessions).toBe(4);
    expect(report.sessions.filter((x) => x.error !== undefined).map((x) => x.attempts.length)).toEqual([1, 1]);
  }, 60_000);

  it('Ctrl-C during an in-process eval removes its temporary data directory (exit 130)', async () => {
    const { spawn } = await import('node:child_process');
    const fs = await import('node:fs');
    const tmp = tmpDir('eval-sigint-');
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/index.ts', 'eval', '--env', 'minesweeper', '--tasks', '100000', '--engine', 'test'], {
      cwd: join(import.meta.dirname, '..', '..'),
      env: { ...process.env, TMPDIR: tmp },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    await new Promise<void>((resolve) => {
      child.stderr!.on('data', (d: Buffer) => {
        err += d.toString();
        if (err.includes('started an in-process server')) resolve();
      });
      void exited.then(() => resolve());
    });
    expect(fs.readdirSync(tmp).filter((f) => f.startsWith('lamer-eval-'))).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 300)); // sessions in flight
    child.kill('SIGINT');
    expect(await exited).toBe(130);
    expect(fs.readdirSync(tmp).filter((f) => f.startsWith('lamer-eval-'))).toEqual([]);
    expect(err).toMatch(/lamer eval: SIGINT: stopping, removing \S+lamer-eval-/);
  }, 60_000);
});
