/**
 * The dashboard's pure readings (src/ui/figures.js, a browser module without DOM use): stats groups
 * side by side by memory with the gain over independent retries, an attempt's step cards with
 * the "(invalid)" tag on the card whose action the env rejected, and the promotion-gate history of
 * the model versions.
 */
import { describe, expect, it } from 'vitest';
import { actionsTaken, gateHistory, memoryComparison, memoryLabel, stepCards, type ModelLike } from '../../src/ui/figures.js';

const g = (modelVersion: string, env: string | null, mode: string, memory: string, passAtK: Record<string, number>) => ({ modelVersion, env, mode, memory, passAtK });

describe('memoryComparison', () => {
  it('puts the memory groups of one version, env and mode side by side, with pass@k minus independent retries', () => {
    const none = g('v1', 'minesweeper', 'eval', 'none', { '1': 0.4, '2': 0.5, '3': 0.6 });
    const refl = g('v1', 'minesweeper', 'eval', 'reflection_only', { '1': 0.4, '2': 0.65, '3': 0.75 });
    const alone = g('v1', 'sokoban', 'eval', 'reflection_only', { '1': 0.2 });
    const train = g('v1', 'minesweeper', 'train', 'reflection_only', { '1': 0.1 });
    const blocks = memoryComparison([none, refl, alone, train]);
    expect(blocks).toHaveLength(1);
    expect(blocks[0]).toMatchObject({ modelVersion: 'v1', env: 'minesweeper', mode: 'eval', K: 3 });
    expect(blocks[0]!.rows.map((r) => r.group)).toEqual([none, refl]);
    expect(blocks[0]!.rows[0]!.gain).toEqual([null, null, null]);
    const gain = blocks[0]!.rows[1]!.gain;
    expect(gain[0]).toBeCloseTo(0, 12);
    expect(gain[1]).toBeCloseTo(0.15, 12);
    expect(gain[2]).toBeCloseTo(0.15, 12);
  });

  it('gives null gains when a block has no independent-retries group', () => {
    const blocks = memoryComparison([g('v', null, 'train', 'reflection_only', { '1': 0.5, '2': 1 }), g('v', null, 'train', 'history_only', { '1': 0 })]);
    expect(blocks).toHaveLength(1);
    expect(blocks[0]!.K).toBe(2);
    expect(blocks[0]!.rows.map((r) => r.gain)).toEqual([[null, null], [null, null]]);
  });

  it('labels memories for people', () => {
    expect(memoryLabel('none')).toBe('independent retries (no memory)');
    expect(memoryLabel('reflection_only')).toBe('memory: reflections');
    expect(memoryLabel(undefined)).toBe('');
    expect(memoryLabel('future_mode')).toBe('future_mode');
  });
});

describe('stepCards', () => {
  it('tags the card of the rejected action, which the next row reports, and counts actions', () => {
    // step 1's action was rejected: the env said so with step 2's observation
    const rows = [
      { step: 2, action: 'c', invalidAction: true },
      { step: 0, action: 'a', invalidAction: false },
      { step: 1, action: 'b', invalidAction: false },
      { step: 3, action: null, invalidAction: false },
    ];
    const cards = stepCards(rows);
    expect(cards.map((c) => [c.step, c.invalid])).toEqual([[0, false], [1, true], [2, false], [3, false]]);
    expect(actionsTaken(rows)).toBe(3);
  });

  it('tags nothing on a final observation that reports a rejected last action, other than that action', () => {
    const cards = stepCards([
      { step: 0, action: 'a', invalidAction: false },
      { step: 1, action: null, invalidAction: true },
    ]);
    expect(cards.map((c) => c.invalid)).toEqual([true, false]);
  });
});

describe('gateHistory', () => {
  const gate = (metric: string, cand: Record<string, number> | null, inc: Record<string, number> | null, promoted: boolean, status = promoted ? 'passed' : 'failed', extra: Record<string, unknown> = {}) => ({
    env: 'minesweeper-6x6-3', tasks: 64, seedStart: 1e9, metric, margin: 0, decision: 'mean', status, progress: 1, incumbent: 'x', promoted, reason: 'r',
    candidatePassAtK: cand, incumbentPassAtK: inc, difference: cand && inc ? { mean: 0.1, lo: -0.05, hi: 0.2, tasks: 64 } : null, ...extra,
  });
  const m = (version: string, createdAt: string, g: ModelLike['gate'], status = 'candidate'): ModelLike => ({ version, status, createdAt, gate: g });

  it('lists gated versions oldest first with the metric of each gate, and the rise over the last promoted version on the same tasks', () => {
    const rows = gateHistory([
      m('v3', '2025-01-03T00:00:00Z', gate('pass@3', { '1': 0.2, '2': 0.4, '3': 0.45 }, { '1': 0.1, '2': 0.3, '3': 0.5 }, false)),
      m('base', '2025-01-01T00:00:00Z', null, 'retired'),
      m('v1', '2025-01-01T01:00:00Z', gate('pass@3', { '1': 0.1, '2': 0.2, '3': 0.3 }, { '1': 0, '2': 0, '3': 0.25 }, true)),
      m('v2', '2025-01-02T00:00:00Z', gate('pass@3', { '1': 0.2, '2': 0.4, '3': 0.5 }, { '1': 0.1, '2': 0.2, '3': 0.3 }, true), 'active'),
      m('v4', '2025-01-04T00:00:00Z', gate('pass@1', { '1': 0.3 }, { '1': 0.2 }, false)),
      m('v5', '2025-01-05T00:00:00Z', gate('pass@3', null, null, false, 'running', { progress: 0.25 })),
    ]);
    expect(rows.map((r) => r.version)).toEqual(['v1', 'v2', 'v3', 'v4', 'v5']);
    expect(rows.map((r) => [r.candidate, r.incumbent])).toEqual([[0.3, 0.25], [0.5, 0.3], [0.45, 0.5], [0.3, 0.2], [null, null]]);
    expect(rows[0]!.rise).toBeNull(); // no earlier promoted version
    expect(rows[1]!.rise).toBeCloseTo(0.2, 12); // over v1
    expect(rows[2]!.rise).toBeCloseTo(-0.05, 12); // over v2, the last promoted
    expect(rows[3]!.rise).toBeNull(); // another metric: not comparable
    expect(rows[4]).toMatchObject({ status: 'running', progress: 0.25, rise: null, k: 3, modelStatus: 'candidate' });
    expect(rows[1]).toMatchObject({ promoted: true, modelStatus: 'active', incumbentVersion: 'x', k: 3, difference: { mean: 0.1 } });
  });
});
