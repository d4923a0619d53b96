import { describe, expect, it } from 'vitest';
import {
  comparisonMarkdown, hasSection, meanStd, minesNamed, pairedBootstrap, pairedDiffs, quantile, reflectionStats, replaceSection, seedTaskBootstrap, summarizeArm, taskValues, type ArmResult,
} from '../../src/eval/compare.js';
import type { AttemptRecord, SessionRecord } from '../../src/eval/metrics.js';

const att = (attempt: number, success: boolean, trajectory: string[], reflection?: string, endReason: 'done' | 'max_steps' = 'done'): AttemptRecord =>
  ({ attempt, success, return: success ? 10 : -1, actions: trajectory.length, invalidActions: 0, endReason, trajectory, ...(reflection !== undefined ? { reflection } : {}) });
/** A session solved at attempt `solvedAt` (null: never) of `n` attempts. */
const sess = (taskId: string, solvedAt: number | null, n = 3): SessionRecord => {
  const attempts: AttemptRecord[] = [];
  for (let a = 0; a < n; a++) {
    attempts.push(att(a, a === solvedAt, ['(1, 1)']));
    if (a === solvedAt) break;
  }
  return { taskId, trial: 0, attempts };
};

describe('quantile (type 7), table', () => {
  const cases: Array<[number[], number, number]> = [
    [[1, 2, 3, 4], 0, 1], [[1, 2, 3, 4], 1, 4], [[1, 2, 3, 4], 0.5, 2.5], [[1, 2, 3, 4], 0.25, 1.75],
    [[0, 10], 0.025, 0.25], [[0, 10], 0.975, 9.75], [[5], 0.3, 5],
  ];
  for (const [xs, q, want] of cases) it(`q ${q} of [${xs}] = ${want}`, () => expect(quantile(xs, q)).toBeCloseTo(want, 12));
  it('rejects no values and q outside [0, 1]', () => {
    expect(() => quantile([], 0.5)).toThrow(RangeError);
    expect(() => quantile([1], 1.5)).toThrow(RangeError);
  });
});

describe('pairedBootstrap, table (exact where the resampling distribution has atoms wider than 2.5%)', () => {
  // d = [1, 0]: resampled means 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4 -> 95% interval [0, 1]
  // d = [2, 0, 0, 0]: mean = 0.5 k, k ~ Bin(4, 1/4): P(k=0) = 0.316 -> lo 0; P(k>=3) = 0.051,
  //   P(k=4) = 0.004 -> hi 1.5
  // constant d: every resample has the same mean
  const cases: Array<[number[], number, number, number]> = [
    [[1, 0], 0.5, 0, 1],
    [[2, 0, 0, 0], 0.5, 0, 1.5],
    [[0.25, 0.25, 0.25], 0.25, 0.25, 0.25],
    [[-1, -1], -1, -1, -1],
  ];
  for (const [d, mean, lo, hi] of cases) {
    it(`[${d}] -> mean ${mean}, [${lo}, ${hi}]`, () => {
      const ci = pairedBootstrap(d, { resamples: 20_000, seed: 7 });
      expect(ci.mean).toBeCloseTo(mean, 12);
      expect(ci.lo).toBeCloseTo(lo, 12);
      expect(ci.hi).toBeCloseTo(hi, 12);
      expect(ci.tasks).toBe(d.length);
    });
  }
  it('is deterministic for a seed, and narrows with more tasks', () => {
    const d = Array.from({ length: 50 }, (_, i) => (i % 3 === 0 ? 1 : 0));
    expect(pairedBootstrap(d, { seed: 3 })).toEqual(pairedBootstrap(d, { seed: 3 }));
    const wide = pairedBootstrap(d);
    const narrow = pairedBootstrap([...d, ...d, ...d, ...d]);
    expect(narrow.hi - narrow.lo).toBeLessThan(wide.hi - wide.lo);
    expect(() => pairedBootstrap([])).toThrow(RangeError);
  });
});

describe('seedTaskBootstrap: training seeds and tasks resampled', () => {
  const m = (xs: Record<string, number>) => new Map(Object.entries(xs));
  it('one run per method: the tasks-only interval (exact atoms as above)', () => {
    const ci = seedTaskBootstrap([m({ x: 1, y: 0 })], [m({ x: 0, y: 0 })], { resamples: 20_000, seed: 7 });
    expect([ci.mean, ci.lo, ci.hi, ci.tasks, ci.runsA, ci.runsB]).toEqual([0.5, 0, 1, 2, 1, 1]);
  });
  it('two seeds that disagree on every task: the seed draw alone spans [0, 1], where the tasks-only interval is a point', () => {
    // A's seed 0 solves every task, seed 1 none; B (one run) none: A's drawn-seed mean is 0, 0.5 or 1
    // with probabilities 1/4, 1/2, 1/4 whatever tasks are drawn
    const tasks = ['t0', 't1', 't2', 't3'];
    const a = [m(Object.fromEntries(tasks.map((t) => [t, 1]))), m(Object.fromEntries(tasks.map((t) => [t, 0])))];
    const b = [m(Object.fromEntries(tasks.map((t) => [t, 0])))];
    const ci = seedTaskBootstrap(a, b, { resamples: 20_000, seed: 3 });
    expect([ci.mean, ci.lo, ci.hi]).toEqual([0.5, 0, 1]);
    const tasksOnly = pairedBootstrap(tasks.map(() => 0.5));
    expect([tasksOnly.lo, tasksOnly.hi]).toEqual([0.5, 0.5]);
  });
  it('pairs tasks by id over the tasks every run played; deterministic for a seed; rejects no runs or no common task', () => {
    const a = [m({ x: 1, y: 1, z: 1 }), m({ x: 1, y: 0 })];
    const b = [m({ x: 0, y: 0, w: 1 })];
    const ci = seedTaskBootstrap(a, b, { seed: 1 });
    expect(ci.tasks).toBe(2);
    expect(ci.mean).toBeCloseTo(0.75, 12); // x: 1 - 0, y: 0.5 - 0
    expect(seedTaskBootstrap(a, b, { seed: 1 })).toEqual(ci);
    expect(() => seedTaskBootstrap([], b)).toThrow(/no runs/);
    expect(() => seedTaskBootstrap([m({ x: 1 })], [m({ y: 1 })])).toThrow(/no common tasks/);
  });
  it('taskValues: pass@k per task of one run, or the gain pass@K - pass@k', () => {
    const run = [sess('a', 0), sess('b', 2), sess('c', null)];
    expect(Object.fromEntries(taskValues(run, 1))).toEqual({ a: 1, b: 0, c: 0 });
    expect(Object.fromEntries(taskValues(run, 3))).toEqual({ a: 1, b: 1, c: 0 });
    expect(Object.fromEntries(taskValues(run, 1, 3))).toEqual({ a: 0, b: 1, c: 0 });
  });
});

describe('pairedDiffs and meanStd', () => {
  it('pairs tasks by id, each task pass@k averaged over its sessions (seeds)', () => {
    const a = [sess('t1', 0), sess('t1', null), sess('t2', 2), sess('t3', 0)];
    const b = [sess('t1', null), sess('t2', 0), sess('t2', null)];
    // pass@3: a t1 0.5, t2 1; b t1 0, t2 0.5 (t3 unpaired)
    expect(pairedDiffs(a, b, 3)).toEqual([0.5, 0.5]);
    // pass@1: a t1 0.5, t2 0; b t1 0, t2 0.5
    expect(pairedDiffs(a, b, 1)).toEqual([0.5, -0.5]);
  });
  it('meanStd uses n - 1', () => {
    expect(meanStd([1, 2, 3, 4])).toEqual({ mean: 2.5, std: Math.sqrt(5 / 3), n: 4 });
    expect(meanStd([7])).toEqual({ mean: 7, std: 0, n: 1 });
  });
});

describe('reflectionStats', () => {
  it('counts reflections naming the cell that ended the attempt, repeats and text shared across tasks', () => {
    const s1: SessionRecord = { taskId: 'a', trial: 0, attempts: [
      att(0, false, ['(1, 1)', '(2, 3)'], 'Attempt 1 failed: (2, 3) was a mine.'),
      att(1, false, ['(4, 4)'], 'Attempt 1 failed: (2, 3) was a mine.'), // repeats, and names the wrong cell
      att(2, true, ['(1, 2)']),
    ] };
    const s2: SessionRecord = { taskId: 'b', trial: 0, attempts: [
      att(0, false, ['(3, 1)'], 'The mine was at row 3, column 1.'),
      att(1, false, ['(1, 1)', '(1, 2)'], 'Attempt 1 failed: (2, 3) was a mine.', 'max_steps'), // turn cap: no ending cell
      att(2, false, ['(2, 2)', '(2, 3)']), // clicks the mine its memory names
    ] };
    const r = reflectionStats([s1, s2]);
    // clicks under a memory naming a mine: s1 (4, 4) and (1, 2); s2's last attempt (2, 2) and (2, 3)
    // (s2's first reflection names no "(r, c)", so its second attempt has none)
    expect(r).toEqual({
      reflections: 4, afterLosingAction: 3, namesEndingCell: 2 / 3, repeatsPrevious: 1 / 2, sharedAcrossTasks: 3 / 4,
      clicksWithNamedMines: 4, clicksOnNamedMine: 1 / 4,
    });
    expect(reflectionStats([sess('x', 0)])).toEqual({
      reflections: 0, afterLosingAction: 0, namesEndingCell: null, repeatsPrevious: null, sharedAcrossTasks: null, clicksWithNamedMines: 0, clicksOnNamedMine: null,
    });
  });

  it.each([
    ['(2, 3) was a mine.', ['2,3']],
    ['(2, 3) was a mine. safe: (1, 1), (1, 3).', ['2,3']],
    ['Mines at (1, 2) and (4,5); avoid them', ['1,2', '4,5']],
    ['(1, 1) and (2, 2) were mines', ['1,1', '2,2']],
    ['box (2, 3) stuck in a corner.', []],
    ['turns ran out.', []],
    ['the mine was at row 3, column 1', []],
  ])('minesNamed(%j)', (text, cells) => {
    expect([...minesNamed(text)].sort()).toEqual(cells);
  });
});

describe('summaries and the report', () => {
  const curve = (p1: number) => [{ iteration: 0, passAtK: { 1: p1, 2: p1, 3: p1 + 0.1 }, meanReturn: 1, entropy: 0.5, rolloutSeconds: 10, trainSeconds: 20, tokensTrained: 100 }];
  const arms: ArmResult[] = [
    { key: 'lamer', label: 'LaMer', evalMode: 'sessions', runs: [
      { seed: 0, sessions: [sess('t1', 2), sess('t2', 0)], curve: curve(0.2) },
      { seed: 1, sessions: [sess('t1', null), sess('t2', 1)], curve: curve(0.4) },
    ] },
    { key: 'gigpo', label: 'GiGPO', evalMode: 'retries', runs: [{ seed: 0, sessions: [sess('t1', null), sess('t2', 0)] }] },
  ];
  it('summarizeArm: mean +- std over seeds of pass@k and the gain', () => {
    const s = summarizeArm(arms[0]);
    // seed 0: pass@1 0.5, pass@3 1; seed 1: pass@1 0, pass@3 0.5
    expect(s.passAtK.map((m) => m.mean)).toEqual([0.25, 0.5, 0.75]);
    expect(s.passAtK[0].std).toBeCloseTo(Math.sqrt(0.125), 12);
    expect(s.gain).toEqual({ mean: 0.5, std: 0, n: 2 });
    expect(s.trainEntropy).toEqual({ mean: 0.5, std: 0, n: 2 });
  });
  it('the markdown has the arms, the paired interval and the curves', () => {
    const md = comparisonMarkdown(arms, [['lamer', 'gigpo']], { resamples: 2000 });
    expect(md).toContain('| LaMer | sessions | 2 | 25.0 ± 35.4 | 50.0 ± 0.0 | 75.0 ± 35.4 | 50.0 ± 0.0 |');
    // pass@3 per task: LaMer t1 0.5, t2 1; GiGPO t1 0, t2 1 -> diffs [0.5, 0]
    expect(md).toContain('| LaMer - GiGPO, pass@3 | 2 | 25.0 | [0.0, 50.0] |');
    expect(md).toContain('Per-iteration rollouts of LaMer (mean over 2 seeds)');
    expect(md).toContain('| 0 | 30.0 | 40.0 | 1.00 | 0.500 | 10 | 20 |');
  });
  it('replaceSection replaces between markers, or appends them', () => {
    const doc = 'a\n<!-- x:begin -->\nold\n<!-- x:end -->\nb\n';
    expect(replaceSection(doc, 'x', 'new\n')).toBe('a\n<!-- x:begin -->\nnew\n<!-- x:end -->\nb\n');
    expect(replaceSection('a\n', 'x', 'new\n')).toBe('a\n\n<!-- x:begin -->\nnew\n<!-- x:end -->\n');
  });
  it('hasSection: both markers, begin before end', () => {
    expect(hasSection('a\n<!-- x:begin -->\nold\n<!-- x:end -->\n', 'x')).toBe(true);
    expect(hasSection('a\n<!-- x:begin -->\nold\n<!-- x:end -->\n', 'y')).toBe(false);
    expect(hasSection('<!-- x:end -->\n<!-- x:begin -->\n', 'x')).toBe(false);
    expect(hasSection('<!-- x:begin -->\n', 'x')).toBe(false);
  });
});
