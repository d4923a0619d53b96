/**
 * The promotion gate's figures and decision (src/training/run/gate.ts gateFigures): pass@k per
 * version, the paired difference over the tasks both played with its bootstrap interval, the
 * `mean` and `lower-bound` decisions against the margin, and the cases that are not judged.
 */
import { describe, expect, it } from 'vitest';
import { pairedBootstrap } from '../../../src/shared/bootstrap.js';
import { resolveGate } from '../../../src/shared/promotion-gate.js';
import { gateFigures, pendingReport, type GateTaskOutcome } from '../../../src/training/run/gate.js';

const tasks = (firsts: number[], prefix = 'minesweeper-6x6-3:seed='): GateTaskOutcome[] => firsts.map((f, i) => ({ taskId: `${prefix}${1e9 + i}`, firstSuccess: f }));

describe('gateFigures', () => {
  // candidate solves tasks 0, 1 (at attempt 1), 2; incumbent solves task 0 and task 3 (at attempt 2)
  const candidate = tasks([0, 1, 0, -1]);
  const incumbent = tasks([0, -1, -1, 2]);

  it('gives pass@1..K per version and the paired difference of the metric with its bootstrap interval', () => {
    const spec = resolveGate({ env: 'minesweeper', tasks: 4, attempts: 3, metric: 'pass@2' });
    const f = gateFigures(spec, { candidate, incumbent });
    expect(f.candidatePassAtK).toEqual({ '1': 0.5, '2': 0.75, '3': 0.75 });
    expect(f.incumbentPassAtK).toEqual({ '1': 0.25, '2': 0.25, '3': 0.5 });
    // pass@2 per task: candidate 1 1 1 0, incumbent 1 0 0 0
    expect(f.difference).toEqual(pairedBootstrap([0, 1, 1, 0], { resamples: 10_000, level: 0.95 }));
    expect(f.difference!.mean).toBeCloseTo(0.5, 12);
    expect(f.status).toBe('passed');
    expect(f.reason).toBe(`pass@2 new - active +50.0 points, 95% interval [${sign(f.difference!.lo)}, ${sign(f.difference!.hi)}] over 4 tasks: the mean beats the margin +0.0`);
    expect(f.sessionErrors).toEqual({ candidate: 0, incumbent: 0 });
  });

  it('compares the mean, or the lower bound, with the margin (strictly)', () => {
    const at = (margin: number, decision: 'mean' | 'lower-bound') => gateFigures(resolveGate({ env: 'minesweeper', tasks: 4, attempts: 3, metric: 'pass@3', margin, decision }), { candidate, incumbent });
    // pass@3: candidate 1 1 1 0, incumbent 1 0 0 1: differences 0 1 1 -1, mean 0.25
    expect(at(0.2, 'mean').status).toBe('passed');
    expect(at(0.25, 'mean').status).toBe('failed');
    expect(at(0.2, 'lower-bound').status).toBe('failed');
    expect(at(-1, 'lower-bound').status).toBe('passed');
    expect(at(1, 'mean').reason).toMatch(/the mean does not beat the margin \+100\.0$/);
  });

  it('pairs by task id: tasks only one version played are left out', () => {
    const spec = resolveGate({ env: 'minesweeper', tasks: 4, attempts: 1 });
    const f = gateFigures(spec, { candidate: tasks([0, 0, 0]), incumbent: tasks([-1, 0]) });
    expect(f.difference).toMatchObject({ tasks: 2, mean: 0.5 });
  });

  it('is an error, not a decision, when a session failed or no task was played by both', () => {
    const spec = resolveGate({ env: 'minesweeper', tasks: 2, attempts: 1, margin: -1 });
    const broken = [{ taskId: 'minesweeper-6x6-3:seed=1000000000', firstSuccess: -1, error: 'HTTP 503 overloaded' }, ...tasks([0]).map((t) => ({ ...t, taskId: 'minesweeper-6x6-3:seed=1000000001' }))];
    const f = gateFigures(spec, { candidate: broken, incumbent: tasks([0, 0]) });
    expect(f.status).toBe('error');
    expect(f.sessionErrors).toEqual({ candidate: 1, incumbent: 0 });
    expect(f.reason).toBe('1 gate session(s) ended with an error (first: minesweeper-6x6-3:seed=1000000000: HTTP 503 overloaded); the versions were not compared');
    const apart = gateFigures(spec, { candidate: tasks([0], 'a:seed='), incumbent: tasks([0], 'b:seed=') });
    expect(apart).toMatchObject({ status: 'error', difference: null, reason: 'no task was played by both versions' });
  });

  it('throws for a metric that is not pass@k', () => {
    expect(() => gateFigures({ ...resolveGate({ env: 'minesweeper', tasks: 1 }), metric: 'return' }, { candidate: [], incumbent: [] })).toThrow(RangeError);
  });
});

describe('pendingReport', () => {
  it('is the gate as configured, not started, not promoted', () => {
    const spec = resolveGate({ env: 'sokoban', tasks: 8 });
    expect(pendingReport(spec)).toEqual({
      ...spec, status: 'pending', progress: 0, candidate: null, incumbent: null, candidatePassAtK: null, incumbentPassAtK: null,
      difference: null, sessionErrors: null, promoted: false, reason: null, startedAt: null, finishedAt: null,
    });
  });
});

function sign(x: number): string {
  return `${x >= 0 ? '+' : ''}${(100 * x).toFixed(1)}`;
}
