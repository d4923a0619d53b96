/** Trajectory diversity's entropy (docs/method.md#metrics), used by the server's stats and by `lamer eval`. */

/**
 * Shannon entropy, in nats, of the empirical distribution of `items`:
 * H = -sum_j p_j ln p_j with p_j = (count of distinct item j) / items.length. 0 for <= 1 item;
 * ln(n) when all n items differ.
 */
export function empiricalEntropy(items: readonly string[]): number {
  if (items.length === 0) return 0;
  const counts = new Map<string, number>();
  for (const x of items) counts.set(x, (counts.get(x) ?? 0) + 1);
  let h = 0;
  for (const c of counts.values()) {
    const p = c / items.length;
    h -= p * Math.log(p);
  }
  return h === 0 ? 0 : h; // avoid -0
}
