/**
 * experiments/lamer-vs-gigpo-report.ts on made-up run folders, run as a child process: the paper's
 * layout (a folder per game) gives per game the arms' pass@k, the reflection share of trained
 * tokens and the entropies apart, the paired differences with both intervals, the aims, whether
 * memory acts (experiments/lamer-vs-gigpo-memory.ts), and the Table 1 comparison with the paper's numbers; the one-game layout of the 4x4 run still reports;
 * --results replaces the right marked section.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { root } from '../helpers/cli.js';
import { tmpDir } from '../helpers/index.js';
import type { AttemptRecord, SessionRecord } from '../../src/eval/metrics.js';

const report = (args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'experiments/lamer-vs-gigpo-report.ts', ...args], { cwd: root, encoding: 'utf8' });

/** A session of task i solved at attempt `at` (null: never) of 3. */
function session(env: string, i: number, at: number | null, reflections: boolean): SessionRecord {
  const attempts: AttemptRecord[] = [];
  for (let a = 0; a < 3; a++) {
    const ok = a === at;
    attempts.push({ attempt: a, success: ok, return: ok ? 10 : -0.1, actions: 2, invalidActions: 0, endReason: 'done', trajectory: [`(${a + 1}, ${i % 6 + 1})`, '(2, 2)'], ...(reflections && !ok && a < 2 ? { reflection: `(2, 2) was a mine.` } : {}) });
    if (ok) break;
  }
  return { taskId: `${env}:seed=${1e9 + i}`, trial: 0, attempts };
}

/** An eval report of 20 tasks: task i solved at attempt solvedAt(i). */
function evalReport(env: string, solvedAt: (i: number) => number | null, reflections: boolean) {
  const sessions = Array.from({ length: 20 }, (_, i) => session(env, i, solvedAt(i), reflections));
  return {
    env, policy: 'model', server: 'http://x', tasks: 20, attempts: 3, trials: 1, maxSteps: 7, seed: 0, seeds: { first: 1e9, last: 1e9 + 19 },
    sampling: { temperature: 0.7, topP: 0.8, topK: 20 }, modelVersion: 'v', startedAt: '2026-12-01T00:00:00Z', durationS: 12,
    metrics: { errors: 0 }, sessions,
  };
}

/** A learning curve of `iterations` iterations; LaMer's trains reflections (a quarter of its output tokens). */
function curve(algorithm: 'lamer' | 'gigpo', iterations = 2) {
  const lamer = algorithm === 'lamer';
  const point = (iteration: number) => ({
    iteration, rolloutVersion: 'base', trainedVersion: 'v', jobId: 'j', jobStatus: 'succeeded', sessions: 16, meanReturn: 1, meanReturnFirstAttempt: 1,
    passAtK: { 1: 0.2, 2: 0.3, 3: 0.4 }, invalidActionRate: 0.1, loss: 0.1, entropy: 1, clipFrac: 0, groups: 2, zeroAdvantageGroups: 0, samples: 10,
    outputTokens: 400, reflectionTokens: lamer ? 100 : 0, actionEntropy: 1.2 - 0.1 * iteration, reflectionEntropy: lamer ? 0.4 : null,
    tokensTrained: 4000, rolloutSeconds: 3, trainSeconds: 10, wallSeconds: 13 * (iteration + 1), rolloutErrors: 0,
  });
  return {
    config: { env: 'x', algorithm, iterations, tasksPerIter: 2, group: 2, sampling: { temperature: 1, topP: 1, topK: 0 }, availableActions: false, hyperparameters: { lr: 5e-5, ...(lamer ? { gammaTraj: 0.9 } : {}) } },
    points: Array.from({ length: iterations }, (_, i) => point(i)), startedAt: '2026-12-01T00:00:00Z', wallSeconds: 13 * iterations,
  };
}

const write = (f: string, x: unknown) => { mkdirSync(path.dirname(f), { recursive: true }); writeFileSync(f, typeof x === 'string' ? x : JSON.stringify(x)); };

/** One game's folder: LaMer solves every task by attempt 2 (seed 1: task 0 at 1), GiGPO half at attempt 0, the SFT start a quarter. */
function writeGame(dir: string, env: string, iterations = 2) {
  for (const seed of [0, 1]) {
    write(path.join(dir, 'lamer', `seed-${seed}`, 'learning-curve.json'), curve('lamer', iterations));
    write(path.join(dir, `eval-lamer-seed${seed}.json`), evalReport(env, (i) => (i % 2 === 0 ? 0 : 1), true));
    write(path.join(dir, 'gigpo', `seed-${seed}`, 'learning-curve.json'), curve('gigpo', iterations));
    write(path.join(dir, `eval-gigpo-seed${seed}.json`), evalReport(env, (i) => (i % 2 === 0 ? 0 : null), false));
  }
  write(path.join(dir, 'eval-sft-lamer-mode.json'), evalReport(env, (i) => (i % 4 === 0 ? 0 : null), true));
  write(path.join(dir, 'eval-sft-independent.json'), evalReport(env, (i) => (i % 4 === 0 ? 0 : null), false));
  // the eval ran other code than the training (a merge mid-run): the report warns
  write(path.join(dir, 'timings.jsonl'), ['{"piece":"train lamer seed 0","wallS":30,"cpuS":25,"code":"aaa"}', '{"piece":"eval lamer-seed0","wallS":12,"cpuS":11,"code":"bbb+dirty"}', ''].join('\n'));
}

describe('experiments/lamer-vs-gigpo-report.ts', () => {
  it("paper's layout: per game the table, both intervals, the reflection share and entropies, the aims, Table 1 beside the paper", () => {
    const out = tmpDir('lamer-lvg-report-');
    write(path.join(out, 'meta.json'), { commit: '0123456789abcdef', dirty: false, settings: { ITER: '2', TRAIN_SAMPLING: '1/1/0', AVAILABLE_ACTIONS: '0' } });
    writeGame(path.join(out, 'minesweeper-6x6-3'), 'minesweeper-6x6-3');
    writeGame(path.join(out, 'sokoban-6x6-2'), 'sokoban-6x6-2');
    const results = path.join(out, 'RESULTS.md');
    write(results, '# Results\n\n<!-- lamer-vs-gigpo-paper:begin -->\nold\n<!-- lamer-vs-gigpo-paper:end -->\n');
    const r = report([out, '--resamples', '200', '--results', results]);
    expect(r.status, r.stderr).toBe(0);
    const md = readFileSync(path.join(out, 'report.md'), 'utf8');
    expect(md).toContain('settings ITER=2 TRAIN_SAMPLING=1/1/0 AVAILABLE_ACTIONS=0');
    expect(md).toContain('Training rollouts sampled at temperature 1, top-p 1, top-k none (the paper trains at temperature 1.0)');
    expect(md).toContain('### MineSweeper 6x6, 3 mines');
    expect(md).toContain('### Sokoban 6x6, 2 boxes');
    expect(md).toContain('- LaMer: `--algorithm lamer`, 2 trials x 3 attempts (reflections trained) per task, gamma_traj 0.9, 2 tasks an iteration, 2 iterations, lr 0.00005,');
    // LaMer: pass@1 50, pass@3 100 on both seeds; reflections 100 of 400 output tokens; action entropy 1.2 -> 1.1
    expect(md).toContain('| LaMer | 3-attempt sessions, reflections | 2 | 50.0 ± 0.0 | 100.0 ± 0.0 | 100.0 ± 0.0 | 50.0 ± 0.0 |');
    expect(md).toMatch(/\| LaMer \|[^\n]*\| 25\.0 ± 0\.0% \| 1\.200 -> 1\.100 \| 0\.400 -> 0\.400 \|/);
    expect(md).toMatch(/\| GiGPO \| independent retries \| 2 \| 50\.0 ± 0\.0 \|[^\n]*\| 0\.0 ± 0\.0% \| 1\.200 -> 1\.100 \| - \|/);
    expect(md).toContain('| SFT start (3-attempt sessions, reflections) | 3-attempt sessions, reflections | 1 | 25.0 | 25.0 | 25.0 | 0.0 |');
    // LaMer - GiGPO at pass@3: +50 points, every resample too (both seeds alike)
    expect(md).toContain('| LaMer - GiGPO | pass@3 | 20 | 2, 2 | 50.0 | [');
    expect(md).toContain('| LaMer - SFT start (3-attempt sessions, reflections) | pass@1 -> pass@3 gain | 20 | 2, 1 | 50.0 |');
    expect(md).toMatch(/\| LaMer pass@3 at least GiGPO's \+ 5 points, interval \(seeds and tasks\) above 0 \| 50\.0 pts, \[[\d.]+, [\d.]+\] \| met \|/);
    expect(md).toContain("| LaMer's pass@1 -> pass@3 gain at least 1.5x GiGPO's | 50.0 vs 0.0 pts (GiGPO's gain <= 0) | met |");
    expect(md).toContain('the +5 aim is set for MineSweeper');
    // Table 1: ours (mean over seeds) beside the paper's
    expect(md).toContain('| LaMer | 50.0 / 100.0 / 100.0 | 50.0 / 100.0 / 100.0 | 42.4 / 52.0 / 55.9 | 44.1 / 66.4 / 74.4 |');
    expect(md).toContain('| GRPO | - | - | 22.9 / 26.4 / 27.0 | 36.3 / 40.0 / 40.4 |');
    // learning curves and compute
    expect(md).toContain('| 1 | 20.0 | 40.0 | - | - | 1.00 | 1.100 | 0.400 | 0.0000 | - | 25.0% | 0.0/2 | 3 | 10 |');
    expect(md).toContain('| LaMer | 0 | 2 | 32 | 800 | 200 | 6 | 20 | 13.0 | 30 / 25 | 12 / 11 |');
    expect(md).toContain('**Warning: the pieces of this game ran different code** (trees of src/: `aaa`, `bbb+dirty`;');
    // does memory act? (experiments/lamer-vs-gigpo-memory.ts): LaMer's 10 failed attempts per seed each
    // end on the mine (2, 2), the reflection names it, the next attempt starts elsewhere, clicks
    // (2, 2) again (and, in this made-up data, wins)
    expect(md).toContain('#### Does memory act?');
    expect(md).toContain('| LaMer seed 1 | yes | 10 | 0.0 [0.0, 0.0] | 0.0 [0.0, 0.0] | 100.0 [100.0, 100.0] | 10 | 100.0 [100.0, 100.0] |');
    expect(md).toContain('| LaMer seed 0 | 10 | 10 | 100.0 [100.0, 100.0] |');
    expect(md).toContain('Training: no LaMer training database');
    expect(existsSync(path.join(out, 'curves-minesweeper-6x6-3.svg'))).toBe(true);
    expect(existsSync(path.join(out, 'curves-sokoban-6x6-2.svg'))).toBe(true);
    const doc = readFileSync(results, 'utf8');
    expect(doc).toContain('<!-- lamer-vs-gigpo-paper:begin -->\nMeasured by');
    expect(doc).not.toContain('\nold\n');
  }, 60_000);

  it('one-game layout (the MineSweeper 4x4 run, here of one iteration): still reported, with curves.svg and the lamer-vs-gigpo-redone section', () => {
    const out = tmpDir('lamer-lvg-report-legacy-');
    writeGame(out, 'minesweeper-4x4-2', 1);
    const results = path.join(out, 'RESULTS.md');
    write(results, '# Results\n');
    const r = report([out, '--resamples', '200', '--results', results]);
    expect(r.status, r.stderr).toBe(0);
    const md = readFileSync(path.join(out, 'report.md'), 'utf8');
    expect(md).toContain('#### MineSweeper 4x4, 2 mines');
    // one iteration is said in the singular
    expect(md).toContain('2 tasks an iteration, 1 iteration, lr 0.00005,');
    expect(md).not.toContain('1 iterations');
    expect(md).not.toContain('Against the paper');
    expect(existsSync(path.join(out, 'curves.svg'))).toBe(true);
    expect(readFileSync(results, 'utf8')).toContain('<!-- lamer-vs-gigpo-redone:begin -->');
  }, 60_000);

  it('no eval files: one line, exit 1; no OUT_DIR: usage, exit 2', () => {
    const r = report([tmpDir('lamer-lvg-report-empty-')]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('no eval files under');
    expect(report([]).status).toBe(2);
  }, 60_000);
});
