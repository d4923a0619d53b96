/**
 * Seeded deterministic pseudo-random numbers (no Math.random): one seed gives one sequence on every
 * machine and Node version. The seed (any integer; reduced mod 2^32) is first mixed with
 * SplitMix32 so that neighbouring seeds give unrelated streams, then drives Mulberry32
 * (period 2^32, 32-bit state; ample for board generation).
 */
export class Rng {
  private state: number;

  /** @throws RangeError when `seed` is not a finite integer. */
  constructor(seed: number) {
    if (!Number.isInteger(seed)) throw new RangeError(`seed must be an integer, got ${seed}`);
    // SplitMix32 finaliser over seed (mod 2^32) and the high part for seeds >= 2^32.
    let z = (seed >>> 0) ^ Math.floor(seed / 4294967296);
    z = (z + 0x9e3779b9) | 0;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    this.state = (z ^ (z >>> 16)) >>> 0;
  }

  /** Next uint32 (Mulberry32). */
  nextUint32(): number {
    this.state = (this.state + 0x6d2b79f5) | 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** Uniform float in [0, 1). */
  next(): number {
    return this.nextUint32() / 4294967296;
  }

  /** Uniform integer in [0, n). @throws RangeError when n is not a positive integer. */
  int(n: number): number {
    if (!Number.isInteger(n) || n <= 0) throw new RangeError(`int(n) needs a positive integer, got ${n}`);
    return Math.floor(this.next() * n);
  }

  /** Uniform element of a non-empty array. */
  pick<T>(xs: readonly T[]): T {
    if (xs.length === 0) throw new RangeError('pick from an empty array');
    return xs[this.int(xs.length)];
  }

  /** Fisher-Yates shuffle in place; returns the array. */
  shuffle<T>(xs: T[]): T[] {
    for (let i = xs.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [xs[i], xs[j]] = [xs[j], xs[i]];
    }
    return xs;
  }
}
