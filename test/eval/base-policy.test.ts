import { describe, expect, it } from 'vitest';
import { generateDemos } from '../../src/envs/demos.js';
import { basePolicyMarkdown, rowDifference, rowSummary } from '../../src/eval/base-policy.js';
import { canonicalAction } from '../../src/eval/harness.js';
import type { AttemptRecord, SessionRecord } from '../../src/eval/metrics.js';

const att = (attempt: number, success: boolean, trajectory: string[], o: { reflection?: string; invalid?: number; endReason?: 'done' | 'max_steps' } = {}): AttemptRecord => ({
  attempt, success, return: success ? 1 : 0, actions: trajectory.length, invalidActions: o.invalid ?? 0, endReason: o.endReason ?? 'done', trajectory,
  ...(o.reflection !== undefined ? { reflection: o.reflection } : {}),
});

// MineSweeper, row (a): three tasks
const ms: SessionRecord[] = [
  { taskId: 'minesweeper-6x6-3:seed=2', trial: 0, attempts: [
    att(0, false, ['(1, 1)', '(2, 3)'], { reflection: 'Attempt 1 failed: (2,3) was a mine. Known mines: (2, 3).' }), // names the mine (any spacing)
    att(1, true, ['(1, 1)', '(4, 4)']),
  ] },
  { taskId: 'minesweeper-6x6-3:seed=1', trial: 0, attempts: [
    att(0, false, ['(5, 5)'], { reflection: 'Avoid (1, 1).' }), // wrong cell
    att(1, false, ['(6, 2)'], { reflection: 'Avoid (1, 1).' }), // wrong cell, and verbatim the previous one
    att(2, false, ['invalid', '(3, 3)'], { invalid: 1, endReason: 'max_steps' }), // turn cap: not a losing action
  ] },
  { taskId: 'minesweeper-6x6-3:seed=3', trial: 0, attempts: [att(0, true, ['(2, 2)'])] },
];

describe('rowSummary', () => {
  it('pass@k, invalid actions, reflections naming the mine that ended the attempt and verbatim repeats, exactly', () => {
    const r = rowSummary('lamer', { env: 'minesweeper-6x6-3', attempts: 3, sessions: ms });
    expect(r).toEqual({
      row: 'lamer', env: 'minesweeper-6x6-3', tasks: 3, sessions: 3, errors: 0,
      passAtK: { 1: 1 / 3, 2: 2 / 3, 3: 2 / 3 },
      invalidActionRate: 1 / 9, // 9 actions, 1 rejected
      meanActionsPerAttempt: 9 / 6,
      // 3 reflections, all after a mine; 1 names it; of the 1 that had a previous one, 1 repeats it
      // clicks under a memory naming a mine: seed=2's second attempt, (1, 1) and (4, 4), neither (2, 3)
      reflections: { reflections: 3, afterLosingAction: 3, namesEndingCell: 1 / 3, repeatsPrevious: 1, sharedAcrossTasks: 0, clicksWithNamedMines: 2, clicksOnNamedMine: 0 },
      namesBoxCell: null,
      firstSuccess: [['minesweeper-6x6-3:seed=1', -1], ['minesweeper-6x6-3:seed=2', 1], ['minesweeper-6x6-3:seed=3', 0]],
    });
  });

  it('Sokoban: no mine cell to name (null), repeats counted, the share of reflections naming a box cell', () => {
    const sk: SessionRecord[] = [{ taskId: 'sokoban-6x6-2:seed=1', trial: 0, attempts: [
      att(0, false, ['up,left'], { reflection: 'Box stuck in a corner.', endReason: 'max_steps' }),
      att(1, false, ['down'], { reflection: 'box (2, 3) stuck in a corner.' }),
      att(2, false, ['right']),
    ] }];
    const r = rowSummary('lamer', { env: 'sokoban-6x6-2', attempts: 3, sessions: sk });
    expect(r.reflections)
      .toEqual({ reflections: 2, afterLosingAction: 0, namesEndingCell: null, repeatsPrevious: 0, sharedAcrossTasks: 0, clicksWithNamedMines: 0, clicksOnNamedMine: null });
    expect(r.namesBoxCell).toBe(1 / 2);
    expect(rowSummary('lamer', { env: 'sokoban-6x6-2', attempts: 3, sessions: [{ taskId: 't', trial: 0, attempts: [att(0, true, ['up'])] }] }).namesBoxCell).toBeNull();
  });
});

describe('the demonstrations the base is trained on', () => {
  it('every MineSweeper demo reflection after a mine names that cell (the SFT target scores 100% here)', () => {
    const demos = generateDemos({ env: 'minesweeper', params: { rows: 6, cols: 6, mines: 3 }, tasks: 12, seed: 0, failRate: 1 });
    const sessions: SessionRecord[] = demos.map((d) => ({
      taskId: d.taskId, trial: 0,
      attempts: d.attempts.map((a, n) => {
        const last = a.steps[a.steps.length - 1]!;
        const actions = a.steps.flatMap((x) => (x.action === null ? [] : [canonicalAction('minesweeper', x.action)]));
        return att(n, last.success, actions, { endReason: last.done ? 'done' : 'max_steps', ...(a.reflection !== null ? { reflection: a.reflection } : {}) });
      }),
    }));
    const r = rowSummary('lamer', { env: 'minesweeper-6x6-3', attempts: 3, sessions }).reflections;
    expect(r.afterLosingAction).toBeGreaterThan(0);
    expect(r.namesEndingCell).toBe(1);
  });
});

describe('rowDifference and the markdown', () => {
  const indep: SessionRecord[] = [
    { taskId: 'minesweeper-6x6-3:seed=1', trial: 0, attempts: [att(0, false, ['(1, 1)']), att(1, false, ['(1, 1)']), att(2, false, ['(1, 1)'])] },
    { taskId: 'minesweeper-6x6-3:seed=2', trial: 0, attempts: [att(0, false, ['(1, 1)']), att(1, false, ['(1, 1)']), att(2, false, ['(1, 1)'])] },
    { taskId: 'minesweeper-6x6-3:seed=3', trial: 0, attempts: [att(0, true, ['(2, 2)'])] },
  ];

  it('pairs the tasks: pass@3 differences [0, 1, 0] -> mean 1/3, interval [0, 1]', () => {
    const ci = rowDifference(ms, indep, 3, 20_000)!;
    expect(ci.mean).toBeCloseTo(1 / 3, 12);
    expect([ci.lo, ci.hi, ci.tasks]).toEqual([0, 1, 3]);
    expect(rowDifference(ms, [], 3)).toBeNull();
  });

  it('prints one line per row (percent) and the (a) - (c) interval in points', () => {
    const a = rowSummary('lamer', { env: 'minesweeper-6x6-3', attempts: 3, sessions: ms });
    const c = rowSummary('independent', { env: 'minesweeper-6x6-3', attempts: 3, sessions: indep });
    const md = basePolicyMarkdown([{ env: 'minesweeper-6x6-3', rows: [a, c], lamerMinusIndependent: { mean: 1 / 3, lo: 0, hi: 1, level: 0.95, resamples: 100, tasks: 3 } }], 3);
    expect(md.split('\n')).toEqual([
      '| game | row | tasks | pass@1 (%) | pass@2 (%) | pass@3 (%) | invalid actions (%) | reflections | names the ending cell (%) | names a box cell (%) | clicks on a mine the memory names (%) | repeats the previous reflection (%) |',
      '|---|---|---|---|---|---|---|---|---|---|---|---|',
      '| minesweeper-6x6-3 | (a) LaMer session, reflections, no availableActions | 3 | 33.3 | 66.7 | 66.7 | 11.1 | 3 | 33.3 | - | 0.0 | 100.0 |',
      '| minesweeper-6x6-3 | (c) independent retries, no memory | 3 | 33.3 | 33.3 | 33.3 | 0.0 | - | - | - | - | - |',
      '',
      '- minesweeper-6x6-3: pass@3 (a) - (c) = 33.3 pts, 95% paired bootstrap interval [0.0, 100.0] over 3 tasks (100 resamples).',
      '',
    ]);
  });

  it('adds a held-out loss table for the games that have one (nats per token, 3 decimals; - without tokens)', () => {
    const a = rowSummary('lamer', { env: 'minesweeper-6x6-3', attempts: 3, sessions: ms });
    const loss = (reflection: number | null) => ({
      sessions: 32, seed: 0, samples: { action: 40, reflection: reflection === null ? 0 : 30 },
      action: { natsPerToken: 0.31249, tokens: 5000 }, reflection: { natsPerToken: reflection, tokens: reflection === null ? 0 : 4096 },
    });
    const md = basePolicyMarkdown([
      { env: 'minesweeper-6x6-3', rows: [a], lamerMinusIndependent: null, heldOutLoss: loss(1.5126) },
      { env: 'sokoban-6x6-2', rows: [], lamerMinusIndependent: null, heldOutLoss: loss(null) },
      { env: 'minesweeper-5x5-2', rows: [], lamerMinusIndependent: null, heldOutLoss: null },
    ], 3);
    expect(md.split('\n').slice(3)).toEqual([
      '',
      '| game | held-out demonstration sessions | reflection loss (nats/token) | reflection tokens | action loss (nats/token) | action tokens |',
      '|---|---|---|---|---|---|',
      '| minesweeper-6x6-3 | 32 | 1.513 | 4096 | 0.312 | 5000 |',
      '| sokoban-6x6-2 | 32 | - | 0 | 0.312 | 5000 |',
      '',
    ]);
  });
});
