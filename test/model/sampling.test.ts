import { describe, expect, it } from 'vitest';
import { Rng, sampleIndex } from '../../src/model/sampling.js';

const P = (over: Partial<{ temperature: number; topP: number; topK: number }> = {}) => ({ temperature: 1, topP: 1, topK: 0, ...over });
const logp = [Math.log(0.5), Math.log(0.3), Math.log(0.15), Math.log(0.05)];

function histogram(params: ReturnType<typeof P>, n: number, seed = 1): number[] {
  const rng = new Rng(seed);
  const h = [0, 0, 0, 0];
  for (let i = 0; i < n; i++) h[sampleIndex(logp, params, rng)]++;
  return h;
}

describe('sampling', () => {
  it('Rng is reproducible for a seed and differs across seeds', () => {
    const a = new Rng(7), b = new Rng(7), c = new Rng(8);
    const xa = Array.from({ length: 5 }, () => a.next());
    expect(Array.from({ length: 5 }, () => b.next())).toEqual(xa);
    expect(Array.from({ length: 5 }, () => c.next())).not.toEqual(xa);
    expect(xa.every((x) => x >= 0 && x < 1)).toBe(true);
  });

  it('temperature 0 is argmax (first on ties)', () => {
    expect(sampleIndex([0.1, 2, 2, -1], P({ temperature: 0 }), new Rng(1))).toBe(1);
  });

  it('samples in proportion to the probabilities at temperature 1', () => {
    const h = histogram(P(), 20000);
    [0.5, 0.3, 0.15, 0.05].forEach((p, i) => expect(Math.abs(h[i] / 20000 - p)).toBeLessThan(0.015));
  });

  it('top-k keeps only the k most likely tokens', () => {
    const h = histogram(P({ topK: 2 }), 5000);
    expect(h[2] + h[3]).toBe(0);
    expect(Math.abs(h[0] / 5000 - 0.625)).toBeLessThan(0.03);
  });

  it('top-p keeps the smallest set reaching the mass', () => {
    expect(histogram(P({ topP: 0.5 }), 2000)).toEqual([2000, 0, 0, 0]);
    const h = histogram(P({ topP: 0.8 }), 2000);
    expect(h[2] + h[3]).toBe(0);
    expect(h[1]).toBeGreaterThan(0);
  });

  it('low temperature sharpens, and bad parameters throw', () => {
    const h = histogram(P({ temperature: 0.1 }), 2000);
    expect(h[0]).toBeGreaterThan(1950);
    expect(() => sampleIndex(logp, P({ temperature: -1 }), new Rng(1))).toThrow();
    expect(() => sampleIndex(logp, P({ topP: 0 }), new Rng(1))).toThrow();
    expect(() => sampleIndex(logp, P({ topK: -1 }), new Rng(1))).toThrow();
  });
});
