/**
 * The paired percentile bootstrap over tasks and its quantile rule: what the comparisons of
 * src/eval/compare.ts and the promotion gate (src/training/run/gate.ts) share.
 */
import { Rng } from './rng.js';

/**
 * The q-quantile of ascending `sorted` values by linear interpolation between order statistics
 * (Hyndman & Fan type 7, numpy's default): h = (n - 1) q, x[floor h] + (h - floor h)(x[ceil h] - x[floor h]).
 * @throws RangeError for an empty array or q outside [0, 1].
 */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) throw new RangeError('quantile of no values');
  if (!(q >= 0 && q <= 1)) throw new RangeError(`q must be in [0, 1], got ${q}`);
  const h = (sorted.length - 1) * q;
  const lo = Math.floor(h);
  const hi = Math.ceil(h);
  return sorted[lo] + (h - lo) * (sorted[hi] - sorted[lo]);
}

export interface BootstrapInterval {
  /** Mean of the per-task differences (the point estimate). */
  mean: number;
  lo: number;
  hi: number;
  level: number;
  resamples: number;
  tasks: number;
}

/**
 * Paired percentile bootstrap over tasks (Efron & Tibshirani 1993, ch. 13): the data are one
 * difference per task, d_i = a_i - b_i for two methods on the same task i. Each resample draws n
 * tasks with replacement and takes the mean difference; the interval is the (1-level)/2 and
 * (1+level)/2 quantiles (type 7) of the resampled means. Deterministic for a given `seed`.
 * @throws RangeError for no tasks, a level outside (0, 1) or fewer than 1 resample.
 */
export function pairedBootstrap(
  diffs: readonly number[], opts: { resamples?: number; level?: number; seed?: number } = {},
): BootstrapInterval {
  const B = opts.resamples ?? 10_000;
  const level = opts.level ?? 0.95;
  const n = diffs.length;
  if (n === 0) throw new RangeError('bootstrap of no tasks');
  if (!(level > 0 && level < 1)) throw new RangeError(`level must be in (0, 1), got ${level}`);
  if (!(Number.isInteger(B) && B >= 1)) throw new RangeError(`resamples must be an integer >= 1, got ${B}`);
  const rng = new Rng(opts.seed ?? 12345);
  const means = new Float64Array(B);
  for (let b = 0; b < B; b++) {
    let s = 0;
    for (let i = 0; i < n; i++) s += diffs[Math.floor(rng.next() * n)];
    means[b] = s / n; // mean of one resample of the tasks
  }
  means.sort();
  const sorted = Array.from(means);
  return {
    mean: diffs.reduce((a, b) => a + b, 0) / n,
    lo: quantile(sorted, (1 - level) / 2),
    hi: quantile(sorted, (1 + level) / 2),
    level, resamples: B, tasks: n,
  };
}

