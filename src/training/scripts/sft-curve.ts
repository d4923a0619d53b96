/**
 * The learning curve of `npm run model:sft-base` (./sft-base.ts): one point per optimiser step,
 * written beside the checkpoint as learning-curve.json, and its chart (learning-curve.svg).
 * Units: nats per trained token, seconds since the job started, tokens = non-padding positions.
 */
import { chartPanel, svgDocument, type Series } from '../../eval/chart-svg.js';

/** One point of the learning curve: after optimiser step `step` (1-based). */
export interface CurvePoint {
  step: number;
  /** Non-padding tokens trained on so far. */
  tokens: number;
  /** Seconds since the job started (loading included). */
  seconds: number;
  loss: number;
  /** Learning rate of this step (the schedule's value). */
  lr: number;
}

/** The learning curve as SVG: per-step loss with its 20-step moving mean, and tokens/s. */
export function sftCurveSvg(points: readonly CurvePoint[], caption?: string): string {
  const movingMean = (k: number): Array<[number, number]> => points.map((p, i) => {
    const w = points.slice(Math.max(0, i - k + 1), i + 1);
    return [p.step, w.reduce((a, q) => a + q.loss, 0) / w.length];
  });
  const loss: Series[] = [
    { label: 'loss (step)', color: '#9ecae1', points: points.map((p) => [p.step, p.loss]) },
    { label: 'loss (20-step mean)', color: '#1f77b4', points: movingMean(20) },
  ];
  const speed: Series[] = [{
    label: 'tokens/s (since start)', color: '#d62728',
    points: points.map((p) => [p.step, p.seconds > 0 ? p.tokens / p.seconds : null]),
  }];
  return svgDocument([
    (x, y, w, h) => chartPanel('SFT training loss (nats/token)', 'optimiser step', loss, x, y, w, h),
    (x, y, w, h) => chartPanel('throughput', 'optimiser step', speed, x, y, w, h),
  ], 420, 280, caption);
}
