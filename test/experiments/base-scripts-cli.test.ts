/**
 * The command lines of `npm run eval:base` (experiments/eval-base.ts) and `npm run experiment:base-scaling`
 * (experiments/base-scaling.ts), run as child processes: --help / -h print the usage text listing every
 * option and exit 0 without doing any work; a value starting with '-' given as a separate argument
 * is a one-line usage error, exit 2; so are a count not written in digits, past the eval seeds or
 * past the server's attempts, an --out, --reports or --results path that cannot be written (found
 * before the model is read), and a checkpoint folder without its weights. A write that fails after
 * the run is one line, exit 1.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { root } from '../helpers/cli.js';
import { tmpDir } from '../helpers/index.js';

// Each run starts node with tsx: about 5 s of CPU, some 20 s on a loaded 2-core machine; a test
// gets at least 30 s per run.
const run = (script: string, args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', script, ...args], { cwd: root, encoding: 'utf8' });
/** The options a usage text lists: the first `--name` of each indented option line, in order. */
const listed = (help: string) => help.split('\n').flatMap((l) => /^ {2}(?:-h, )?(--[a-z-]+)/.exec(l)?.[1] ?? []);

describe('eval:base command line', () => {
  it('--help and -h: the usage text with every option, exit 0, nothing written', () => {
    const out = path.join(tmpDir('lamer-eval-base-help-'), 'figures.json');
    for (const flag of ['--help', '-h']) {
      const r = run('experiments/eval-base.ts', [flag, '--out', out]);
      expect(r.status, r.stderr).toBe(0);
      expect(r.stderr).toBe('');
      expect(r.stdout.startsWith('usage: npm run eval:base -- [options]\n')).toBe(true);
      expect(listed(r.stdout)).toEqual([
        '--model', '--tasks', '--attempts', '--seed', '--concurrency', '--games', '--rows', '--out', '--reports', '--results',
        '--resamples', '--loss-sessions', '--help',
      ]);
      expect(r.stdout).toContain('  --loss-sessions N      held-out demonstration sessions per game for the held-out loss\n                         (default 32; 0: no held-out loss)\n');
      expect(r.stdout).toContain('(default lamer,lamer-avail,independent)');
    }
    expect(existsSync(out)).toBe(false);
  }, 60_000);

  it('--loss-sessions -1: says to write --loss-sessions=VALUE, exit 2', () => {
    const r = run('experiments/eval-base.ts', ['--loss-sessions', '-1']);
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe("eval:base: --loss-sessions needs a value (one that starts with '-' must be written --loss-sessions=VALUE)\n");
  }, 60_000);

  it('counts: written in digits, within the eval seeds that the rows and the held-out loss play and the server\'s attempts; one line, exit 2', () => {
    const e = 2 ** 32 - 1e9;
    for (const [args, line] of [
      [['--tasks', '1e9'], `--tasks must be an integer in [1, ${e}] written in digits, got '1e9'`],
      [['--tasks', String(e + 1)], `--tasks must be an integer in [1, ${e}] written in digits, got '${e + 1}'`],
      [['--attempts', '2.5'], "--attempts must be an integer >= 1 written in digits, got '2.5'"],
      [['--attempts', '11'], '--attempts 11 is more than the server allows: at most 10 attempts per session (LAMER_MAX_ATTEMPTS)'],
      [['--seed', String(e - 2), '--tasks', '3'], `--seed + --tasks must be at most ${e} (the eval seeds [1000000000, 2^32)), got ${e + 1}`],
      [['--seed', String(e - 2), '--tasks', '1', '--loss-sessions', '3'], `--seed + --loss-sessions must be at most ${e} (the eval seeds [1000000000, 2^32)), got ${e + 1}`],
      [['--games', ''], "--games: give at least one env (e.g. minesweeper-6x6-3), got ''"],
      [['--rows', ' , '], "--rows: give at least one of lamer, lamer-avail, independent, got ' , '"],
    ] as const) {
      const r = run('experiments/eval-base.ts', [...args]);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe(`eval:base: ${line}\n`);
    }
  }, 240_000);

  it('a --model folder with model.json but no weights.bin: one line naming the file, exit 2, nothing written', () => {
    const dir = tmpDir('lamer-eval-base-noweights-');
    copyFileSync(path.join(root, 'models', 'base', 'model.json'), path.join(dir, 'model.json'));
    const out = path.join(dir, 'new', 'figures.json');
    const reports = path.join(dir, 'reports');
    const r = run('experiments/eval-base.ts', ['--model', dir, '--out', out, '--reports', reports]);
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(`eval:base: --model: ${dir}/weights.bin: ENOENT (a checkpoint is model.json + weights.bin)\n`);
    // the path checks before it leave nothing behind
    expect(readdirSync(dir)).toEqual(['model.json']);
  }, 60_000);

  it('--out, --reports and --results that cannot be written: one line naming the option, exit 2, before the model is read', () => {
    const dir = tmpDir('lamer-eval-base-paths-');
    const file = path.join(dir, 'plain.txt');
    writeFileSync(file, 'x');
    const noSection = path.join(dir, 'notes.md');
    writeFileSync(noSection, '# notes\n');
    // --model is a folder without a checkpoint: reading it would fail with another line
    const noModel = ['--model', path.join(dir, 'no-model')];
    for (const [args, line] of [
      [['--out', path.join(file, 'x.json')], `--out ${file}/x.json: ${file} exists and is not a folder`],
      [['--out', dir], `--out ${dir} is a directory`],
      [['--reports', path.join(file, 'r')], `--reports ${file}/r: cannot create folder ${file}/r: ${file} is not a folder`],
      [['--reports', file], `--reports ${file}: ${file} exists and is not a folder`],
      [['--results', path.join(dir, 'nonexistent.md')], `--results ${dir}/nonexistent.md: ENOENT (an existing file with a base-policy section, e.g. docs/RESULTS.md)`],
      [['--results', dir], `--results ${dir}: a folder (an existing file with a base-policy section, e.g. docs/RESULTS.md)`],
      [['--results', noSection], `--results ${noSection} has no base-policy section (<!-- base-policy:begin --> ... <!-- base-policy:end -->) to replace`],
    ] as const) {
      const r = run('experiments/eval-base.ts', [...noModel, '--out', path.join(dir, 'figures.json'), ...args]);
      expect(r.status, r.stderr).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe(`eval:base: ${line}\n`);
    }
    expect(readdirSync(dir).sort()).toEqual(['notes.md', 'plain.txt']);
    expect(readFileSync(noSection, 'utf8')).toBe('# notes\n');
  }, 240_000);

  it('a write that fails after the run: one line, exit 1, the server stopped (no wasm dump)', () => {
    const dir = tmpDir('lamer-eval-base-late-');
    // a folder where the row's report file goes: the --reports check passes, the write fails
    const reports = path.join(dir, 'reports');
    mkdirSync(path.join(reports, 'minesweeper-4x4-2-independent.json'), { recursive: true });
    const out = path.join(dir, 'figures.json');
    // the in-process server's data folders (mkdtemp: the prefix and 6 characters)
    const serverDirs = () => readdirSync(tmpdir()).filter((d) => /^lamer-eval-base-[A-Za-z0-9]{6}$/.test(d));
    const before = serverDirs();
    const r = run('experiments/eval-base.ts', [
      '--tasks', '1', '--attempts', '1', '--rows', 'independent', '--games', 'minesweeper-4x4-2', '--loss-sessions', '0', '--concurrency', '1',
      '--out', out, '--reports', reports,
    ]);
    expect(r.status, r.stderr).toBe(1);
    expect(r.stderr).toContain('] minesweeper-4x4-2 (c) independent retries, no memory: 1 task x 1 attempt\n'); // singular counts
    const lines = r.stderr.trimEnd().split('\n');
    expect(lines.at(-1)).toBe(`eval:base: EISDIR: illegal operation on a directory, open '${reports}/minesweeper-4x4-2-independent.json'`);
    expect(lines.every((l) => l.startsWith('[') || l.startsWith('eval:base: '))).toBe(true); // progress lines, then the one error line
    expect(existsSync(out)).toBe(false);
    expect(serverDirs().filter((d) => !before.includes(d))).toEqual([]); // the server was stopped and its folder removed
  }, 120_000);
});

describe('experiment:base-scaling command line', () => {
  it('--help and -h: the usage text with every option, exit 0, no grid folder made', () => {
    const out = path.join(tmpDir('lamer-scaling-help-'), 'grid');
    for (const flag of ['--help', '-h']) {
      const r = run('experiments/base-scaling.ts', ['--out', out, '--points', '1x32:2', flag]);
      expect(r.status, r.stderr).toBe(0);
      expect(r.stderr).toBe('');
      expect(r.stdout.startsWith('usage: npm run experiment:base-scaling -- --out DIR --points 2x64:200,4x128:800 [options]\n')).toBe(true);
      expect(listed(r.stdout)).toEqual([
        '--out', '--points', '--existing', '--tasks', '--games', '--seed', '--sessions', '--curriculum', '--block', '--micro-batch-tokens',
        '--minibatch', '--lr', '--sft-args', '--report-only', '--help',
      ]);
      expect(r.stdout).toContain('  --tasks N              held-out tasks per game (default 64)\n');
    }
    expect(existsSync(out)).toBe(false);
  }, 60_000);

  it('--tasks -1: says to write --tasks=VALUE; --tasks 1e3: says digits; exit 2', () => {
    const r = run('experiments/base-scaling.ts', ['--out', path.join(tmpDir('lamer-scaling-neg-'), 'grid'), '--tasks', '-1']);
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe("experiment:base-scaling: --tasks needs a value (one that starts with '-' must be written --tasks=VALUE)\n");
    const e = run('experiments/base-scaling.ts', ['--out', path.join(tmpDir('lamer-scaling-exp-'), 'grid'), '--tasks', '1e3']);
    expect(e.status).toBe(2);
    expect(e.stderr).toBe(`experiment:base-scaling: --tasks must be an integer in [1, ${2 ** 32 - 1e9}] written in digits, got '1e3'\n`);
  }, 60_000);
});
