/**
 * pass@k of sessions (shared/LAMER.md §4): a session passes at k when one of its attempts 0..k-1
 * succeeded; over many sessions pass@k is the fraction that pass.
 */

/** Index of the first successful attempt, or -1. */
export function firstSuccess(attempts: ReadonlyArray<{ success: boolean }>): number {
  return attempts.findIndex((a) => a.success);
}

/**
 * pass@1..maxK of one session as `{ "1": bool, ..., "<maxK>": bool }`.
 * `attempts` are the session's attempts so far in order; attempts not yet played count as failed.
 */
export function passAtK(attempts: ReadonlyArray<{ success: boolean }>, maxK: number): Record<string, boolean> {
  const first = firstSuccess(attempts);
  const out: Record<string, boolean> = {};
  for (let k = 1; k <= maxK; k++) out[String(k)] = first >= 0 && first < k;
  return out;
}

/**
 * Fraction of sessions passing at each k = 1..maxK: `{ "1": frac, ... }`; empty input gives 0s.
 */
export function passAtKRate(sessions: ReadonlyArray<ReadonlyArray<{ success: boolean }>>, maxK: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (let k = 1; k <= maxK; k++) {
    let n = 0;
    for (const a of sessions) {
      const f = firstSuccess(a);
      if (f >= 0 && f < k) n++;
    }
    out[String(k)] = sessions.length === 0 ? 0 : n / sessions.length;
  }
  return out;
}
