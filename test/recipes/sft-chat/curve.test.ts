/** The learning curve of model:sft-base: going on from a start checkpoint's curve. */
import { describe, expect, it } from 'vitest';
import { checkCurvePoints, continueCurve, type CurvePoint } from '../../../src/recipes/sft-chat/curve.js';

const pt = (step: number, tokens: number, seconds: number, loss = 1, lr = 1e-3): CurvePoint => ({ step, tokens, seconds, loss, lr });

describe('continueCurve', () => {
  it('counts step, tokens and seconds on from the start checkpoint\'s last point; loss and lr as measured', () => {
    const parent = [pt(1, 100, 2.5, 3), pt(2, 250, 5.25, 2)];
    const run = [pt(1, 120, 1.5, 0.9, 5e-4), pt(2, 260, 3.125, 0.8, 4e-4)];
    expect(continueCurve(parent, run)).toEqual([
      pt(1, 100, 2.5, 3), pt(2, 250, 5.25, 2),
      pt(3, 370, 6.75, 0.9, 5e-4), pt(4, 510, 8.375, 0.8, 4e-4),
    ]);
  });

  it('a start checkpoint without a curve leaves the run\'s points as they are', () => {
    const run = [pt(1, 10, 1), pt(2, 20, 2)];
    expect(continueCurve([], run)).toEqual(run);
  });

  it('refuses a start curve whose steps are not 1, 2, ... in order', () => {
    expect(() => continueCurve([pt(1, 1, 1), pt(3, 2, 2)], [pt(1, 1, 1)])).toThrow(new RangeError("the start checkpoint's learning curve has step 3 at position 2"));
    expect(() => checkCurvePoints([pt(1, 1, 1), { step: 2, tokens: 2 }])).toThrow(new RangeError("the start checkpoint's learning curve has no numeric step, tokens, seconds, loss and lr at position 2"));
    expect(() => checkCurvePoints('garbage')).toThrow(new RangeError("a learning curve's points must be an array"));
    expect(checkCurvePoints([pt(1, 1, 1)])).toEqual([pt(1, 1, 1)]);
  });
});
