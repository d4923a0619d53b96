/**
 * Learning-rate schedules of a training job: the learning rate of each optimiser step.
 *
 * - 'constant': `lr` at every step.
 * - 'cosine': linear warm-up over the first `warmupSteps` steps (step k, 0-based, uses
 *   lr (k + 1) / warmupSteps), then cosine decay from `lr` at step `warmupSteps` to
 *   `lr x minLrRatio` at the last step `totalSteps - 1`:
 *     p = (k - warmupSteps) / (totalSteps - 1 - warmupSteps)
 *     lr_k = lr_min + (lr - lr_min) (1 + cos(pi p)) / 2
 *   (the schedule of nanoGPT's train.py `get_lr` and of SGDR, Loshchilov & Hutter 2017, without
 *   restarts; there the decay ends at lr_min as well).
 * Units: learning rates as AdamW takes them; steps are optimiser steps (minibatches), 0-based.
 */
import { LR_SCHEDULES, type LrSchedule } from '../../domain.js';

export interface LrScheduleSpec {
  /** Peak learning rate (>= 0). */
  lr: number;
  schedule: LrSchedule;
  /** Steps of linear warm-up ('cosine' only; 0 = none). */
  warmupSteps: number;
  /** lr_min / lr at the last step ('cosine' only), in [0, 1]. */
  minLrRatio: number;
}

/**
 * Check a schedule against the job's number of steps.
 * @throws RangeError naming the field: unknown schedule, lr < 0, warmupSteps not an integer in
 *   [0, totalSteps), minLrRatio outside [0, 1], totalSteps not a positive integer.
 */
export function validateLrSchedule(s: LrScheduleSpec, totalSteps: number): void {
  if (!LR_SCHEDULES.includes(s.schedule)) throw new RangeError(`lrSchedule must be one of ${LR_SCHEDULES.join(', ')}, got ${JSON.stringify(s.schedule)}`);
  if (!(s.lr >= 0)) throw new RangeError(`lr must be >= 0, got ${s.lr}`);
  if (!(Number.isInteger(totalSteps) && totalSteps >= 1)) throw new RangeError(`the job must have >= 1 optimiser step, got ${totalSteps}`);
  if (!(Number.isInteger(s.warmupSteps) && s.warmupSteps >= 0)) throw new RangeError(`warmupSteps must be an integer >= 0, got ${s.warmupSteps}`);
  if (s.schedule === 'cosine' && s.warmupSteps >= totalSteps) throw new RangeError(`warmupSteps (${s.warmupSteps}) must be below the job's ${totalSteps} optimiser steps`);
  if (!(s.minLrRatio >= 0 && s.minLrRatio <= 1)) throw new RangeError(`minLrRatio must be in [0, 1], got ${s.minLrRatio}`);
}

/**
 * The learning rate of optimiser step `step` (0-based) of `totalSteps` (formula in the module
 * docstring). Assumes `validateLrSchedule(s, totalSteps)` passed.
 */
export function learningRateAt(s: LrScheduleSpec, step: number, totalSteps: number): number {
  if (s.schedule === 'constant') return s.lr;
  if (step < s.warmupSteps) return (s.lr * (step + 1)) / s.warmupSteps;
  const span = totalSteps - 1 - s.warmupSteps;
  const p = span <= 0 ? 1 : Math.min(1, (step - s.warmupSteps) / span);
  const lrMin = s.lr * s.minLrRatio;
  return lrMin + ((s.lr - lrMin) * (1 + Math.cos(Math.PI * p))) / 2;
}
