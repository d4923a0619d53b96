/**
 * Statistics over completed sessions (docs/method.md#metrics): pass@1..k, success rate and mean return
 * by attempt, overall and per (modelVersion, env, mode, memory) group. Pure functions over the rows.
 */
import type { AttemptSummary } from '../db/schema.js';
import type { StatsRow } from '../db/sessions-repo.js';
import { STATS_MEMORY, type SessionMode, type StatsMemory } from '../domain.js';
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

/**
 * Reads single-attempt sessions as chains of independent retries, the way `lamer eval
 * --independent-attempts` plays them: per task, in the order given (creation order), sessions are
 * chained into runs of at most `retries` that end at the first success; each run becomes one row
 * whose attempts are its sessions' attempts in order, so that pass@k, success and return by attempt
 * read as for a `retries`-attempt session. A run cut short by the end of the data (fewer than
 * `retries` sessions, none solved) counts its missing attempts as failed, as a session that ended
 * early does. Retries of one task played at the same time interleave in creation order; since
 * every retry is an independent try, the chains are then still runs of independent tries.
 * @param rows single-attempt sessions (maxAttempts 1), oldest first.
 * @param retries largest chain length, >= 1.
 */
export function asRetryChains(rows: readonly StatsRow[], retries: number): StatsRow[] {
  const open = new Map<string, StatsRow>();
  const out: StatsRow[] = [];
  for (const r of rows) {
    const key = JSON.stringify([r.taskId, r.modelVersion, r.env, r.mode]);
    let chain = open.get(key);
    if (!chain) {
      chain = { ...r, maxAttempts: retries, attempts: [] };
      out.push(chain);
      open.set(key, chain);
    }
    const a = r.attempts[0];
    if (a) chain.attempts.push({ ...a, attempt: chain.attempts.length });
    if (a?.success || chain.attempts.length >= retries) open.delete(key);
  }
  return out;
}

/** The memory of a session as statistics group it: 'none' for a single-attempt session (domain.ts STATS_MEMORY). */
export function statsMemory(r: Pick<StatsRow, 'maxAttempts' | 'memory'>): StatsMemory {
  return r.maxAttempts === 1 ? 'none' : r.memory;
}

/**
 * summarise over all `rows` (each session as it is), plus one summary per (modelVersion, env, mode,
 * memory), groups sorted by that key (memory in STATS_MEMORY order: 'none' first). Memory 'none' groups hold the single-attempt sessions,
 * read as chains of up to `retries` independent retries (asRetryChains): their pass@k is what k
 * independent tries without memory achieve, beside the memory groups' pass@k. `sessions` counts
 * sessions; `runs` what the group's rates are over (sessions, or retry chains for 'none').
 * @param rows completed sessions, oldest first.
 * @param retries chain length of memory 'none' groups, >= 1 (default 3, the paper's K).
 */
export function sessionStats(rows: readonly StatsRow[], retries = 3) {
  const groups = new Map<string, StatsRow[]>();
  for (const r of rows) {
    // the memory's place in STATS_MEMORY sorts 'none' first, then the memory modes in their order
    const key = JSON.stringify([r.modelVersion, r.env, r.mode, STATS_MEMORY.indexOf(statsMemory(r))]);
    const g = groups.get(key);
    if (g) g.push(r);
    else groups.set(key, [r]);
  }
  return {
    ...summarise(rows),
    groups: [...groups.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, rs]) => {
        const [modelVersion, env, mode, memoryAt] = JSON.parse(key) as [string, string | null, SessionMode, number];
        const memory = STATS_MEMORY[memoryAt]!;
        const runs = memory === 'none' ? asRetryChains(rs, retries) : rs;
        return { modelVersion, env, mode, memory, ...summarise(runs), sessions: rs.length, runs: runs.length };
      }),
  };
}
