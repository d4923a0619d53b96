/**
 * Exact sums of doubles (src/shared/exact-sum.ts): the rounded sum is the exact sum rounded once to
 * the nearest double (checked against a BigInt reference), whatever the order of the values, the
 * merging of partial sums and the subtraction of values added before.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { addExact, exactSum, mergeExact, roundSum } from '../../src/shared/exact-sum.js';

/** A finite double as an exact BigInt multiple of 2^-1074. */
function scaled(x: number): bigint {
  const v = new DataView(new ArrayBuffer(8));
  v.setFloat64(0, x);
  const bits = v.getBigUint64(0);
  const sign = bits >> 63n ? -1n : 1n;
  const exp = Number((bits >> 52n) & 0x7ffn);
  const frac = bits & ((1n << 52n) - 1n);
  const mant = exp === 0 ? frac : frac | (1n << 52n);
  return sign * (mant << BigInt(Math.max(exp - 1, 0)));
}

/** The exact sum of `xs` rounded to the nearest double, ties to even (reference through BigInt). */
function reference(xs: number[]): number {
  const total = xs.reduce((s, x) => s + scaled(x), 0n);
  const neg = total < 0n;
  const m = neg ? -total : total;
  if (m === 0n) return 0;
  // value = m * 2^-1074; keep 53 significant bits, round half to even on the rest
  const bitsLen = m.toString(2).length;
  let shift = Math.max(0, bitsLen - 53);
  let q = m >> BigInt(shift);
  const rest = m - (q << BigInt(shift));
  const half = shift === 0 ? 0n : 1n << BigInt(shift - 1);
  if (shift > 0 && (rest > half || (rest === half && (q & 1n) === 1n))) q += 1n;
  if (q >> 53n) {
    q >>= 1n;
    shift += 1;
  }
  const r = Number(q) * 2 ** (shift - 1074);
  return neg ? -r : r;
}

const value = fc.oneof(
  fc.double({ min: -1e15, max: 1e15, noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(0.1, 0.2, 0.3, -0.7, 1e-16, 1, 1e16, -1e16, 2 ** -1074, 3.5),
  fc.integer({ min: -5, max: 5 }),
);

describe('exact sums', () => {
  it('round the exact sum once: known cases where the naive sum is off', () => {
    expect(exactSum([0.1, 0.2, 0.3])).toBe(0.6);
    expect(0.1 + 0.2 + 0.3).not.toBe(0.6);
    expect(exactSum([1e16, 1, -1e16])).toBe(1);
    expect(exactSum([1e-16, 1, 1e16])).toBe(10000000000000002);
    expect(exactSum([])).toBe(0);
    expect(Object.is(exactSum([-0]), 0)).toBe(true);
  });

  it('equal the BigInt reference, in any order', () => {
    fc.assert(
      fc.property(fc.array(value, { maxLength: 40 }), fc.integer(), (xs, seed) => {
        const shuffled = [...xs].sort((a, b) => ((a * 7919 + seed) % 13) - ((b * 7919 + seed) % 13) || 0);
        expect(exactSum(xs)).toBe(reference(xs));
        expect(exactSum(shuffled)).toBe(exactSum(xs));
      }),
      { numRuns: 300 },
    );
  });

  it('merge and subtract exactly: (a + b) - b leaves a', () => {
    fc.assert(
      fc.property(fc.array(value, { maxLength: 20 }), fc.array(value, { maxLength: 20 }), (a, b) => {
        const pa: number[] = [];
        for (const x of a) addExact(pa, x);
        const pb: number[] = [];
        for (const x of b) addExact(pb, x);
        const both = mergeExact([...pa], pb);
        expect(roundSum(both)).toBe(reference([...a, ...b]));
        for (const x of b) addExact(both, -x);
        expect(roundSum(both)).toBe(reference(a));
        // partials survive JSON unchanged
        expect(roundSum(JSON.parse(JSON.stringify(both)) as number[])).toBe(reference(a));
      }),
      { numRuns: 300 },
    );
  });
});
