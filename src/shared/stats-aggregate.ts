/**
 * The statistics of completed sessions (docs/method.md#metrics) as aggregates kept on write: one
 * document per (tenant, modelVersion, env, mode, memory) group, from which `GET /v1/stats` answers
 * without reading the sessions (src/agent/session-stats.ts `statsFromGroups`). Both stores keep
 * them in the transaction that completes a session (src/db/stats-aggregates.ts,
 * src/db/pg/stats-aggregates.ts); the functions here are the pure part both use.
 *
 * A group document holds, for its sessions as they are:
 * - `firstSuccess[i]`: sessions whose first successful attempt is attempt i (pass@k counts i < k);
 * - `attempts.played[a]`, `.succeeded[a]`, `.returns[a]`: sessions that played attempt a (ended,
 *   not running), those of them that succeeded, and the exact sum of their returns (./exact-sum.ts);
 * - `maxAttempts`: the largest maxAttempts of its sessions.
 *
 * Memory 'none' groups (single-attempt sessions) are read as chains of up to R independent retries
 * per task (src/agent/session-stats.ts asRetryChains), R chosen per request. In a task's sessions
 * in creation (id) order, a chain ends at a success or after R sessions, so a session's place in
 * its chain is f mod R, where f, its *streak*, is the number of sessions with an attempt since the
 * task's last success before it. The documents of these groups therefore also count by streak
 * (`streak.*[f]`), and any R folds them (index f mod R) into the chains' figures. A session that
 * completes out of creation order changes the streaks of the task's later sessions up to the next
 * success; the per-session outcomes and streaks are kept in a table of their own for that.
 * A session without any attempt takes no place in a chain, but asRetryChains opens an empty chain
 * for it when no chain is open; one that ends a task's sessions (with no attempted session after
 * it) then leaves an empty chain: `emptyRuns` counts those, `always` where the task's last
 * attempted session succeeded (or there is none), else by that session's streak.
 */
import { STATS_MEMORY, type AttemptStatus, type MemoryMode, type SessionMode, type StatsMemory } from '../domain.js';
import { addExact, mergeExact, type ExactSum } from './exact-sum.js';

/** A completed session as statistics read it (src/db/sessions-repo.ts StatsRow has this shape). */
export interface StatsSession {
  id: string;
  taskId: string;
  modelVersion: string;
  env: string | null;
  mode: SessionMode;
  memory: MemoryMode;
  maxAttempts: number;
  attempts: ReadonlyArray<{ status: AttemptStatus; success: boolean; return: number }>;
}

/** Counts and exact return sums by index (an attempt, or a streak). */
export interface ByIndex {
  played: number[];
  succeeded: number[];
  returns: ExactSum[];
}

/** One group's aggregate (see the top of this file). */
export interface StatsGroupDoc {
  maxAttempts: number;
  firstSuccess: number[];
  attempts: ByIndex;
  /** Memory 'none' groups: sessions with an attempt by streak f; `successes` counts successes whatever the attempt's status. */
  streak: ByIndex & { attempted: number[]; successes: number[] };
  emptyRuns: { always: number; afterFailure: number[] };
}

/** A group: its key fields, its completed sessions, the latest update time among them (ms), its document. */
export interface StatsGroup {
  modelVersion: string;
  env: string | null;
  mode: SessionMode;
  memory: StatsMemory;
  sessions: number;
  updatedAt: number;
  doc: StatsGroupDoc;
}

/** One single-attempt session's outcome in its task's chain of retries, with its streak (null without an attempt). */
export interface RetryOutcome {
  sessionId: string;
  attempted: boolean;
  success: boolean;
  played: boolean;
  return: number;
  streak: number | null;
}

/** The memory of a session as statistics group it: 'none' for a single-attempt session (domain.ts STATS_MEMORY). */
export function statsMemory(r: Pick<StatsSession, 'maxAttempts' | 'memory'>): StatsMemory {
  return r.maxAttempts === 1 ? 'none' : r.memory;
}

/**
 * The key of a session's group: JSON of [modelVersion, env, mode, memory's place in STATS_MEMORY].
 * Groups are answered in the order of these keys (JavaScript string order), 'none' first.
 */
export function statsGroupKey(r: Pick<StatsSession, 'modelVersion' | 'env' | 'mode' | 'maxAttempts' | 'memory'>): string {
  return groupKeyOf({ modelVersion: r.modelVersion, env: r.env, mode: r.mode, memory: statsMemory(r) });
}

/** The key of a group given its fields (as statsGroupKey). */
export function groupKeyOf(g: Pick<StatsGroup, 'modelVersion' | 'env' | 'mode' | 'memory'>): string {
  return JSON.stringify([g.modelVersion, g.env, g.mode, STATS_MEMORY.indexOf(g.memory)]);
}

/** The key of a single-attempt session's chain of retries: its task within its group. */
export function retryChainKey(r: Pick<StatsSession, 'taskId' | 'modelVersion' | 'env' | 'mode'>): string {
  return JSON.stringify([r.taskId, r.modelVersion, r.env, r.mode]);
}

const byIndex = (): ByIndex => ({ played: [], succeeded: [], returns: [] });

/** A group document with no session. */
export function emptyGroupDoc(): StatsGroupDoc {
  return {
    maxAttempts: 0,
    firstSuccess: [],
    attempts: byIndex(),
    streak: { ...byIndex(), attempted: [], successes: [] },
    emptyRuns: { always: 0, afterFailure: [] },
  };
}

/** `a[i] += by`, the array grown with zeros as needed. */
export function bump(a: number[], i: number, by = 1): void {
  while (a.length <= i) a.push(0);
  a[i]! += by;
}

/** The exact sum at `a[i]`, the array grown with empty sums as needed. */
function sumAt(a: ExactSum[], i: number): ExactSum {
  while (a.length <= i) a.push([]);
  return a[i]!;
}

/** Count one played attempt (or remove it, sign -1) at index `i` of `b`. */
function countPlayed(b: ByIndex, i: number, success: boolean, ret: number, sign: 1 | -1): void {
  bump(b.played, i, sign);
  bump(b.succeeded, i, success ? sign : 0);
  addExact(sumAt(b.returns, i), sign * ret);
}

/** Add one completed session to its group's document (in place): first success and attempts as they are. */
export function addSession(doc: StatsGroupDoc, s: StatsSession): void {
  doc.maxAttempts = Math.max(doc.maxAttempts, s.maxAttempts);
  const first = s.attempts.findIndex((a) => a.success);
  if (first >= 0) bump(doc.firstSuccess, first);
  s.attempts.forEach((a, i) => {
    if (a.status !== 'running') countPlayed(doc.attempts, i, a.success, a.return, 1);
  });
}

/** Merge the session parts (maxAttempts, firstSuccess, attempts) of `b` into `a` (in place); streak parts are left out. */
export function mergeSessionParts(a: StatsGroupDoc, b: StatsGroupDoc): void {
  a.maxAttempts = Math.max(a.maxAttempts, b.maxAttempts);
  b.firstSuccess.forEach((n, i) => bump(a.firstSuccess, i, n));
  b.attempts.played.forEach((n, i) => bump(a.attempts.played, i, n));
  b.attempts.succeeded.forEach((n, i) => bump(a.attempts.succeeded, i, n));
  b.attempts.returns.forEach((p, i) => mergeExact(sumAt(a.attempts.returns, i), p));
}

/** A single-attempt session's outcome (streak not yet known). */
export function retryOutcome(s: StatsSession): RetryOutcome {
  const a = s.attempts[0];
  const played = a !== undefined && a.status !== 'running';
  return { sessionId: s.id, attempted: a !== undefined, success: a?.success ?? false, played, return: a?.return ?? 0, streak: null };
}

/** Count (sign 1) or uncount (-1) an attempted outcome at streak `f`. */
function countStreak(doc: StatsGroupDoc, o: RetryOutcome, f: number, sign: 1 | -1): void {
  bump(doc.streak.attempted, f, sign);
  bump(doc.streak.successes, f, o.success ? sign : 0);
  if (o.played) countPlayed(doc.streak, f, o.success, o.return, sign);
}

/** Streaks of `rows` (id order) following `prev`, the task's last attempted outcome before them (null: none). */
function streaksAfter(prev: RetryOutcome | null, rows: readonly RetryOutcome[]): Array<number | null> {
  let next = prev === null || prev.success ? 0 : prev.streak! + 1;
  return rows.map((r) => {
    if (!r.attempted) return null;
    const f = next;
    next = r.success ? 0 : f + 1;
    return f;
  });
}

type ChainEnd = { kind: 'none' } | { kind: 'always' } | { kind: 'after'; streak: number };

/** How a task's outcomes end, given its last attempted outcome `prev` before `tail` and every outcome after it (`tail`, id order). */
function chainEnd(prev: RetryOutcome | null, tail: readonly RetryOutcome[]): ChainEnd {
  let last = prev;
  let trailing = false;
  for (const r of tail) {
    if (r.attempted) [last, trailing] = [r, false];
    else trailing = true;
  }
  if (!trailing) return { kind: 'none' };
  return last === null || last.success ? { kind: 'always' } : { kind: 'after', streak: last.streak! };
}

function countEnd(doc: StatsGroupDoc, e: ChainEnd, sign: 1 | -1): void {
  if (e.kind === 'always') doc.emptyRuns.always += sign;
  else if (e.kind === 'after') bump(doc.emptyRuns.afterFailure, e.streak, sign);
}

/**
 * Insert the outcome `x` into its task's chain of retries and update the group's document (in place).
 * @param prev the task's last attempted outcome with an id below x's (stored streak), or null.
 * @param tail every other outcome of the task with an id above prev's (all of them when prev is
 *   null), in id order, with their stored streaks.
 * @returns `x` with its streak, and the outcomes of `tail` whose streak changed (new streaks), to store.
 */
export function insertRetry(
  doc: StatsGroupDoc,
  prev: RetryOutcome | null,
  tail: readonly RetryOutcome[],
  x: RetryOutcome,
): { x: RetryOutcome; changed: RetryOutcome[] } {
  countEnd(doc, chainEnd(prev, tail), -1);
  const at = tail.findIndex((r) => r.sessionId > x.sessionId);
  const rows = at < 0 ? [...tail, x] : [...tail.slice(0, at), x, ...tail.slice(at)];
  const streaks = streaksAfter(prev, rows);
  const changed: RetryOutcome[] = [];
  let placed = x;
  const after = rows.map((r, i) => {
    const f = streaks[i]!;
    if (r === x) {
      placed = { ...x, streak: f };
      if (f !== null) countStreak(doc, x, f, 1);
      return placed;
    }
    if (f === r.streak) return r;
    const moved = { ...r, streak: f };
    countStreak(doc, r, r.streak!, -1);
    countStreak(doc, r, f!, 1);
    changed.push(moved);
    return moved;
  });
  countEnd(doc, chainEnd(prev, after), 1);
  return { x: placed, changed };
}

/** A group of the given fields with no session yet. */
export function emptyGroup(g: Pick<StatsGroup, 'modelVersion' | 'env' | 'mode' | 'memory'>): StatsGroup {
  return { modelVersion: g.modelVersion, env: g.env, mode: g.mode, memory: g.memory, sessions: 0, updatedAt: 0, doc: emptyGroupDoc() };
}

/** The group a session belongs to, with no session yet. */
export function groupOf(s: StatsSession): StatsGroup {
  return emptyGroup({ modelVersion: s.modelVersion, env: s.env, mode: s.mode, memory: statsMemory(s) });
}

/**
 * Count one more completed session in its group `g` (in place): its number, latest update time,
 * the session parts, and for a single-attempt session its place in its task's chain of retries.
 * @param chain for a single-attempt session, what insertRetry reads of its task's stored outcomes
 *   (`prev`, `tail`); ignored otherwise.
 * @returns the session's retry outcome with its streak and the stored outcomes whose streak
 *   changed (to write), or null for a multi-attempt session.
 */
export function countCompleted(
  g: StatsGroup,
  s: StatsSession,
  updatedAt: number,
  chain: { prev: RetryOutcome | null; tail: readonly RetryOutcome[] },
): { x: RetryOutcome; changed: RetryOutcome[] } | null {
  g.sessions++;
  g.updatedAt = Math.max(g.updatedAt, updatedAt);
  addSession(g.doc, s);
  return g.memory === 'none' ? insertRetry(g.doc, chain.prev, chain.tail, retryOutcome(s)) : null;
}

/**
 * In a task's stored outcomes (id order), what insertRetry reads for a new outcome of id `id`: the
 * last attempted outcome below it, and every outcome after that one.
 */
export function chainReads(chain: readonly RetryOutcome[], id: string): { prev: RetryOutcome | null; tail: RetryOutcome[] } {
  let p = -1;
  for (let i = 0; i < chain.length && chain[i]!.sessionId < id; i++) if (chain[i]!.attempted) p = i;
  return { prev: p >= 0 ? chain[p]! : null, tail: chain.slice(p + 1) };
}

/**
 * Every group and retry outcome of a set of completed sessions, built as the writes build them, one
 * completion at a time in id order (for a store whose aggregates must be rebuilt, and for tests).
 * @param sessions completed sessions of one tenant with their update times (ms), any order.
 * @returns groups by key (statsGroupKey); each task's outcomes in id order by retryChainKey.
 */
export function buildAggregates(sessions: ReadonlyArray<StatsSession & { updatedAt: number }>): {
  groups: Map<string, StatsGroup>;
  retries: Map<string, RetryOutcome[]>;
} {
  const groups = new Map<string, StatsGroup>();
  const retries = new Map<string, RetryOutcome[]>();
  for (const s of [...sessions].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))) {
    const key = statsGroupKey(s);
    const g = groups.get(key) ?? groupOf(s);
    groups.set(key, g);
    const chainKey = retryChainKey(s);
    const chain = retries.get(chainKey) ?? [];
    const placed = countCompleted(g, s, s.updatedAt, g.memory === 'none' ? chainReads(chain, s.id) : { prev: null, tail: [] });
    if (placed) {
      // in id order the new outcome comes last, so no stored streak changes
      chain.push(placed.x);
      retries.set(chainKey, chain);
    }
  }
  return { groups, retries };
}
