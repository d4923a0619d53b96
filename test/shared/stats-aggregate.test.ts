/**
 * The statistics aggregates kept on write (src/shared/stats-aggregate.ts), apart from the answers
 * they give (test/agent/session-stats.test.ts): after every completion, in any order, each group's
 * document and each task's retry outcomes are the ones a rebuild from the completed sessions (in
 * id order, buildAggregates) gives, and every streak is the number of attempted sessions since the
 * task's last success before it; insertRetry reports exactly the stored outcomes whose streak moved.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { roundSum } from '../../src/shared/exact-sum.js';
import {
  buildAggregates, chainReads, countCompleted, emptyGroupDoc, groupOf, insertRetry, retryChainKey, retryOutcome, statsGroupKey, statsMemory,
  type ByIndex, type RetryOutcome, type StatsGroup, type StatsGroupDoc,
} from '../../src/shared/stats-aggregate.js';
import { shuffled, statsSessions, type StatsFixture } from '../helpers/stats-sessions.js';

/** `xs` without its trailing entries for which `empty` holds (an aggregate's arrays keep zeros that a removal left). */
function trimmed<T>(xs: readonly T[], empty: (x: T) => boolean): T[] {
  let n = xs.length;
  while (n > 0 && empty(xs[n - 1]!)) n--;
  return xs.slice(0, n);
}

const counts = (xs: readonly number[]) => trimmed(xs, (x) => x === 0);
const byIndex = (b: ByIndex) => ({
  played: counts(b.played),
  succeeded: counts(b.succeeded),
  returns: trimmed(b.returns.map(roundSum), (x) => x === 0),
});

/** A document as its values: counts without trailing zeros, exact sums rounded (their partials depend on the order of the additions). */
function values(d: StatsGroupDoc) {
  return {
    maxAttempts: d.maxAttempts,
    firstSuccess: counts(d.firstSuccess),
    attempts: byIndex(d.attempts),
    streak: { ...byIndex(d.streak), attempted: counts(d.streak.attempted), successes: counts(d.streak.successes) },
    emptyRuns: { always: d.emptyRuns.always, afterFailure: counts(d.emptyRuns.afterFailure) },
  };
}

const groupValues = (g: StatsGroup) => ({ ...g, doc: values(g.doc) });

/** Each attempted outcome's streak from its definition: attempted outcomes since the task's last success before it (id order). */
function referenceStreaks(chain: readonly RetryOutcome[]): Array<number | null> {
  let since = 0;
  return chain.map((r) => {
    if (!r.attempted) return null;
    const f = since;
    since = r.success ? 0 : since + 1;
    return f;
  });
}

/** Aggregates kept one completion at a time, in the given order, as a store keeps them. */
class Kept {
  readonly groups = new Map<string, StatsGroup>();
  readonly chains = new Map<string, RetryOutcome[]>();

  complete(s: StatsFixture): void {
    const key = statsGroupKey(s);
    const g = this.groups.get(key) ?? groupOf(s);
    this.groups.set(key, g);
    const chainKey = retryChainKey(s);
    const chain = this.chains.get(chainKey) ?? [];
    const placed = countCompleted(g, s, s.updatedAt, chainReads(chain, s.id));
    if (!placed) return;
    const byId = new Map(chain.map((r) => [r.sessionId, r]));
    // what changed moved: every other stored outcome keeps its streak
    for (const c of placed.changed) expect(byId.get(c.sessionId)!.streak).not.toBe(c.streak);
    for (const c of [placed.x, ...placed.changed]) byId.set(c.sessionId, c);
    this.chains.set(chainKey, [...byId.values()].sort((a, b) => (a.sessionId < b.sessionId ? -1 : 1)));
  }
}

/** The kept aggregates equal a rebuild from `done` (one tenant's completed sessions). */
function expectRebuilt(kept: Kept, done: readonly StatsFixture[]): void {
  const built = buildAggregates(done);
  expect(new Map([...kept.groups].map(([k, g]) => [k, groupValues(g)]))).toEqual(new Map([...built.groups].map(([k, g]) => [k, groupValues(g)])));
  expect(kept.chains).toEqual(built.retries);
  for (const chain of kept.chains.values()) expect(chain.map((r) => r.streak)).toEqual(referenceStreaks(chain));
}

describe('aggregates kept on write', () => {
  for (const realistic of [true, false]) {
    it(`after every completion, in any order, equal a rebuild from the sessions completed so far (${realistic ? 'as written' : 'any attempts'})`, () => {
      fc.assert(
        fc.property(statsSessions({ realistic, maxLength: 40 }), fc.integer(), (rows, seed) => {
          const kept = new Kept();
          const done: StatsFixture[] = [];
          for (const s of shuffled(rows, seed)) {
            kept.complete(s);
            done.push(s);
            expectRebuilt(kept, done);
          }
        }),
        { numRuns: 150 },
      );
    });
  }

  it('one task of single-attempt sessions completed in reverse: each completion moves the streaks up to the next success', () => {
    const base = { tenant: 't1', taskId: 'k', modelVersion: 'v', env: null, mode: 'eval' as const, memory: 'reflection_only' as const, maxAttempts: 1, updatedAt: 1 };
    const at = (ok: boolean) => [{ attempt: 0, status: ok ? ('succeeded' as const) : ('failed' as const), success: ok, steps: 1, return: ok ? 1 : 0, endReason: 'done' as const }];
    // F F S F F, with a session without an attempt at the end
    const rows: StatsFixture[] = [false, false, true, false, false].map((ok, i) => ({ ...base, id: `ses_${i}`, attempts: at(ok) }));
    rows.push({ ...base, id: 'ses_5', attempts: [] });
    const kept = new Kept();
    for (const s of [...rows].reverse()) kept.complete(s);
    const chain = kept.chains.get(retryChainKey(rows[0]!))!;
    expect(chain.map((r) => r.streak)).toEqual([0, 1, 2, 0, 1, null]);
    const g = kept.groups.get(statsGroupKey(rows[0]!))!;
    expect(values(g.doc).streak.attempted).toEqual([2, 2, 1]);
    expect(values(g.doc).streak.successes).toEqual([0, 0, 1]);
    // the trailing session without an attempt follows a failure of streak 1
    expect(g.doc.emptyRuns).toEqual({ always: 0, afterFailure: [0, 1] });
    expectRebuilt(kept, rows);
  });

  it('insertRetry before a task\'s stored outcomes: the moved ones are reported with their new streaks', () => {
    const o = (id: string, success: boolean, streak: number): RetryOutcome => ({ sessionId: id, attempted: true, success, played: true, return: 0, streak });
    const doc = emptyGroupDoc();
    // stored: b (F, 0), c (S, 1); a new failure `a` before them pushes both by one
    doc.streak.attempted.push(1, 1);
    doc.streak.successes.push(0, 1);
    doc.streak.played.push(1, 1);
    doc.streak.succeeded.push(0, 1);
    doc.streak.returns.push([], []);
    const x = retryOutcome({ ...statsSessionOf('a'), attempts: [{ status: 'failed', success: false, return: 0 }] });
    const { x: placed, changed } = insertRetry(doc, null, [o('b', false, 0), o('c', true, 1)], x);
    expect(placed.streak).toBe(0);
    expect(changed).toEqual([o('b', false, 1), o('c', true, 2)]);
    expect(counts(doc.streak.attempted)).toEqual([1, 1, 1]);
    expect(counts(doc.streak.successes)).toEqual([0, 0, 1]);
  });

  it('groups: memory "none" for single-attempt sessions, keys sorting "none" first within a version, env and mode', () => {
    const s = statsSessionOf('a');
    expect(statsMemory({ maxAttempts: 1, memory: 'history_only' })).toBe('none');
    expect(statsMemory({ maxAttempts: 2, memory: 'history_only' })).toBe('history_only');
    const keys = [{ ...s, maxAttempts: 3 }, { ...s, maxAttempts: 1 }, { ...s, maxAttempts: 3, memory: 'history_only' as const }].map(statsGroupKey);
    expect([...keys].sort()).toEqual([keys[1], keys[0], keys[2]]);
    expect(groupOf({ ...s, maxAttempts: 1 })).toMatchObject({ memory: 'none', sessions: 0, doc: emptyGroupDoc() });
  });
});

function statsSessionOf(id: string) {
  return { id, taskId: 'k', modelVersion: 'v', env: 'e' as string | null, mode: 'eval' as const, memory: 'reflection_only' as const, maxAttempts: 1, attempts: [] };
}
