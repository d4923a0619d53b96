/**
 * experiments/base-paired.ts (`npm run experiment:base-paired`) on tiny hand-made eval:base report folders:
 * the paired differences new - old of pass@1 and pass@K are exact (4 tasks, new solves 3 and old 1
 * at pass@1: +50.0 points), the interval is pairedBootstrap's for the given --resamples and --seed,
 * a report in only one folder is skipped and named in one line; run as a child process, every bad
 * option is one line on stderr naming it, exit code 2, nothing on stdout and no figures written.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseReportName, pairedRows, pts, tableRow, type PairedReport } from '../../experiments/base-paired.js';
import { pairedBootstrap } from '../../src/eval/compare.js';
import type { SessionRecord } from '../../src/eval/metrics.js';
import { root } from '../helpers/cli.js';
import { tmpDir } from '../helpers/index.js';

/**
 * A session of task `taskId` whose first success is attempt `first` (-1: none in K = 3 attempts);
 * it stops at its first success, as the harness records it.
 */
function session(taskId: string, first: number, trial = 0): SessionRecord {
  const played = first < 0 ? 3 : first + 1;
  return {
    taskId, trial,
    attempts: Array.from({ length: played }, (_, n) => ({ attempt: n, success: n === first, return: n === first ? 1 : 0, actions: 1, invalidActions: 0, endReason: 'done' as const, trajectory: ['(0, 0)'] })),
  };
}

/** An eval report of 3-attempt sessions, one per task: `firsts[i]` is task ti's first success. */
const report = (env: string, firsts: number[]): PairedReport & { env: string } => ({ env, attempts: 3, sessions: firsts.map((f, i) => session(`t${i}`, f)) });

// 4 tasks. pass@1: new solves t0, t1, t2 (3/4), old t0 (1/4) -> diffs 0, 1, 1, 0 = +50.0 points.
// pass@3: new 4/4, old t0, t1, t3 (3/4) -> diffs 0, 0, 1, 0 = +25.0 points.
const NEW_MS = [0, 0, 0, 2];
const OLD_MS = [0, 1, -1, 2];
// Sokoban: new solves every task at once, old none: +100.0 with the interval [+100.0, +100.0].
const NEW_SK = [0, 0, 0, 0];
const OLD_SK = [-1, -1, -1, -1];

/** Writes `{game}-{row}.json` reports into a new folder (and a file that is not a report). */
function folder(prefix: string, reports: Record<string, PairedReport>): string {
  const dir = tmpDir(prefix);
  for (const [name, r] of Object.entries(reports)) writeFileSync(path.join(dir, `${name}.json`), JSON.stringify(r) + '\n');
  writeFileSync(path.join(dir, 'notes.txt'), 'not a report\n');
  return dir;
}

describe('base paired differences', () => {
  it('reads a report name as its game and row (the longest row suffix)', () => {
    expect(parseReportName('minesweeper-6x6-3-lamer.json')).toEqual({ game: 'minesweeper-6x6-3', row: 'lamer' });
    expect(parseReportName('sokoban-6x6-2-lamer-avail.json')).toEqual({ game: 'sokoban-6x6-2', row: 'lamer-avail' });
    expect(parseReportName('sokoban-6x6-2-independent.json')).toEqual({ game: 'sokoban-6x6-2', row: 'independent' });
    expect(parseReportName('lamer.json')).toBeNull();
    expect(parseReportName('-lamer.json')).toBeNull();
    expect(parseReportName('sokoban-6x6-2-lamer.txt')).toBeNull();
    expect(parseReportName('base-policy.json')).toBeNull();
  });

  it('gives the exact differences of pass@1 and pass@K and pairedBootstrap\'s interval', () => {
    const rows = pairedRows('minesweeper-6x6-3', 'lamer', report('minesweeper-6x6-3', NEW_MS), report('minesweeper-6x6-3', OLD_MS), { resamples: 500, seed: 7 });
    expect(rows.map((r) => [r.k, r.tasks, r.newRate, r.oldRate, r.difference])).toEqual([[1, 4, 0.75, 0.25, 0.5], [3, 4, 1, 0.75, 0.25]]);
    const ci = pairedBootstrap([0, 1, 1, 0], { resamples: 500, seed: 7 });
    expect([rows[0]!.lo, rows[0]!.hi]).toEqual([ci.lo, ci.hi]);
    expect(tableRow(rows[0]!)).toBe(`| minesweeper-6x6-3 | lamer | 1 | 4 | 75.0 | 25.0 | +50.0 | [${pts(ci.lo)}, ${pts(ci.hi)}] |`);
    const all = pairedRows('sokoban-6x6-2', 'independent', report('sokoban-6x6-2', NEW_SK), report('sokoban-6x6-2', OLD_SK), { resamples: 100, seed: 1 });
    expect(all.map(tableRow)).toEqual([
      '| sokoban-6x6-2 | independent | 1 | 4 | 100.0 | 0.0 | +100.0 | [+100.0, +100.0] |',
      '| sokoban-6x6-2 | independent | 3 | 4 | 100.0 | 0.0 | +100.0 | [+100.0, +100.0] |',
    ]);
  });

  it('pairs only the tasks both played and averages a task\'s trials', () => {
    // new: t0 in two trials (one solved at once: pass@1 0.5), t1 solved, t9 only in new
    const neu: PairedReport = { attempts: 3, sessions: [session('t0', 0), session('t0', -1, 1), session('t1', 0), session('t9', 0)] };
    const old: PairedReport = { attempts: 3, sessions: [session('t0', -1), session('t1', -1), session('t5', 0)] };
    const [p1] = pairedRows('g', 'lamer', neu, old, { resamples: 10, seed: 0 });
    expect(p1).toMatchObject({ k: 1, tasks: 2, newRate: 0.75, oldRate: 0, difference: 0.75 });
    expect(() => pairedRows('g', 'lamer', neu, { attempts: 3, sessions: [session('t5', 0)] }, { resamples: 10, seed: 0 })).toThrow(/share no task/);
  });

  it('formats percentage points with a sign', () => {
    expect([pts(0.5), pts(-0.0078125), pts(0), pts(-0.1640625)]).toEqual(['+50.0', '-0.8', '+0.0', '-16.4']);
  });
});

describe('experiment:base-paired command line', () => {
  // Each run starts node with tsx: a few seconds on a busy machine.
  const run = (args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'experiments/base-paired.ts', ...args], { cwd: root, encoding: 'utf8' });
  const expectUsageError = (args: string[], line: string | RegExp) => {
    const r = run(args);
    if (typeof line === 'string') expect(r.stderr).toBe(`experiment:base-paired: ${line}\n`);
    else expect(r.stderr).toMatch(line);
    expect(r.stderr.split('\n')).toHaveLength(2); // one line
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
  };

  it('compares the games and rows in both folders, names the skipped ones, writes the JSON', () => {
    const neu = folder('lamer-paired-new-', {
      'minesweeper-6x6-3-lamer': report('minesweeper-6x6-3', NEW_MS),
      'minesweeper-6x6-3-independent': report('minesweeper-6x6-3', NEW_MS),
      'sokoban-6x6-2-independent': report('sokoban-6x6-2', NEW_SK),
    });
    const old = folder('lamer-paired-old-', {
      'minesweeper-6x6-3-lamer': report('minesweeper-6x6-3', OLD_MS),
      'sokoban-6x6-2-independent': report('sokoban-6x6-2', OLD_SK),
      'sokoban-6x6-2-lamer-avail': report('sokoban-6x6-2', OLD_SK),
    });
    const out = path.join(tmpDir('lamer-paired-out-'), 'sub', 'dir', 'paired.json');
    const r = run(['--new', neu, '--old', old, '--resamples', '200', '--seed', '3', '--out', out]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toBe('experiment:base-paired: skipped, not in both folders: minesweeper-6x6-3-independent.json (not in --old), sokoban-6x6-2-lamer-avail.json (not in --new)\n');
    const ci1 = pairedBootstrap([0, 1, 1, 0], { resamples: 200, seed: 3 });
    const ci3 = pairedBootstrap([0, 0, 1, 0], { resamples: 200, seed: 3 });
    const table = r.stdout.split('\n').filter((l) => l.startsWith('| '));
    expect(table).toEqual([
      '| game | row | k | tasks | new pass@k (%) | old pass@k (%) | difference new - old (pts) | 95% interval (pts) |',
      `| minesweeper-6x6-3 | lamer | 1 | 4 | 75.0 | 25.0 | +50.0 | [${pts(ci1.lo)}, ${pts(ci1.hi)}] |`,
      `| minesweeper-6x6-3 | lamer | 3 | 4 | 100.0 | 75.0 | +25.0 | [${pts(ci3.lo)}, ${pts(ci3.hi)}] |`,
      '| sokoban-6x6-2 | independent | 1 | 4 | 100.0 | 0.0 | +100.0 | [+100.0, +100.0] |',
      '| sokoban-6x6-2 | independent | 3 | 4 | 100.0 | 0.0 | +100.0 | [+100.0, +100.0] |',
    ]);
    expect(r.stdout).toContain(`written: ${out}\n`);
    const j = JSON.parse(readFileSync(out, 'utf8'));
    expect(j).toMatchObject({ new: neu, old, resamples: 200, seed: 3, level: 0.95 });
    expect(j.skipped).toEqual(['minesweeper-6x6-3-independent.json (not in --old)', 'sokoban-6x6-2-lamer-avail.json (not in --new)']);
    expect(j.rows.map((x: { game: string; row: string; k: number; difference: number }) => [x.game, x.row, x.k, x.difference])).toEqual([
      ['minesweeper-6x6-3', 'lamer', 1, 0.5], ['minesweeper-6x6-3', 'lamer', 3, 0.25],
      ['sokoban-6x6-2', 'independent', 1, 1], ['sokoban-6x6-2', 'independent', 3, 1],
    ]);
    expect(j.rows[0]).toMatchObject({ tasks: 4, newRate: 0.75, oldRate: 0.25, lo: ci1.lo, hi: ci1.hi });
  }, 60_000);

  it('bad options and report folders: one line naming the option, exit 2, nothing written', () => {
    const dir = tmpDir('lamer-paired-cli-');
    const out = path.join(dir, 'f.json');
    const neu = folder('lamer-paired-new-', { 'minesweeper-6x6-3-lamer': report('minesweeper-6x6-3', NEW_MS) });
    const old = folder('lamer-paired-old-', { 'minesweeper-6x6-3-lamer': report('minesweeper-6x6-3', OLD_MS) });
    const ok = ['--new', neu, '--old', old, '--out', out];
    expectUsageError(['--old', old, '--out', out], '--new is required (an eval:base --reports folder)');
    expectUsageError(['--new', neu, '--old', '/nonexistent', '--out', out], '--old /nonexistent: not a folder');
    const empty = tmpDir('lamer-paired-empty-');
    expectUsageError(['--new', empty, '--old', old, '--out', out], `--new ${empty}: no eval:base report ({game}-{row}.json, row one of lamer, lamer-avail, independent)`);
    const other = folder('lamer-paired-other-', { 'sokoban-6x6-2-lamer': report('sokoban-6x6-2', OLD_SK) });
    expectUsageError(['--new', neu, '--old', other, '--out', out],
      `--new ${neu} and --old ${other}: no report in both folders (minesweeper-6x6-3-lamer.json (not in --old), sokoban-6x6-2-lamer.json (not in --new))`);
    const junk = tmpDir('lamer-paired-junk-');
    writeFileSync(path.join(junk, 'minesweeper-6x6-3-lamer.json'), '{"attempts": 3}');
    expectUsageError(['--new', neu, '--old', junk, '--out', out], `--old ${junk}/minesweeper-6x6-3-lamer.json: not an eval:base report (needs attempts and sessions)`);
    writeFileSync(path.join(junk, 'minesweeper-6x6-3-lamer.json'), '{"attempts": ');
    expectUsageError(['--new', neu, '--old', junk, '--out', out], new RegExp(`^experiment:base-paired: --old ${junk}/minesweeper-6x6-3-lamer\\.json: [^\n]*JSON[^\n]*\n$`));
    const two = folder('lamer-paired-two-', { 'minesweeper-6x6-3-lamer': { ...report('minesweeper-6x6-3', OLD_MS), attempts: 2 } });
    expectUsageError(['--new', neu, '--old', two, '--out', out], '--new and --old minesweeper-6x6-3-lamer.json: different attempts per session (3 and 2)');
    for (const v of ['0', '1e3', '1000001', '2.5']) expectUsageError([...ok, `--resamples=${v}`], `--resamples must be an integer in [1, 1000000] written in digits, got '${v}'`);
    expectUsageError([...ok, '--seed=-1'], "--seed must be an integer in [0, 4294967295] written in digits, got '-1'");
    expectUsageError([...ok, '--seed', '-1'], "--seed needs a value (one that starts with '-' must be written --seed=VALUE)");
    expectUsageError([...ok.slice(0, 4), '--out', dir], `--out '${dir}' must be a file path, not a folder`);
    const file = path.join(dir, 'a-file');
    writeFileSync(file, '');
    expectUsageError([...ok.slice(0, 4), '--out', path.join(file, 'f.json')], new RegExp(`^experiment:base-paired: --out ${file}/f\\.json: cannot create directory ${file}: [A-Z]+\n$`));
    expectUsageError([...ok, '--nope'], /^experiment:base-paired: Unknown option '--nope'[^\n]*\n$/);
    expectUsageError([...ok, 'extra'], /^experiment:base-paired: [^\n]*'extra'[^\n]*\n$/);
    expect(existsSync(out)).toBe(false);
    const help = run(['--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^usage: npm run experiment:base-paired -- --new DIR --old DIR \[options\]\n/);
  }, 120_000);
});
