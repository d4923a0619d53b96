/**
 * pass@k, the one place it is computed (the session resource's `passAtK`, `GET /v1/stats`, the
 * training data statistics and the eval harness all use these functions).
 *
 * Formula (docs/method.md#metrics): pass@k is the fraction of tasks solved in any of the first k
 * attempts (pass@1 = the first attempt). Here a session is one trial at one task: it passes at k
 * when one of its attempts 0..k-1 succeeded, i.e. when its first successful attempt f satisfies
 * 0 <= f < k; over n sessions pass@k = |{sessions that pass at k}| / n (0 when n = 0).
 * Attempts are 0-based and given in order (the array index is the attempt number); attempts not
 * played (a session stops after its first success, or ended early) count as failed.
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
 * Fraction of sessions passing at each k = 1..maxK: `{ "1": frac, ... }` (fractions in [0, 1]);
 * `sessions[i]` is session i's attempts in order. Empty input gives 0s; maxK < 1 gives `{}`.
 */
export function passAtKRate(sessions: ReadonlyArray<ReadonlyArray<{ success: boolean }>>, maxK: number): Record<string, number> {
  const firsts = sessions.map(firstSuccess);
  const out: Record<string, number> = {};
  for (let k = 1; k <= maxK; k++) {
    const n = firsts.filter((f) => f >= 0 && f < k).length;
    out[String(k)] = sessions.length === 0 ? 0 : n / sessions.length;
  }
  return out;
}
