/**
 * Seeded pseudo-random floats shared by serving (src/model/sampling.ts: the samplers' `Rng`),
 * training (minibatch order, SFT position offsets, demonstration splits) and the eval reports
 * (bootstrap resampling). No imports: any layer may use it.
 */

/**
 * mulberry32 (Tommy Ettinger's 32-bit generator): a seeded stream of uniform floats in [0, 1)
 * (multiples of 2^-32), the state starting at `seed` mod 2^32. The same seed gives the same stream
 * on every platform.
 */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Small seeded PRNG of the samplers (`mulberry32` from floor(seed) ^ 0x9e3779b9): uniform floats
 * in [0, 1), reproducible across platforms for a fixed seed.
 */
export class Rng {
  /** Uniform float in [0, 1). */
  readonly next: () => number;
  constructor(seed: number) {
    this.next = mulberry32(Math.floor(seed) ^ 0x9e3779b9);
  }
}
