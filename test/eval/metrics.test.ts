import { describe, expect, it } from 'vitest';
import {
  empiricalEntropy,
  invalidActionRate,
  meanReturnByAttempt,
  summarize,
  trajectoryDiversity,
  type AttemptRecord,
  type SessionRecord,
} from '../../src/eval/metrics.js';

function att(attempt: number, success: boolean, ret: number, trajectory: string[] = [], invalid = 0): AttemptRecord {
  return { attempt, success, return: ret, actions: trajectory.length, invalidActions: invalid, endReason: success ? 'done' : 'max_steps', trajectory };
}

// Four sessions: solved at attempt 0, at attempt 1, at attempt 2, never.
const S: SessionRecord[] = [
  { taskId: 't0', trial: 0, attempts: [att(0, true, 10, ['a'])] },
  { taskId: 't1', trial: 0, attempts: [att(0, false, -1, ['a', 'b'], 1), att(1, true, 12, ['c'])] },
  { taskId: 't2', trial: 0, attempts: [att(0, false, 0, ['x']), att(1, false, 2, ['y']), att(2, true, 8, ['z', 'w'])] },
  { taskId: 't3', trial: 0, attempts: [att(0, false, -3, ['x'], 1), att(1, false, -1, ['x']), att(2, false, 1, ['q'])] },
];

describe('pass@k of played sessions (summarize, src/shared/passk.ts)', () => {
  it('pass@1..4 over four sessions', () => {
    expect(summarize(S, 4).passAtK).toEqual({ '1': 0.25, '2': 0.5, '3': 0.75, '4': 0.75 });
  });

  it('empty input', () => {
    expect(summarize([], 1).passAtK).toEqual({ '1': 0 });
  });

  it('an errored session counts as unsolved unless solved before the error', () => {
    const e: SessionRecord[] = [
      { taskId: 'a', trial: 0, attempts: [], error: 'HTTP 500' },
      { taskId: 'b', trial: 0, attempts: [att(0, true, 10)], error: 'late' },
    ];
    expect(summarize(e, 1).passAtK).toEqual({ '1': 0.5 });
  });
});

describe('mean return by attempt', () => {
  it('averages over the sessions that played each attempt', () => {
    expect(meanReturnByAttempt(S, 4)).toEqual([
      { attempt: 0, sessions: 4, meanReturn: (10 - 1 + 0 - 3) / 4, successRate: 0.25 },
      { attempt: 1, sessions: 3, meanReturn: (12 + 2 - 1) / 3, successRate: 1 / 3 },
      { attempt: 2, sessions: 2, meanReturn: 4.5, successRate: 0.5 },
      { attempt: 3, sessions: 0, meanReturn: null, successRate: null },
    ]);
  });
});

describe('invalid-action rate', () => {
  it('is rejected actions over all actions', () => {
    // actions: 1 + (2+1) + (1+1+2) + (1+1+1) = 11; invalid 2
    expect(invalidActionRate(S)).toBe(2 / 11);
    expect(invalidActionRate([])).toBe(0);
  });
});

describe('trajectory diversity', () => {
  it.each([
    [[], 0],
    [['a'], 0],
    [['a', 'a', 'a'], 0],
    [['a', 'b'], Math.log(2)],
    [['a', 'b', 'c'], Math.log(3)],
    [['a', 'a', 'b', 'b'], Math.log(2)],
    [['a', 'a', 'a', 'b'], -(0.75 * Math.log(0.75) + 0.25 * Math.log(0.25))],
  ])('entropy of %j = %f nats', (items, want) => {
    expect(empiricalEntropy(items)).toBeCloseTo(want, 12);
  });

  it('is the mean over tasks of the entropy of their trajectories, pooling trials of a task', () => {
    // t0: 1 trajectory -> 0; t1: 2 distinct -> ln 2; t2: 3 distinct -> ln 3; t3: x, x, q -> H(2/3, 1/3)
    const h3 = -((2 / 3) * Math.log(2 / 3) + (1 / 3) * Math.log(1 / 3));
    expect(trajectoryDiversity(S)).toBeCloseTo((0 + Math.log(2) + Math.log(3) + h3) / 4, 12);
    const pooled: SessionRecord[] = [
      { taskId: 'k', trial: 0, attempts: [att(0, true, 1, ['a'])] },
      { taskId: 'k', trial: 1, attempts: [att(0, true, 1, ['b'])] },
    ];
    expect(trajectoryDiversity(pooled)).toBeCloseTo(Math.log(2), 12);
  });

  it('summarize puts everything together', () => {
    const m = summarize(S, 3);
    expect(m.passAtK).toEqual({ '1': 0.25, '2': 0.5, '3': 0.75 });
    expect(m.sessions).toBe(4);
    expect(m.tasks).toBe(4);
    expect(m.errors).toBe(0);
    expect(m.meanActionsPerAttempt).toBe(11 / 9);
  });
});
