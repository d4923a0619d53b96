/**
 * The statistics from the groups' aggregates (src/agent/session-stats.ts statsFromGroups over
 * src/shared/stats-aggregate.ts) equal the full computation over the sessions (sessionStats) on
 * random session sets, completed in random orders, for random filters and retry chain lengths:
 * pass@k, success, mean return and counts, overall and per group, exactly (toEqual compares
 * numbers with Object.is).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sessionStats, statsFromGroups } from '../../src/agent/session-stats.js';
import {
  buildAggregates, chainReads, countCompleted, groupOf, retryChainKey, statsGroupKey, type RetryOutcome, type StatsGroup,
} from '../../src/shared/stats-aggregate.js';
import { matching, shuffled, statsFilter, statsSessions, type StatsFixture } from '../helpers/stats-sessions.js';

/** The aggregates of `rows` kept as a store keeps them: one completion at a time, in the given order. */
function completeInOrder(rows: readonly StatsFixture[]): Map<string, StatsGroup> {
  const groups = new Map<string, StatsGroup>();
  const chains = new Map<string, RetryOutcome[]>();
  for (const s of rows) {
    const key = `${s.tenant}\n${statsGroupKey(s)}`;
    const g = groups.get(key) ?? groupOf(s);
    groups.set(key, g);
    const chainKey = `${s.tenant}\n${retryChainKey(s)}`;
    const chain = chains.get(chainKey) ?? [];
    const placed = countCompleted(g, s, s.updatedAt, chainReads(chain, s.id));
    if (!placed) continue;
    const byId = new Map(chain.map((r) => [r.sessionId, r]));
    for (const c of [placed.x, ...placed.changed]) byId.set(c.sessionId, c);
    chains.set(chainKey, [...byId.values()].sort((a, b) => (a.sessionId < b.sessionId ? -1 : 1)));
  }
  return groups;
}

const tenantGroups = (groups: Map<string, StatsGroup>, tenant: string) => [...groups].filter(([k]) => k.startsWith(`${tenant}\n`)).map(([, g]) => g);

describe('statistics from the aggregates', () => {
  for (const realistic of [true, false]) {
    it(`equal the full computation, whatever order the sessions complete in (${realistic ? 'sessions as the server writes them' : 'any attempts'})`, () => {
      fc.assert(
        fc.property(
          statsSessions({ realistic, tenants: ['t1', 't2'] }),
          fc.integer(),
          statsFilter,
          fc.integer({ min: 1, max: 5 }),
          (rows, seed, f, retries) => {
            const groups = completeInOrder(shuffled(rows, seed));
            for (const tenant of ['t1', 't2']) {
              const want = sessionStats(matching(rows, tenant, f), retries);
              expect(statsFromGroups(tenantGroups(groups, tenant), f, retries)).toEqual(want);
            }
          },
        ),
        { numRuns: realistic ? 400 : 300 },
      );
    });
  }

  for (const realistic of [true, false]) {
    it(`long chains of one task: many retries, failures in a row, completions out of order (${realistic ? 'as written' : 'any attempts'})`, () => {
      fc.assert(
        fc.property(statsSessions({ realistic, maxLength: 120 }), fc.integer(), fc.integer({ min: 1, max: 7 }), (rows, seed, retries) => {
          const one = rows.map((r) => ({ ...r, taskId: 'task-a', modelVersion: 'v1', env: 'alfworld', maxAttempts: 1, attempts: r.attempts.slice(0, 1) }));
          const groups = completeInOrder(shuffled(one, seed));
          expect(statsFromGroups(tenantGroups(groups, 't1'), {}, retries)).toEqual(sessionStats(matching(one, 't1', {}), retries));
        }),
        { numRuns: 200 },
      );
    });
  }

  it('a session without an attempt after a task\'s last failure leaves an empty chain when that failure closed its chain', () => {
    const base = { tenant: 't1', taskId: 't', modelVersion: 'v', env: null, mode: 'train' as const, memory: 'reflection_only' as const, maxAttempts: 1, updatedAt: 1 };
    const failed = { attempt: 0, status: 'failed' as const, success: false, steps: 1, return: 0, endReason: 'done' as const };
    const rows = [
      { ...base, id: 'ses_1', attempts: [failed] },
      { ...base, id: 'ses_2', attempts: [] },
    ];
    for (const order of [rows, [...rows].reverse()]) {
      const groups = tenantGroups(completeInOrder(order), 't1');
      expect(statsFromGroups(groups, {}, 1).groups[0]).toMatchObject({ sessions: 2, runs: 2 });
      expect(statsFromGroups(groups, {}, 2).groups[0]).toMatchObject({ sessions: 2, runs: 1 });
      for (const retries of [1, 2, 3]) expect(statsFromGroups(groups, {}, retries)).toEqual(sessionStats(matching(rows, 't1', {}), retries));
    }
  });

  it('a rebuild in id order gives the same answers as the completions in any order', () => {
    fc.assert(
      fc.property(statsSessions({ realistic: false }), fc.integer(), fc.integer({ min: 1, max: 4 }), (rows, seed, retries) => {
        const built = [...buildAggregates(rows).groups.values()];
        const kept = tenantGroups(completeInOrder(shuffled(rows, seed)), 't1');
        expect(statsFromGroups(built, {}, retries)).toEqual(statsFromGroups(kept, {}, retries));
        expect(statsFromGroups(built, {}, retries)).toEqual(sessionStats(matching(rows, 't1', {}), retries));
      }),
      { numRuns: 200 },
    );
  });

  it('no sessions: the empty answer', () => {
    expect(statsFromGroups([], {}, 3)).toEqual(sessionStats([], 3));
    expect(statsFromGroups([], {}, 3)).toEqual({ sessions: 0, passAtK: {}, successByAttempt: [], meanReturnByAttempt: [], attemptsPlayed: [], groups: [] });
  });
});
