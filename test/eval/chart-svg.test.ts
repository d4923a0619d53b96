/** The learning-curve SVG: one polyline per series and panel, escaped labels. */
import { describe, expect, it } from 'vitest';
import { learningCurveSvg } from '../../src/eval/chart-svg.js';
import type { CurvePoint } from '../../src/eval/experiment.js';

describe('learningCurveSvg', () => {
  it('draws one polyline per series and panel, with the labels escaped', () => {
    const p = (i: number, p1: number, p3: number): CurvePoint => ({
      iteration: i, rolloutVersion: 'v', trainedVersion: 'w', jobId: 'j', jobStatus: 'succeeded', sessions: 4, meanReturn: i, meanReturnFirstAttempt: i,
      passAtK: { '1': p1, '2': p1, '3': p3 }, invalidActionRate: 0, loss: 1 / (i + 1), entropy: 1, clipFrac: 0, groups: 1, zeroAdvantageGroups: 0, samples: 3,
      tokensTrained: 10, rolloutSeconds: 1, trainSeconds: 1, wallSeconds: i, rolloutErrors: 0,
    });
    const svg = learningCurveSvg([{ label: 'a<b', points: [p(0, 0.1, 0.2), p(1, 0.2, 0.4)] }, { label: 'c', points: [p(0, 0.3, 0.3), p(1, 0.3, 0.5)] }], 'cap');
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.match(/<polyline/g)!.length).toBe(4 + 2 + 2);
    expect(svg).toContain('a&lt;b pass@3');
    expect(svg).not.toContain('a<b');
  });
});
