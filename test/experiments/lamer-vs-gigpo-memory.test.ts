/**
 * experiments/lamer-vs-gigpo-memory.ts ("Does memory act?") on hand-made eval reports and a hand-made
 * LaMer database whose answers are worked out below: counts per task, the bootstrap over tasks,
 * the advantage of trained reflections (recomputed as the job does, checked against the stored
 * one), and the standalone entry printing the section.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { root } from '../helpers/cli.js';
import { tmpDir } from '../helpers/index.js';
import { openDatabase } from '../../src/db/index.js';
import { sessions as sessionsTable, steps, trainingJobs } from '../../src/db/schema.js';
import type { AttemptRecord, SessionRecord } from '../../src/eval/metrics.js';
import {
  memorySection, readMemoryGame, reflectionCredits, rowShares, shareDifferences, taskBootstrap, taskCounts, type MemoryGame,
} from '../../experiments/lamer-vs-gigpo-memory.js';

const ENV = 'minesweeper-6x6-3';

/** An attempt: canonical actions; `end` 'mine' (done, failed), 'win' (done, success) or 'cap' (turn cap). */
function att(n: number, trajectory: string[], end: 'mine' | 'win' | 'cap', reflection?: string): AttemptRecord {
  return {
    attempt: n, success: end === 'win', return: 0, actions: trajectory.length, invalidActions: 0, endReason: end === 'cap' ? 'max_steps' : 'done', trajectory,
    ...(reflection !== undefined ? { reflection } : {}),
  };
}
const ses = (i: number, attempts: AttemptRecord[]): SessionRecord => ({ taskId: `${ENV}:seed=${1e9 + i}`, trial: 0, attempts });

/**
 * Four rows of 4 tasks, every task alike (so every bootstrap interval is a point):
 *   LaMer   (memory): (1,1)(2,2) mine, "(2, 2) was a mine." -> (1,1)(3,3) mine, "(1, 1) was a mine." -> (1,1)(3,3) mine
 *           pairs 2: same first 2, same trajectory 1, solved 0; after a mine 2, re-clicks 1 (the unnamed (3,3));
 *           reflections 2, after a mine 2, naming it 1; clicks while memory names a mine 4, on one 1 ((1,1) in attempt 2)
 *   GiGPO   (none):   (1,1)(2,2) mine -> (4,4) win: pairs 1, solved 1, after a mine 1, re-clicks 0
 *   SFT mem:          (1,1)(2,2) mine, "(2, 2) was a mine." -> (5,5) win: pairs 1, solved 1, re-clicks 0 (named)
 *   SFT indep:        (1,1)(2,2) mine, three times: pairs 2, same first 2, same trajectory 2, solved 0, re-clicks 2
 */
const ROWS = {
  lamer: (i: number) => ses(i, [att(0, ['(1, 1)', '(2, 2)'], 'mine', '(2, 2) was a mine.'), att(1, ['(1, 1)', '(3, 3)'], 'mine', '(1, 1) was a mine.'), att(2, ['(1, 1)', '(3, 3)'], 'mine')]),
  gigpo: (i: number) => ses(i, [att(0, ['(1, 1)', '(2, 2)'], 'mine'), att(1, ['(4, 4)'], 'win')]),
  sftMem: (i: number) => ses(i, [att(0, ['(1, 1)', '(2, 2)'], 'mine', '(2, 2) was a mine.'), att(1, ['(5, 5)'], 'win')]),
  sftIndep: (i: number) => ses(i, [0, 1, 2].map((n) => att(n, ['(1, 1)', '(2, 2)'], 'mine'))),
};
const tasks = (f: (i: number) => SessionRecord) => [0, 1, 2, 3].map(f);

const evalReport = (sessions: SessionRecord[], env = ENV) => ({
  env, policy: 'model', server: 'http://x', tasks: sessions.length, attempts: 3, trials: 1, maxSteps: 7, seed: 0, seeds: { first: 1e9, last: 1e9 + 3 },
  sampling: { temperature: 0.7, topP: 0.8, topK: 20 }, modelVersion: 'v', startedAt: '2026-12-01T00:00:00Z', durationS: 1, metrics: { errors: 0 }, sessions,
});
const write = (f: string, x: unknown) => { mkdirSync(path.dirname(f), { recursive: true }); writeFileSync(f, JSON.stringify(x)); };

/**
 * A LaMer run's database: one job (iteration 0, gamma_traj 0.9, gamma_step 0.95 by default, Eq. 4)
 * on task minesweeper-6x6-3:seed=0, two sessions:
 *   A: (1,1) mine (reward -0.1), "(1, 1) was a mine." -> (2,2) win (+10)
 *   B: (1,1) mine (-0.1), "(3, 3) was a mine." -> (1,1) mine (-0.1), "turns ran out." (no attempt 2: not trained)
 * Returns: reflection A G_0(1) = 10, reflection B G_0(1) = -0.1. Episode scores of the 6 trained
 * turns: -0.1, 0, 10 | -0.1, 0, -0.1 -> task mean 9.7 / 6. Reflections form one anchor group,
 * mean G 4.95. Advantage A = (0 - 9.7/6) + (10 - 4.95) = 3.4333...; B = -9.7/6 + (-0.1 - 4.95) = -6.6666...
 */
const ADV_A = 0 - 9.7 / 6 + (10 - 4.95);
const ADV_B = 0 - 9.7 / 6 + (-0.1 - 4.95);
function writeDb(dataDir: string, stored: [number, number]) {
  const d = openDatabase(dataDir);
  const task = `${ENV}:seed=0`;
  type Row = [attempt: number, step: number, kind: 'action' | 'reflection', action: string | null, output: string | null, reward: number, done: boolean, success: boolean, advantage?: number];
  const add = (id: string, createdAt: number, rows: Row[], mode: 'train' | 'eval' = 'train') => {
    d.db.insert(sessionsTable).values({
      id, tenant: 'default', taskId: task, env: 'minesweeper', mode, status: 'completed', instructions: 'Play.', maxAttempts: 3, maxSteps: 7,
      memory: 'reflection_only', sampling: {}, modelVersion: 'base', metadata: {}, nextAttempt: 0, nextStep: 0, attempts: [], createdAt, updatedAt: createdAt,
    }).run();
    for (const [attempt, step, kind, action, output, reward, done, success, advantage] of rows) {
      const out = output === null ? null : [65, 66];
      d.db.insert(steps).values({
        sessionId: id, attempt, step, kind, observation: step === 0 ? 'O0' : `end-${id}-${attempt}`, reward, done, success, invalidAction: false,
        action, output, promptTokenIds: out ? [256, 1] : null, outputTokenIds: out, logprobs: out ? out.map(() => -1) : null,
        modelVersion: 'base', requestHash: `${id}-${attempt}-${step}-${kind}`, createdAt, ...(advantage !== undefined ? { advantage } : {}),
      }).run();
    }
  };
  add('A', 2000, [[0, 0, 'action', '(1, 1)', '(1, 1)', 0, false, false], [0, 1, 'action', null, null, -0.1, true, false], [0, 1, 'reflection', null, '(1, 1) was a mine.', 0, true, false, stored[0]],
    [1, 0, 'action', '(2, 2)', '(2, 2)', 0, false, false], [1, 1, 'action', null, null, 10, true, true]]);
  add('B', 2001, [[0, 0, 'action', '(1, 1)', '(1, 1)', 0, false, false], [0, 1, 'action', null, null, -0.1, true, false], [0, 1, 'reflection', null, '(3, 3) was a mine.', 0, true, false, stored[1]],
    [1, 0, 'action', '(1, 1)', '(1, 1)', 0, false, false], [1, 1, 'action', null, null, -0.1, true, false], [1, 1, 'reflection', null, 'turns ran out.', 0, true, false]]);
  // an eval session in the same database: never read
  add('E', 2002, [[0, 0, 'action', '(1, 1)', '(1, 1)', 0, false, false], [0, 1, 'action', null, null, -0.1, true, false], [0, 1, 'reflection', null, '(1, 1) was a mine.', 0, true, false]], 'eval');
  d.db.insert(trainingJobs).values({ id: 'job_1', algorithm: 'lamer', status: 'succeeded', config: { algorithm: 'lamer', data: { taskIds: [task], modelVersion: 'base', since: 1000 }, hyper: { gammaTraj: 0.9 } }, metrics: [], createdAt: 3000 }).run();
  d.db.insert(trainingJobs).values({ id: 'job_0', algorithm: 'lamer', status: 'failed', config: { algorithm: 'lamer', data: { taskIds: [task] } }, metrics: [], createdAt: 2500 }).run();
  d.close();
}

describe('taskCounts and the bootstrap over tasks', () => {
  it('counts pairs, repeats, next successes, re-clicked mines and what reflections name, per task', () => {
    const c = taskCounts([...tasks(ROWS.lamer), ses(9, [att(0, ['(6, 6)'], 'cap', 'turns ran out.'), att(1, [], 'cap')])]);
    expect(c.size).toBe(5);
    expect(c.get(`${ENV}:seed=${1e9}`)).toEqual({
      pairs: 2, sameFirst: 2, sameWhole: 1, nextSolved: 0, afterMine: 2, reclicksMine: 1, afterMineNamed: 1, reclicksNamed: 0, afterMineUnnamed: 1, reclicksUnnamed: 1,
      reflections: 2, reflAfterMine: 2, reflNamesMine: 1, clicksWithNamed: 4, clicksOnNamed: 1, reflBoxCell: 0,
    });
    // an attempt without actions makes no pair; its reflection still counts
    expect(c.get(`${ENV}:seed=${1e9 + 9}`)).toMatchObject({ pairs: 0, reflections: 1, reflAfterMine: 0 });
    const s = rowShares(c, ['sameFirst', 'sameWhole', 'reclicksMine', 'reflNamesMine', 'clicksOnNamed'], { resamples: 50 });
    expect(s.sameFirst).toMatchObject({ value: 1, lo: 1, hi: 1, num: 8, den: 8 });
    expect(s.sameWhole).toMatchObject({ value: 0.5, lo: 0.5, hi: 0.5 });
    expect(s.clicksOnNamed).toMatchObject({ value: 0.25, num: 4, den: 16 });
    // Sokoban: reflections naming a box with its cell
    const sk = taskCounts([{ taskId: 's', trial: 0, attempts: [att(0, ['up'], 'cap', 'The box (2, 3) is stuck.'), att(1, ['up'], 'cap', 'I went left.'), att(2, ['left'], 'win')] }]);
    expect(sk.get('s')).toMatchObject({ pairs: 2, sameFirst: 1, sameWhole: 1, nextSolved: 1, afterMine: 0, reflections: 2, reflBoxCell: 1 });
  });

  it('taskBootstrap: ratios of pooled sums, resamples without a denominator left out, deterministic', () => {
    const rows = [[1, 2], [0, 2], [3, 4]];
    const [r] = taskBootstrap(rows, [(s) => s[0]! / s[1]!], { resamples: 500 });
    expect(r!.value).toBeCloseTo(4 / 8, 12);
    expect(r!.lo).toBeGreaterThanOrEqual(0);
    expect(r!.hi).toBeLessThanOrEqual(0.75);
    expect(r!.resamples).toBe(500);
    expect(taskBootstrap(rows, [(s) => s[0]! / s[1]!], { resamples: 500 })).toEqual([r]);
    // the second task alone has no denominator: those resamples are dropped
    const [q] = taskBootstrap([[1, 1], [0, 0]], [(s) => s[0]! / s[1]!], { resamples: 400 });
    expect(q).toMatchObject({ value: 1, lo: 1, hi: 1 });
    expect(q!.resamples).toBeLessThan(400);
    expect(taskBootstrap([[0, 0]], [(s) => s[0]! / s[1]!], { resamples: 10 })[0]!.value).toBeNaN();
    expect(() => taskBootstrap(rows, [], { level: 1 })).toThrow(RangeError);
  });

  it('shareDifferences: a - b over the tasks both played', () => {
    const d = shareDifferences(taskCounts(tasks(ROWS.sftMem)), taskCounts([...tasks(ROWS.sftIndep), ROWS.sftIndep(7)]), ['sameFirst', 'nextSolved', 'reclicksMine'], { resamples: 100 });
    expect(d.tasks).toBe(4);
    expect(d.diffs.sameFirst).toMatchObject({ value: -1, lo: -1, hi: -1 });
    expect(d.diffs.nextSolved).toMatchObject({ value: 1, lo: 1, hi: 1 });
    expect(d.diffs.reclicksMine).toMatchObject({ value: -1 });
  });
});

describe('reflectionCredits (a LaMer database)', () => {
  it('the advantage the job gave each trained reflection, as buildRlSamples computes it, grouped by what it names', () => {
    const dir = tmpDir('lamer-memory-db-');
    writeDb(dir, [ADV_A, 99]);
    const cs = reflectionCredits(path.join(dir, 'lamer.db'), 3, ENV);
    expect(cs.map((c) => [c.sessionId, c.attempt, c.group, c.iteration, c.seed, c.nextSolved, c.nextReclicks])).toEqual([
      ['A', 0, 'names the mine', 0, 3, true, false],
      ['B', 0, 'misses the mine', 0, 3, false, true],
    ]);
    expect(cs[0]!.advantage).toBeCloseTo(ADV_A, 9);
    expect(cs[1]!.advantage).toBeCloseTo(ADV_B, 9);
    expect(cs[0]!.return).toBeCloseTo(10, 9);
    expect(cs[1]!.return).toBeCloseTo(-0.1, 9);
    expect(cs.map((c) => c.storedAdvantage)).toEqual([ADV_A, 99]);
  });
});

describe('memorySection', () => {
  it('Sokoban: no mine columns, the box-cell share of reflections, and a line when there is no database', () => {
    const g: MemoryGame = {
      env: 'sokoban-6x6-2', training: [],
      rows: [{ key: 'lamer-seed0', label: 'LaMer seed 0', memory: true, arm: 'lamer', sessions: [{ taskId: 's', trial: 0, attempts: [att(0, ['up'], 'cap', 'The box (2, 3) is stuck.'), att(1, ['up'], 'cap', 'I went left.'), att(2, ['left'], 'win')] }] }],
    };
    const md = memorySection(g, { level: '###', resamples: 100 }).join('\n');
    expect(md).toContain('### Does memory act?');
    expect(md).toContain('| LaMer seed 0 | yes | 2 | 50.0 [50.0, 50.0] | 50.0 [50.0, 50.0] | 50.0 [50.0, 50.0] |\n');
    expect(md).toContain('| LaMer seed 0 | 2 | 50.0 [50.0, 50.0] |');
    expect(md).toContain('Training: no LaMer training database');
    expect(md).not.toContain('re-clicks');
  });

  it('standalone entry on a game folder: every eval row, the differences, what reflections name, and the trained reflections\' advantages', () => {
    const out = tmpDir('lamer-memory-cli-');
    const dir = path.join(out, ENV);
    write(path.join(dir, 'eval-lamer-seed0.json'), evalReport(tasks(ROWS.lamer)));
    write(path.join(dir, 'eval-gigpo-seed0.json'), evalReport(tasks(ROWS.gigpo)));
    write(path.join(dir, 'eval-sft-lamer-mode.json'), evalReport(tasks(ROWS.sftMem)));
    write(path.join(dir, 'eval-sft-independent.json'), evalReport(tasks(ROWS.sftIndep)));
    // the LaMer run's weights without memory (the same-weights control), played like the SFT independent row
    write(path.join(dir, 'eval-lamer-independent-seed0.json'), evalReport(tasks(ROWS.sftIndep)));
    writeDb(path.join(dir, 'lamer', 'seed-0', 'data'), [ADV_A, ADV_B]);
    // a LaMer run still training (no eval file): its folder is not read
    mkdirSync(path.join(dir, 'lamer', 'seed-1', 'data'), { recursive: true });
    expect(readMemoryGame(dir)!.training.map((t) => t.seed)).toEqual([0]);
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'experiments/lamer-vs-gigpo-memory.ts', out, '--resamples', '200'], { cwd: root, encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const md = r.stdout;
    expect(md).toContain(`## ${ENV}\n\n### Does memory act?`);
    expect(md).toContain('| LaMer seed 0 | yes | 8 | 100.0 [100.0, 100.0] | 50.0 [50.0, 50.0] | 0.0 [0.0, 0.0] | 8 | 50.0 [50.0, 50.0] |');
    expect(md).toContain('| LaMer seed 0, independent retries | no | 8 | 100.0 [100.0, 100.0] | 100.0 [100.0, 100.0] | 0.0 [0.0, 0.0] | 8 | 100.0 [100.0, 100.0] |');
    expect(md).toContain('| LaMer (seed 0) - LaMer, independent retries (seed 0) | same weights: the memory alone | 4 | 0.0 [0.0, 0.0] | -50.0 [-50.0, -50.0] | 0.0 [0.0, 0.0] | -50.0 [-50.0, -50.0] |');
    expect(md).toContain('| GiGPO seed 0 | no | 4 | 0.0 [0.0, 0.0] | 0.0 [0.0, 0.0] | 100.0 [100.0, 100.0] | 4 | 0.0 [0.0, 0.0] |');
    expect(md).toContain('| SFT start, 3-attempt sessions | yes | 4 | 0.0 [0.0, 0.0] | 0.0 [0.0, 0.0] | 100.0 [100.0, 100.0] | 4 | 0.0 [0.0, 0.0] |');
    expect(md).toContain('| SFT start, independent retries | no | 8 | 100.0 [100.0, 100.0] | 100.0 [100.0, 100.0] | 0.0 [0.0, 0.0] | 8 | 100.0 [100.0, 100.0] |');
    expect(md).toContain('| SFT start, 3-attempt sessions - SFT start, independent retries | same weights: the memory alone | 4 | -100.0 [-100.0, -100.0] | -100.0 [-100.0, -100.0] | 100.0 [100.0, 100.0] | -100.0 [-100.0, -100.0] |');
    expect(md).toContain('| LaMer (seed 0) - GiGPO (seed 0) | other weights too | 4 | 100.0 [100.0, 100.0] | 50.0 [50.0, 50.0] | -100.0 [-100.0, -100.0] | 50.0 [50.0, 50.0] |');
    expect(md).toContain('| LaMer (seed 0) - SFT start, 3-attempt sessions | both with memory: what LaMer training changed | 4 | 100.0 [100.0, 100.0] |');
    // reflections: 8 after a mine, half name it; 16 clicks while memory names a mine, 4 on one;
    // re-clicks: 0 of the 4 named, 4 of the 4 unnamed
    expect(md).toContain('| LaMer seed 0 | 8 | 8 | 50.0 [50.0, 50.0] | 16 | 25.0 [25.0, 25.0] | 0.0 [0.0, 0.0] of 4 | 100.0 [100.0, 100.0] of 4 |');
    expect(md).toContain('| SFT start, 3-attempt sessions | 4 | 4 | 100.0 [100.0, 100.0] | 4 | 0.0 [0.0, 0.0] | 0.0 [0.0, 0.0] of 4 | - of 0 |');
    expect(md).not.toContain('| GiGPO seed 0 | 0 |');
    // training: the two trained reflections of the database, the dangling one and the eval session's left out
    expect(md).toContain('(2 over 1 iteration, seed 0)'); // singular for one iteration
    expect(md).toContain('Check: the recomputed advantage equals the one the job stored on 2 of 2 reflections with a stored value');
    expect(md).toContain('| 0 | names the mine | 1 | 3.43 [3.43, 3.43] | 10.00 [10.00, 10.00] | 100.0 [100.0, 100.0] | 0.0 [0.0, 0.0] |');
    expect(md).toContain('| 0 | misses the mine | 1 | -6.67 [-6.67, -6.67] | -0.10 [-0.10, -0.10] | 0.0 [0.0, 0.0] | 100.0 [100.0, 100.0] |');
    expect(md).toContain('| 0 | after the turn cap | 0 | - | - | - | - |');
    // (3.4333 - 6.6667) / 2 = -9.7 / 6: the task's episode term
    expect(md).toContain('Mean advantage over every trained reflection: -1.62 [-1.62, -1.62].');
    // within the task: 3.4333 - (-6.6667) = 10.10 (= the difference of their returns, 10 - (-0.1))
    expect(md).toContain('"names the mine" - "misses the mine", all seeds: mean advantage 10.10 [10.10, 10.10], next attempt solves 100.0 [100.0, 100.0] points; within the same task and iteration (1 groups with both): mean advantage 10.10 [10.10, 10.10].');
    expect(md).toContain('| 0 | 1 | 3.43 | 1 | -6.67 | 0 | - |');
  }, 60_000);

  it('standalone entry: usage (exit 2) and no eval files (exit 1)', () => {
    const run = (args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'experiments/lamer-vs-gigpo-memory.ts', ...args], { cwd: root, encoding: 'utf8' });
    expect(run([]).status).toBe(2);
    const r = run([tmpDir('lamer-memory-empty-')]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('no eval files under');
  }, 60_000);
});
