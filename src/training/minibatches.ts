/**
 * Minibatches and micro-batches of sample indices (deterministic from a seed): which samples each
 * optimiser step trains on, and how a minibatch is cut to bound memory.
 */

/** Deterministic Fisher-Yates shuffle (mulberry32). */
function shuffled(n: number, seed: number): number[] {
  let a = seed >>> 0;
  const rand = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const idx = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [idx[i], idx[j]] = [idx[j], idx[i]];
  }
  return idx;
}

/**
 * Minibatches of sample indices for one epoch, with little padding: shuffle, cut into windows of
 * 8 minibatches, sort each window by sequence length, cut into minibatches, shuffle their order.
 * Every index appears exactly once; there are ceil(n / mbSize) minibatches.
 */
export function lengthBucketedMinibatches(lengths: readonly number[], mbSize: number, seed: number): number[][] {
  const order = shuffled(lengths.length, seed);
  const window = mbSize * 8;
  const batches: number[][] = [];
  for (let w = 0; w < order.length; w += window) {
    const win = order.slice(w, w + window).sort((a, b) => lengths[b] - lengths[a]);
    for (let k = 0; k < win.length; k += mbSize) batches.push(win.slice(k, k + mbSize));
  }
  return shuffled(batches.length, seed ^ 0x9e3779b9).map((i) => batches[i]);
}

/**
 * Minibatches of one epoch: SFT groups similar lengths (less padding); RL uses plain shuffled
 * minibatches, because length buckets put the long reflection turns of LaMer together, and each
 * Adam step on such a bucket moves the reflections alone in the direction of their (group-centred,
 * but not batch-centred) advantages: measured on MineSweeper, output entropy rose 0.9 -> 1.4 in
 * three jobs. Micro-batches still sort by length inside a minibatch, so padding stays small.
 */
export function minibatchOrder(bucketed: boolean, lengths: readonly number[], mbSize: number, seed: number): number[][] {
  if (bucketed) return lengthBucketedMinibatches(lengths, mbSize, seed);
  const order = shuffled(lengths.length, seed);
  const out: number[][] = [];
  for (let k = 0; k < order.length; k += mbSize) out.push(order.slice(k, k + mbSize));
  return out;
}

/**
 * Split a minibatch into micro-batches whose padded size (count x longest length) stays within
 * `budget` positions; longest sequences first; every micro-batch has at least one sample.
 */
export function splitMicroBatches(idx: readonly number[], lengths: readonly number[], budget: number): number[][] {
  const sorted = [...idx].sort((a, b) => lengths[b] - lengths[a]);
  const out: number[][] = [];
  let cur: number[] = [];
  for (const i of sorted) {
    const longest = cur.length > 0 ? lengths[cur[0]] : lengths[i];
    if (cur.length > 0 && (cur.length + 1) * longest > budget) { out.push(cur); cur = []; }
    cur.push(i);
  }
  if (cur.length > 0) out.push(cur);
  return out;
}
