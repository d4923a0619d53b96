/**
 * Statistics over completed sessions (docs/method.md#metrics): pass@1..k, success rate and mean return
 * by attempt, overall and per (modelVersion, env, mode, memory) group. Pure functions, over the
 * rows (`sessionStats`) or over the groups' aggregates kept on write (`statsFromGroups`,
 * src/shared/stats-aggregate.ts), which give the same answer. Mean returns divide the exact sum of
 * the returns, rounded once (src/shared/exact-sum.ts), so that no order of summing changes them.
 */
import type { AttemptSummary } from '../db/schema.js';
import type { SessionFilters, StatsRow } from '../db/sessions-repo.js';
import { STATS_MEMORY, type SessionMode } from '../domain.js';
import { exactSum, mergeExact, roundSum } from '../shared/exact-sum.js';
import { passAtKRate } from '../shared/passk.js';
import {
  bump, emptyGroupDoc, groupKeyOf, mergeSessionParts, statsGroupKey, statsMemory, type StatsGroup, type StatsGroupDoc,
} from '../shared/stats-aggregate.js';

export { statsMemory };

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
    meanReturnByAttempt.push(played.length === 0 ? null : exactSum(played.map((x) => x.return)) / played.length);
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
    const key = statsGroupKey(r);
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

/** summarise's answer from the session parts of a group document counting `sessions` sessions (and their played attempts). */
function summaryOfDoc(doc: StatsGroupDoc, sessions: number) {
  return summaryOfCounts(sessions, doc.maxAttempts, doc.firstSuccess, doc.attempts);
}

/**
 * summarise's answer from counts: `runs` rows of up to `maxK` attempts, `firstSuccess[i]` of them
 * first successful at attempt i, and by attempt the played ones, the successful ones among them and
 * the exact sum of their returns.
 */
function summaryOfCounts(runs: number, maxK: number, firstSuccess: readonly number[], by: StatsGroupDoc['attempts']) {
  const passAtK: Record<string, number> = {};
  let solved = 0;
  for (let k = 1; k <= maxK; k++) {
    solved += firstSuccess[k - 1] ?? 0;
    passAtK[String(k)] = runs === 0 ? 0 : solved / runs;
  }
  const attemptsPlayed: number[] = [];
  const successByAttempt: Array<number | null> = [];
  const meanReturnByAttempt: Array<number | null> = [];
  for (let a = 0; a < maxK; a++) {
    const played = by.played[a] ?? 0;
    attemptsPlayed.push(played);
    successByAttempt.push(played === 0 ? null : (by.succeeded[a] ?? 0) / played);
    meanReturnByAttempt.push(played === 0 ? null : roundSum(by.returns[a] ?? []) / played);
  }
  return { sessions: runs, passAtK, successByAttempt, meanReturnByAttempt, attemptsPlayed };
}

/**
 * A memory 'none' group's figures over its chains of up to `retries` independent retries (as
 * summarise over asRetryChains), folded from its counts by streak (src/shared/stats-aggregate.ts):
 * a session of streak f is attempt f mod `retries` of its chain, and a chain starts at each
 * attempt 0 (plus the empty chains some trailing sessions without an attempt leave).
 */
function chainSummary(doc: StatsGroupDoc, retries: number) {
  const s = doc.streak;
  let runs = doc.emptyRuns.always;
  doc.emptyRuns.afterFailure.forEach((n, f) => (runs += f % retries === retries - 1 ? n : 0));
  const firstSuccess: number[] = [];
  s.attempted.forEach((n, f) => {
    if (f % retries === 0) runs += n;
    bump(firstSuccess, f % retries, s.successes[f] ?? 0);
  });
  const byPlace: StatsGroupDoc['attempts'] = { played: [], succeeded: [], returns: [] };
  s.played.forEach((n, f) => {
    const p = f % retries;
    bump(byPlace.played, p, n);
    bump(byPlace.succeeded, p, s.succeeded[f] ?? 0);
    mergeExact((byPlace.returns[p] ??= []), s.returns[f] ?? []);
  });
  return summaryOfCounts(runs, runs === 0 ? 0 : retries, firstSuccess, byPlace);
}

/** The filters a group meets (the same fields as the SQL of src/db/sessions-repo.ts; an empty filter value matches all). */
function groupMatches(g: StatsGroup, f: Omit<SessionFilters, 'status' | 'taskId'>): boolean {
  const is = <T>(want: T | undefined, have: T) => !want || want === have;
  return is(f.env, g.env) && is(f.mode, g.mode) && is(f.modelVersion, g.modelVersion) && is(f.memory, g.memory);
}

/**
 * sessionStats's answer from the tenant's group aggregates (src/shared/stats-aggregate.ts) instead
 * of its sessions: equal to `sessionStats(completed sessions matching f, retries)` for filters
 * without a task (a task's sessions are not kept apart in the aggregates).
 * @param groups every group of the tenant (any order).
 * @param retries chain length of memory 'none' groups, >= 1.
 */
export function statsFromGroups(groups: readonly StatsGroup[], f: Omit<SessionFilters, 'status' | 'taskId'>, retries = 3) {
  const chosen = groups
    .filter((g) => groupMatches(g, f))
    .map((g) => ({ key: groupKeyOf(g), g }))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    .map((x) => x.g);
  const all = emptyGroupDoc();
  let sessions = 0;
  for (const g of chosen) {
    mergeSessionParts(all, g.doc);
    sessions += g.sessions;
  }
  return {
    ...summaryOfDoc(all, sessions),
    groups: chosen.map((g) => {
      const { modelVersion, env, mode, memory } = g;
      const s = memory === 'none' ? chainSummary(g.doc, retries) : summaryOfDoc(g.doc, g.sessions);
      return { modelVersion, env, mode, memory, ...s, sessions: g.sessions, runs: s.sessions };
    }),
  };
}
