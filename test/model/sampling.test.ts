import { describe, expect, it } from 'vitest';
import { sampleIndex } from '../../src/model/sampling.js';
import { Rng } from '../../src/shared/rng.js';

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

describe('per-call streams, the sampling distribution and candidate supports', () => {
  it('callSeed gives every (seed, attempt, step, kind) its own stream, reproducibly', async () => {
    const { callSeed } = await import('../../src/model/sampling.js');
    const seeds = new Set<number>();
    for (const kind of ['act', 'reflect'] as const) for (let a = 0; a < 3; a++) for (let t = 0; t < 30; t++) seeds.add(callSeed(11, a, t, kind));
    expect(seeds.size).toBe(180);
    expect(callSeed(11, 1, 2, 'act')).toBe(callSeed(11, 1, 2, 'act'));
    expect(callSeed(11, 0, 0, 'act')).not.toBe(callSeed(11 + 2 ** 32, 0, 0, 'act'));
    // the first draws of consecutive steps are spread like independent uniforms: 200 steps,
    // 2 equiprobable actions -> Binomial(200, 0.5) lies in [70, 130] with probability > 0.9999
    const { drawIndex } = await import('../../src/model/sampling.js');
    let firsts = 0;
    for (let t = 0; t < 200; t++) firsts += drawIndex([Math.log(0.5), Math.log(0.5)], 1, new Rng(callSeed(11, 0, t, 'act'))) === 0 ? 1 : 0;
    expect(firsts).toBeGreaterThanOrEqual(70);
    expect(firsts).toBeLessThanOrEqual(130);
  });

  it('samplingLogprobs: temperature, allowed set, top-k, top-p (hand-computed)', async () => {
    const { samplingLogprobs } = await import('../../src/model/sampling.js');
    const s = [Math.log(0.5), Math.log(0.3), Math.log(0.15), Math.log(0.05)];
    const exp = (xs: Float64Array) => Array.from(xs, (x) => Math.exp(x));
    const close = (got: number[], want: number[]) => want.forEach((w, i) => expect(got[i]).toBeCloseTo(w, 10));
    close(exp(samplingLogprobs(s, { temperature: 1, topP: 1, topK: 0 })), [0.5, 0.3, 0.15, 0.05]);
    // T = 0.5: p ∝ p^2 = .25, .09, .0225, .0025 (sum .365)
    close(exp(samplingLogprobs(s, { temperature: 0.5, topP: 1, topK: 0 })), [0.25 / 0.365, 0.09 / 0.365, 0.0225 / 0.365, 0.0025 / 0.365]);
    close(exp(samplingLogprobs(s, { temperature: 1, topP: 1, topK: 2 })), [0.625, 0.375, 0, 0]);
    close(exp(samplingLogprobs(s, { temperature: 1, topP: 0.8, topK: 0 })), [0.625, 0.375, 0, 0]); // .5 + .3 reaches .8
    close(exp(samplingLogprobs(s, { temperature: 1, topP: 0.81, topK: 0 })), [0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0]);
    close(exp(samplingLogprobs(s, { temperature: 1, topP: 1, topK: 0 }, [1, 3])), [0, 0.3 / 0.35, 0, 0.05 / 0.35]);
    close(exp(samplingLogprobs(s, { temperature: 1, topP: 0.5, topK: 0 }, [1, 3])), [0, 1, 0, 0]); // top-p within the allowed set
    expect(() => samplingLogprobs(s, { temperature: 1, topP: 1, topK: 0 }, [])).toThrow(/empty/);
  });

  it('candidateSupport walks the trie of the candidates along the output', async () => {
    const { candidateSupport } = await import('../../src/model/sampling.js');
    const c = [[1, 2, 9], [1, 3, 9], [4, 9], [1, 2, 5, 9]];
    expect(candidateSupport(c, [1, 2, 9])).toEqual([[1, 4], [2, 3], [5, 9]]);
    expect(candidateSupport(c, [4, 9])).toEqual([[1, 4], [9]]);
  });
});
