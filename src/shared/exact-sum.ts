/**
 * Exact sums of doubles, for the mean returns of the statistics (docs/method.md#metrics): the same
 * answer whatever the order the values are added in, and whether they are added one at a time as
 * sessions complete or all at once from a full read.
 *
 * A sum is held as Shewchuk's non-overlapping partials (J. R. Shewchuk, "Adaptive Precision
 * Floating-Point Arithmetic and Fast Robust Geometric Predicates", 1997; the algorithm of Python's
 * `math.fsum`): an array of doubles, increasing in magnitude, whose mathematical sum is exactly the
 * sum of the values added (no rounding at all). {@link roundSum} rounds that exact sum once, to the
 * nearest double (ties to even), so the result depends only on the multiset of values added.
 * Subtracting is adding the negated value, also exact. Partials are plain JSON numbers, so a sum
 * can be stored and read back unchanged.
 *
 * Inputs must be finite (returns are: rewards are bounded, docs/protocol.md); the sums of the
 * statistics stay far below the double range, where no partial can overflow.
 */

/** Partials of an exact sum (see the top of this file); `[]` is 0. */
export type ExactSum = number[];

/** Add `x` to the exact sum `partials` in place (x must be finite). Returns `partials`. */
export function addExact(partials: ExactSum, x: number): ExactSum {
  let i = 0;
  for (let j = 0; j < partials.length; j++) {
    let y = partials[j]!;
    if (Math.abs(x) < Math.abs(y)) [x, y] = [y, x];
    const hi = x + y;
    const lo = y - (hi - x);
    if (lo !== 0) partials[i++] = lo;
    x = hi;
  }
  partials.length = i;
  if (x !== 0) partials.push(x); // a zero adds nothing: [] is 0
  return partials;
}

/** Add every partial of `b` to `a` in place: `a` becomes the exact sum of both. Returns `a`. */
export function mergeExact(a: ExactSum, b: readonly number[]): ExactSum {
  for (const x of b) addExact(a, x);
  return a;
}

/**
 * The exact sum of `partials` rounded once to the nearest double, ties to even (CPython's
 * `math_fsum` final step: add the partials from the largest down while the sum stays exact, then
 * correct a tie that the partials below decide). 0 for `[]`.
 */
export function roundSum(partials: readonly number[]): number {
  let n = partials.length;
  if (n === 0) return 0;
  let hi = partials[--n]!;
  let lo = 0;
  while (n > 0) {
    const x = hi;
    const y = partials[--n]!;
    hi = x + y;
    const yr = hi - x;
    lo = y - yr;
    if (lo !== 0) break;
  }
  if (n > 0 && ((lo < 0 && partials[n - 1]! < 0) || (lo > 0 && partials[n - 1]! > 0))) {
    const y = lo * 2;
    const x = hi + y;
    const yr = x - hi;
    if (y === yr) hi = x;
  }
  return hi === 0 ? 0 : hi; // no -0
}

/** The exact sum of `xs`, rounded once (order does not matter). */
export function exactSum(xs: Iterable<number>): number {
  const p: ExactSum = [];
  for (const x of xs) addExact(p, x);
  return roundSum(p);
}
