/**
 * The learning curve of `npm run model:sft-chat` (./sft-chat.ts): one point per optimiser step,
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

/**
 * `points` as the points of a learning curve that another one can continue: objects with numeric
 * step, tokens, seconds, loss and lr, the steps 1, 2, ... in order.
 * @throws RangeError naming the first point that is not.
 */
export function checkCurvePoints(points: unknown): CurvePoint[] {
  if (!Array.isArray(points)) throw new RangeError('a learning curve\'s points must be an array');
  points.forEach((p: unknown, i) => {
    const q = p as Record<string, unknown> | null;
    if (q === null || typeof q !== 'object' || !['step', 'tokens', 'seconds', 'loss', 'lr'].every((k) => typeof q[k] === 'number')) {
      throw new RangeError(`the start checkpoint's learning curve has no numeric step, tokens, seconds, loss and lr at position ${i + 1}`);
    }
    if (q.step !== i + 1) throw new RangeError(`the start checkpoint's learning curve has step ${q.step} at position ${i + 1}`);
  });
  return points as CurvePoint[];
}

/**
 * The learning curve of a checkpoint trained on from another one (`model:sft-chat --from`): the
 * start checkpoint's points, then this run's with step, tokens and seconds counted on from its
 * last point, so the curve and its last point describe all the training the checkpoint has had
 * (seconds: the runs' wall times added, not the time between them). `parent` empty: `points`
 * unchanged.
 * @throws RangeError when `parent` is not a curve to continue (`checkCurvePoints`).
 */
export function continueCurve(parent: readonly CurvePoint[], points: readonly CurvePoint[]): CurvePoint[] {
  checkCurvePoints(parent);
  const last = parent.at(-1);
  if (!last) return [...points];
  return [...parent, ...points.map((p) => ({ ...p, step: last.step + p.step, tokens: last.tokens + p.tokens, seconds: Number((last.seconds + p.seconds).toFixed(3)) }))];
}
