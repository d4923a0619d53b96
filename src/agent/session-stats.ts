/**
 * Statistics over completed sessions (docs/method.md#metrics): pass@1..k, success rate and mean return
 * by attempt, overall and per (modelVersion, env, mode) group. Pure functions over the rows.
 */
import type { AttemptSummary } from '../db/schema.js';
import type { StatsRow } from '../db/sessions-repo.js';
import type { SessionMode } from '../domain.js';
import { passAtKRate } from '../shared/passk.js';

/**
 * Figures of a set of sessions; the arrays are indexed by attempt (0-based) up to the largest
 * maxAttempts. The success rate and mean return of an attempt that no session played (every
 * session stopped earlier, at a success or at its own smaller maxAttempts) are null: there is
 * nothing to average, and 0 would read as "played and failed".
 */
export function summarise(rs: readonly StatsRow[]) {
  const maxK = rs.reduce((m, r) => Math.max(m, r.maxAttempts), 0);
  const successByAttempt: Array<number | null> = [];
  const meanReturnByAttempt: Array<number | null> = [];
  const playedByAttempt: number[] = [];
  for (let a = 0; a < maxK; a++) {
    const played = rs.map((r) => r.attempts[a]).filter((x): x is AttemptSummary => x !== undefined && x.status !== 'running');
    playedByAttempt.push(played.length);
    successByAttempt.push(played.length === 0 ? null : played.filter((x) => x.success).length / played.length);
    meanReturnByAttempt.push(played.length === 0 ? null : played.reduce((s, x) => s + x.return, 0) / played.length);
  }
  return {
    sessions: rs.length,
    passAtK: passAtKRate(rs.map((r) => r.attempts), maxK),
    successByAttempt,
    meanReturnByAttempt,
    attemptsPlayed: playedByAttempt,
  };
}

/** summarise over all `rows`, plus one summary per (modelVersion, env, mode), groups sorted by that key's JSON. */
export function sessionStats(rows: readonly StatsRow[]) {
  const groups = new Map<string, StatsRow[]>();
  for (const r of rows) {
    const key = JSON.stringify([r.modelVersion, r.env, r.mode]);
    const g = groups.get(key);
    if (g) g.push(r);
    else groups.set(key, [r]);
  }
  return {
    ...summarise(rows),
    groups: [...groups.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, rs]) => {
        const [modelVersion, env, mode] = JSON.parse(key) as [string, string | null, SessionMode];
        return { modelVersion, env, mode, ...summarise(rs) };
      }),
  };
}
