import { describe, expect, it } from 'vitest';
import { learningRateAt, validateLrSchedule, type LrScheduleSpec } from '../../../src/training/maths/lr-schedule.js';

const cosine = (over: Partial<LrScheduleSpec> = {}): LrScheduleSpec => ({ lr: 1e-3, schedule: 'cosine', warmupSteps: 2, minLrRatio: 0.1, ...over });

describe('learningRateAt', () => {
  // hand-computed: warm-up lr (k+1)/2; then p = (k-2)/3, lr_min + 0.9e-3 (1 + cos(pi p)) / 2 with lr_min = 1e-4
  it.each([
    [0, 5e-4], [1, 1e-3], [2, 1e-3], [3, 7.75e-4], [4, 3.25e-4], [5, 1e-4],
  ])('cosine, warm-up 2, 6 steps: step %i -> %f', (step, want) => {
    expect(learningRateAt(cosine(), step, 6)).toBeCloseTo(want, 12);
  });

  it('cosine without warm-up starts at lr and ends at lr x minLrRatio', () => {
    const s = cosine({ warmupSteps: 0, minLrRatio: 0 });
    expect(learningRateAt(s, 0, 5)).toBe(1e-3);
    expect(learningRateAt(s, 2, 5)).toBeCloseTo(5e-4, 15); // p = 1/2: (1 + cos(pi/2)) / 2 = 1/2
    expect(learningRateAt(s, 4, 5)).toBeCloseTo(0, 15);
  });

  it('a one-step job trains at lr x minLrRatio (the decay is over at its last step)', () => {
    expect(learningRateAt(cosine({ warmupSteps: 0 }), 0, 1)).toBeCloseTo(1e-4, 15);
  });

  it('constant ignores warm-up and ratio', () => {
    const s = cosine({ schedule: 'constant' });
    expect([0, 1, 5, 99].map((k) => learningRateAt(s, k, 100))).toEqual([1e-3, 1e-3, 1e-3, 1e-3]);
  });

  it('never rises after the warm-up', () => {
    const lrs = Array.from({ length: 50 }, (_, k) => learningRateAt(cosine({ warmupSteps: 5 }), k, 50));
    for (let k = 5; k < 49; k++) expect(lrs[k + 1]!).toBeLessThanOrEqual(lrs[k]!);
  });
});

describe('validateLrSchedule', () => {
  it.each([
    [cosine({ schedule: 'linear' as never }), 10, /lrSchedule must be one of constant, cosine, got "linear"/],
    [cosine({ lr: -1 }), 10, /lr must be >= 0, got -1/],
    [cosine({ warmupSteps: 10 }), 10, /warmupSteps \(10\) must be below the job's 10 optimiser steps/],
    [cosine({ warmupSteps: 1.5 }), 10, /warmupSteps must be an integer >= 0/],
    [cosine({ minLrRatio: 1.5 }), 10, /minLrRatio must be in \[0, 1\]/],
    [cosine(), 0, /the job must have >= 1 optimiser step/],
  ])('refuses %j over %i steps', (s, total, msg) => {
    expect(() => validateLrSchedule(s, total)).toThrow(msg);
  });

  it('accepts a constant schedule whatever its warm-up', () => {
    expect(() => validateLrSchedule(cosine({ schedule: 'constant', warmupSteps: 50 }), 10)).not.toThrow();
  });
});
