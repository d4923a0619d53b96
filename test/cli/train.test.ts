/**
 * `lamer train`'s command line and its failures before any work: a --data-dir that a running server
 * owns or that cannot be created, a dead or wrong --server, an unusable --out (each one line on
 * stderr, exit 1, nothing created); a failure mid-run names the server; and a temporary data directory is kept and named.
 * The failure tests spawn the CLI as a user runs it (node --import tsx src/cli/index.ts train).
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, cpSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { describeTrainFailure, run, trainCommand } from '../../src/cli/train.js';
import { quietConsole, startTestServer, tmpDir, writeTinyGptCheckpoint } from '../helpers/index.js';
import { freePort, root } from '../helpers/cli.js';

/**
 * Run `lamer train <args>` as a child process to its end: exit code, stdout, stderr. With
 * `killAfterMs` a run still going then is killed with SIGKILL (code null): a process whose event
 * loop is blocked does not handle SIGTERM.
 */
function train(args: string[], env: Record<string, string> = {}, killAfterMs?: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/index.ts', 'train', '--env', 'minesweeper', '--algorithm', 'lamer', '--quiet', ...args], {
      cwd: root,
      env: { ...process.env, LAMER_API_KEY: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(killAfterMs !== undefined ? { timeout: killAfterMs, killSignal: 'SIGKILL' as const } : {}),
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** An HTTP server that answers 404 to everything and counts the requests it got. */
async function notLamer(): Promise<{ url: string; requests: () => number; close: () => Promise<void> }> {
  let n = 0;
  const srv = http.createServer((_req, res) => {
    n++;
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not here');
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(srv.address() as net.AddressInfo).port}`;
  return { url, requests: () => n, close: () => new Promise<void>((r) => srv.close(() => r())) };
}

describe('lamer train: a dead or wrong --server', () => {
  it('a server that is not listening: one line naming the URL, exit 1, --out not created', async () => {
    const port = await freePort();
    const out = path.join(tmpDir('lamer-train-out-'), 'curve');
    const r = await train(['--server', `http://127.0.0.1:${port}`, '--out', out]);
    expect(r).toEqual({ code: 1, stdout: '', stderr: `lamer train: cannot reach http://127.0.0.1:${port} (connection refused)\n` });
    expect(existsSync(out)).toBe(false);
  }, 60_000);

  it('a URL that is not a lamer server: one line naming the URL it asked, exit 1', async () => {
    const fake = await notLamer();
    try {
      const r = await train(['--server', `${fake.url}/`, '--out', path.join(tmpDir('lamer-train-out-'), 'curve')]);
      expect(r).toEqual({ code: 1, stdout: '', stderr: `lamer train: ${fake.url}/healthz answered HTTP 404\n` });
      expect(fake.requests()).toBe(1);
    } finally {
      await fake.close();
    }
  }, 60_000);

  it('a server lost during the run is named with the reason, not as "fetch failed"', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const err = await fetch(`${url}/v1/models`).catch((e: unknown) => e);
    expect(describeTrainFailure(err, url)).toBe(`cannot reach ${url} (connection refused)`);
    expect(describeTrainFailure(new Error('job job_1 failed: boom'), url)).toBe('job job_1 failed: boom');
  });
});

describe('lamer train: an unusable --out is refused before any work', () => {
  it('under a regular file: one line, exit 1, the server never asked', async () => {
    const dir = tmpDir('lamer-train-out-');
    const file = path.join(dir, 'file');
    writeFileSync(file, 'x');
    const fake = await notLamer();
    try {
      const sub = await train(['--server', fake.url, '--out', path.join(file, 'curve')]);
      expect(sub).toEqual({ code: 1, stdout: '', stderr: `lamer train: --out ${path.join(file, 'curve')}: ${file} is not a directory\n` });
      const itself = await train(['--server', fake.url, '--out', file]);
      expect(itself).toEqual({ code: 1, stdout: '', stderr: `lamer train: --out ${file} is not a directory\n` });
      expect(fake.requests()).toBe(0);
    } finally {
      await fake.close();
    }
  }, 60_000);

  it.skipIf(process.getuid?.() === 0)('in a directory without write permission: one line, exit 1, nothing created', async () => {
    const dir = tmpDir('lamer-train-out-');
    chmodSync(dir, 0o555);
    try {
      const r = await train(['--server', 'http://127.0.0.1:1', '--out', path.join(dir, 'a', 'b')]);
      expect(r).toEqual({ code: 1, stdout: '', stderr: `lamer train: --out ${path.join(dir, 'a', 'b')}: ${dir} is not writable\n` });
      expect(readdirSync(dir)).toEqual([]);
    } finally {
      chmodSync(dir, 0o755);
    }
  }, 60_000);

  // As root, procfs answers ENOENT to mkdir /proc/x: a recursive mkdir retried it forever.
  it.skipIf(process.platform !== 'linux' || process.getuid?.() !== 0 || !existsSync('/proc/self'))(
    'a directory the file system refuses (/proc/x as root): one line, exit 1, at once',
    async () => {
      // at once: a retry loop would run into train()'s own 50 s limit and fail the equality below
      // (a start that fails takes about 5 s of CPU, some 20 s on a loaded 2-core machine)
      const r = await train(['--out', '/proc/lamer-train-x'], {}, 50_000);
      expect(r).toEqual({ code: 1, stdout: '', stderr: 'lamer train: --out: cannot create directory /proc/lamer-train-x: ENOENT\n' });
    },
    60_000,
  );
});

describe('lamer train without --data-dir', () => {
  it('keeps the temporary data directory (the trained checkpoints are there) and prints where it is', async () => {
    const base = await writeTinyGptCheckpoint(tmpDir('lamer-train-base-'), 9);
    const tmp = tmpDir('lamer-train-tmp-');
    const out = path.join(tmpDir('lamer-train-out-'), 'curve');
    const r = await train(['--iterations', '1', '--tasks-per-iter', '1', '--group', '2', '--base-model-dir', base, '--out', out], { TMPDIR: tmp, LAMER_TFJS_BACKEND: 'wasm' });
    expect(r.code).toBe(0);
    const [dataDir] = readdirSync(tmp);
    expect(dataDir).toMatch(/^lamer-train-/);
    const kept = path.join(tmp, dataDir!);
    expect(r.stdout.trimEnd().split('\n').at(-1)).toBe(
      `kept the temporary data directory ${kept} (checkpoints of the trained versions and the database; --data-dir chooses one; remove it when done)`,
    );
    expect(r.stderr).toContain(`(data ${kept})`);
    expect(existsSync(path.join(kept, 'lamer.db'))).toBe(true);
    expect(existsSync(path.join(out, 'learning-curve.json'))).toBe(true);
  }, 180_000);
});

describe('lamer train --data-dir', () => {
  it('a directory owned by a running server is refused with one line naming it and the owner pid, exit 1', async () => {
    const s = await startTestServer();
    const out = tmpDir('lamer-train-out-');
    const c = quietConsole();
    try {
      expect(await run(['--env', 'minesweeper', '--algorithm', 'lamer', '--data-dir', s.dataDir, '--out', out, '--quiet'])).toBe(1);
    } finally {
      c.restore();
      await s.close();
    }
    expect(c.errors()).toEqual([
      `lamer train: cannot start the in-process server: --data-dir ${s.dataDir} is in use by another lamer server (pid ${process.pid}); stop it first, or use another directory`,
    ]);
  }, 60_000);

  it.skipIf(process.platform !== 'linux' || process.getuid?.() !== 0 || !existsSync('/proc/self'))(
    'a directory the file system refuses (/proc/x as root): one line naming --data-dir, exit 1',
    async () => {
      const out = tmpDir('lamer-train-out-');
      const r = await train(['--data-dir', '/proc/lamer-train-x', '--out', out], {}, 50_000);
      expect(r).toEqual({
        code: 1, stdout: '',
        stderr: 'lamer train: cannot start the in-process server: --data-dir /proc/lamer-train-x cannot be used: cannot create directory /proc/lamer-train-x: ENOENT (ENOENT)\n',
      });
    },
    60_000,
  );
});

describe('lamer train --algorithm', () => {
  it('an algorithm outside lamer, gigpo, grpo, rloo is one usage line naming them, exit 2', async () => {
    const c = quietConsole();
    try {
      expect(await run(['--env', 'minesweeper', '--algorithm', 'sft', '--quiet'])).toBe(2);
    } finally {
      c.restore();
    }
    expect(c.errors()).toEqual(["lamer train: --algorithm must be lamer, gigpo, grpo or rloo, got 'sft'"]);
  });
});

describe('lamer train --env', () => {
  it('--help names the sized env names, and they parse to their kind and sizes', () => {
    const c = quietConsole();
    let r;
    try {
      r = trainCommand(['--help']);
    } finally {
      c.restore();
    }
    expect(r).toEqual({ code: 0 });
    const help = c.logs().join('\n');
    expect(help).toMatch(/^usage: lamer train --env NAME /);
    expect(help).toContain('minesweeper-6x6-3');
    expect(help).toContain('sokoban-6x6-2');
    for (const [name, env, params] of [
      ['minesweeper-6x6-3', 'minesweeper', { rows: 6, cols: 6, mines: 3 }],
      ['sokoban-6x6-2', 'sokoban', { rows: 6, cols: 6, boxes: 2 }],
    ] as const) {
      const t = trainCommand(['--env', name, '--algorithm', 'lamer', '--quiet']);
      if ('code' in t) throw new Error(`usage error for --env ${name}`);
      expect(t.opts).toMatchObject({ env, params });
    }
  });
});

describe('lamer train --no-pack', () => {
  it("sends hyperparameters.pack false with the job; without it the server's default (packed) applies", () => {
    const base = ['--env', 'minesweeper', '--algorithm', 'lamer', '--lr', '0.001', '--quiet'];
    const packed = trainCommand(base);
    const perTurn = trainCommand([...base, '--no-pack']);
    if ('code' in packed || 'code' in perTurn) throw new Error('usage error');
    expect(packed.opts.hyperparameters).toEqual({ lr: 0.001 });
    expect(perTurn.opts.hyperparameters).toEqual({ lr: 0.001, pack: false });
  });

  it('takes no value: --no-pack=yes is one usage line, exit 2', () => {
    const c = quietConsole();
    let r;
    try {
      r = trainCommand(['--env', 'minesweeper', '--algorithm', 'lamer', '--no-pack=yes']);
    } finally {
      c.restore();
    }
    expect(r).toEqual({ code: 2 });
    expect(c.errors()).toHaveLength(1);
    expect(c.errors()[0]).toMatch(/^lamer train: .*--no-pack.*\(lamer train --help for the options\)$/);
  });
});

describe('lamer train --reflection-group', () => {
  it("sends hyperparameters.reflectionGroup with a lamer job; absent, the job's default ('task') applies", () => {
    const base = ['--env', 'minesweeper', '--algorithm', 'lamer', '--quiet'];
    const own = trainCommand([...base, '--reflection-group', 'own']);
    const plain = trainCommand(base);
    if ('code' in own || 'code' in plain) throw new Error('usage error');
    expect(own.opts.hyperparameters).toEqual({ reflectionGroup: 'own' });
    expect(plain.opts.hyperparameters).toEqual({});
  });

  it.each([
    [['--algorithm', 'lamer', '--reflection-group', 'mine'], "lamer train: --reflection-group must be task or own, got 'mine'"],
    [['--algorithm', 'gigpo', '--reflection-group', 'own'], 'lamer train: --reflection-group applies to --algorithm lamer only (gigpo trains no reflections)'],
  ])('%j is one usage line, exit 2', (args, line) => {
    const c = quietConsole();
    let r;
    try {
      r = trainCommand(['--env', 'minesweeper', ...args]);
    } finally {
      c.restore();
    }
    expect(r).toEqual({ code: 2 });
    expect(c.errors()).toEqual([line]);
  });
});

describe('lamer train --resume (in-process, a tiny GPT)', () => {
  /** A point without what names or times a run (version names and job ids are random, seconds vary). */
  const comparable = (p: Record<string, unknown>) => {
    const { jobId: _j, rolloutVersion: _r, trainedVersion: _t, rolloutSeconds: _rs, trainSeconds: _ts, wallSeconds: _w, klToStart, heldOut, ...rest } = p;
    const { version: _v, seconds: _s, ...h } = (heldOut ?? {}) as Record<string, unknown>;
    return { ...rest, heldOut: h, klToStart: typeof klToStart === 'number' ? Number(klToStart.toPrecision(4)) : klToStart };
  };
  const curve = (out: string) => JSON.parse(readFileSync(path.join(out, 'learning-curve.json'), 'utf8'));
  /** sha256 of the weights of the last version the curve in `out` trained, from out/checkpoint/. */
  const weights = (out: string) => {
    const c = curve(out);
    expect(readdirSync(path.join(out, 'checkpoint'))).toEqual([c.points.at(-1).trainedVersion]);
    return createHash('sha256').update(readFileSync(path.join(out, 'checkpoint', c.points.at(-1).trainedVersion, 'weights.bin'))).digest('hex');
  };

  it('3 iterations in one run = 2, then --resume to 3 in the same data directory = 2, then --resume in a new one (imported from --out/checkpoint/)', async () => {
    vi.stubEnv('LAMER_TFJS_BACKEND', 'wasm');
    const base = await writeTinyGptCheckpoint(tmpDir('lamer-train-base-'), 9);
    const root = tmpDir('lamer-train-resume-');
    const args = (name: string, data: string, iterations: number, ...more: string[]) => [
      '--env', 'minesweeper-4x4-2', '--algorithm', 'lamer', '--group', '2', '--tasks-per-iter', '1', '--iterations', String(iterations), '--lr', '0.01',
      '--available-actions', '--heldout-tasks', '2', '--base-model-dir', base, '--out', path.join(root, name), '--data-dir', path.join(root, data), '--quiet', ...more,
    ];
    const c = quietConsole();
    try {
      expect(await run(args('a', 'a-data', 3))).toBe(0);
      expect(await run(args('b', 'b-data', 2))).toBe(0);
      cpSync(path.join(root, 'b'), path.join(root, 'c'), { recursive: true }); // the records of 2 iterations, without their data directory
      expect(await run(args('b', 'b-data', 3, '--resume'))).toBe(0);
      expect(await run(args('c', 'c-data', 3, '--resume'))).toBe(0);
    } finally {
      c.restore();
      vi.unstubAllEnvs();
    }
    const a = curve(path.join(root, 'a'));
    expect(a.points).toHaveLength(3);
    expect(a.heldOutStart).toMatchObject({ version: 'base', tasks: 2 });
    expect(a.points.map((p: { heldOut: { tasks: number } }) => p.heldOut.tasks)).toEqual([2, 2, 2]);
    expect(a.points[0].klToStart).toBe(0); // iteration 0 is played by the start version itself
    for (const name of ['b', 'c']) {
      const other = curve(path.join(root, name));
      expect(other.points.map(comparable)).toEqual(a.points.map(comparable));
      expect(other.startVersion).toBe('base');
      expect(weights(path.join(root, name))).toBe(weights(path.join(root, 'a')));
      expect(readdirSync(path.join(root, name, 'jobs'))).toEqual(['iteration-0000.json', 'iteration-0001.json', 'iteration-0002.json']);
    }
    expect(c.errors().some((l) => l.includes(`--resume: registered ${curve(path.join(root, 'b')).points[1].trainedVersion} (iteration 1) from `))).toBe(true);
  }, 1_200_000);

  it('other settings than the curve in --out are one line naming each, exit 1, before any work', async () => {
    const out = tmpDir('lamer-train-out-');
    const recorded = trainCommand(['--env', 'minesweeper', '--algorithm', 'lamer', '--group', '8', '--lr', '0.001']);
    if ('code' in recorded) throw new Error('usage error');
    writeFileSync(path.join(out, 'learning-curve.json'), JSON.stringify({ config: recorded.opts, points: [] }));
    // a dead --server: the refusal comes before the server is asked
    const r = await train(['--out', out, '--resume', '--group', '4', '--lr', '0.002', '--iterations', '60', '--server', 'http://127.0.0.1:1'], {}, 60_000);
    expect(r).toEqual({
      code: 1, stdout: '',
      stderr: `lamer train: --resume: ${path.join(out, 'learning-curve.json')} was made with other settings (group: 8 -> 4; hyperparameters: {"lr":0.001} -> {"lr":0.002})\n`,
    });
  }, 90_000);

  it('--heldout-every without --heldout-tasks is one usage line, exit 2', () => {
    const c = quietConsole();
    let r;
    try {
      r = trainCommand(['--env', 'minesweeper', '--algorithm', 'lamer', '--heldout-every', '2']);
    } finally {
      c.restore();
    }
    expect(r).toEqual({ code: 2 });
    expect(c.errors()).toEqual(['lamer train: --heldout-every needs --heldout-tasks N (N >= 1)']);
  });
});
