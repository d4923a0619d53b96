/**
 * The SQLite store's statistics aggregates (src/db/stats-aggregates.ts) on real database files:
 * - a database from before the aggregates gets them when it is opened, equal to the full
 *   computation over its completed sessions, with its completions numbered in id order, and the
 *   next open finds nothing to rebuild;
 * - a completion commits with its aggregates or not at all: when the aggregates cannot be written
 *   the step and the session update roll back with them (alone, or inside a batch of commits whose
 *   others go through), and a retry later counts the session once.
 * (Completions in any order, several at once, sessions written around the store: the contract
 * tests of test/db/async-repositories.test.ts, on both stores.)
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { sessionStats, statsFromGroups } from '../../src/agent/session-stats.js';
import { openDatabase, type DatabaseConnection } from '../../src/db/index.js';
import { createRepositories, type Repositories } from '../../src/db/repositories.js';
import type { SessionRow } from '../../src/db/schema.js';
import { statsAggregates } from '../../src/db/stats-aggregates.js';
import { tmpDir } from '../helpers/index.js';
import {
  completingCommit, databaseBeforeAggregates, fixtureRow, shuffled, statsFilter, statsSessions,
} from '../helpers/stats-sessions.js';

const opened: DatabaseConnection[] = [];
afterAll(() => {
  for (const c of opened) if (c.sqlite.open) c.close();
});

function open(dir: string): { conn: DatabaseConnection; repos: Repositories } {
  const conn = openDatabase(dir);
  opened.push(conn);
  return { conn, repos: createRepositories(conn) };
}

const TENANTS = ['t1', 't2'];

/** The answers from the aggregates equal the full computation over the completed sessions, per tenant, for `filters` and chain lengths 1-3. */
function expectSameAnswers(repos: Repositories, filters: ReadonlyArray<Parameters<typeof statsFromGroups>[1]>): void {
  for (const tenant of TENANTS) {
    const groups = repos.sessions.statsGroups(tenant);
    for (const f of filters) {
      const rows = repos.sessions.completed(tenant, f);
      for (const retries of [1, 2, 3]) expect(statsFromGroups(groups, f, retries), `${tenant} ${JSON.stringify(f)} ${retries}`).toEqual(sessionStats(rows, retries));
    }
  }
}

/** Every row of the four statistics tables, in key order (to compare two states of a database). */
function statsTables(conn: DatabaseConnection) {
  const all = (q: string) => conn.sqlite.prepare(q).all();
  return {
    groups: all('SELECT * FROM stats_groups ORDER BY tenant, group_key'),
    retries: all('SELECT * FROM stats_retries ORDER BY tenant, chain_key, session_id'),
    tenants: all('SELECT * FROM stats_tenants ORDER BY tenant'),
    completions: all('SELECT * FROM stats_completions ORDER BY tenant, seq'),
  };
}

describe('a database from before the aggregates', () => {
  it('gets them at open, equal to the full computation, and the next open rebuilds nothing', () => {
    fc.assert(
      fc.property(
        statsSessions({ realistic: false, tenants: TENANTS, minLength: 1, maxLength: 50 }),
        fc.array(fc.constantFrom<SessionRow['status']>('completed', 'completed', 'active', 'abandoned', 'expired'), { minLength: 50, maxLength: 50 }),
        fc.array(statsFilter, { minLength: 2, maxLength: 2 }),
        (fixtures, statuses, filters) => {
          const dir = tmpDir('lamer-stats-old-');
          const rows = fixtures.map((f, i) => fixtureRow(f, statuses[i]));
          databaseBeforeAggregates(dir, rows).close();
          const { conn, repos } = open(dir);
          expectSameAnswers(repos, [{}, { memory: 'none' }, ...filters]);
          for (const tenant of TENANTS) {
            // every completed session of the tenant, numbered in id order
            const done = rows.filter((r) => r.tenant === tenant && r.status === 'completed').map((r) => r.id);
            expect(repos.sessions.completionSeq(tenant)).toBe(done.length);
            expect(repos.sessions.completionsBetween(tenant, 0, done.length)).toEqual(done);
          }
          const before = statsTables(conn);
          conn.close();
          const again = open(dir);
          expect(statsAggregates(again.conn.sqlite).rebuildIfStale()).toBe(false);
          expect(statsTables(again.conn)).toEqual(before);
          again.conn.close();
        },
      ),
      { numRuns: 12 },
    );
  });

  it('an empty one gets empty aggregates', () => {
    const dir = tmpDir('lamer-stats-old-');
    databaseBeforeAggregates(dir, []).close();
    const { conn, repos } = open(dir);
    expect(repos.sessions.statsGroups('t1')).toEqual([]);
    expect(repos.sessions.completedToken('t1')).toBe('0:0');
    expect(statsTables(conn)).toEqual({ groups: [], retries: [], tenants: [], completions: [] });
  });
});

describe('a completion and its aggregates commit together', () => {
  /** Makes the aggregates of session `id` fail to write (its completion row), until the returned function is called. */
  function breakCompletionOf(conn: DatabaseConnection, id: string): () => void {
    conn.sqlite.exec(`CREATE TRIGGER broken_completion BEFORE INSERT ON stats_completions WHEN NEW.session_id = '${id}'
      BEGIN SELECT RAISE(ABORT, 'stats_completions refused'); END`);
    return () => conn.sqlite.exec('DROP TRIGGER broken_completion');
  }

  it('aggregates that cannot be written roll back the step and the session update, alone or within a batch; a retry counts it once', async () => {
    const [fixtures] = fc.sample(statsSessions({ realistic: true, tenants: TENANTS, minLength: 30, maxLength: 30 }), { numRuns: 1, seed: 40 });
    const { conn, repos } = open(tmpDir('lamer-stats-atomic-'));
    for (const f of fixtures!) repos.sessions.insert(fixtureRow(f, 'active'));
    const order = shuffled(fixtures!, 3);
    const victim = order[5]!;
    const countSteps = (id: string) => (conn.sqlite.prepare('SELECT count(*) AS n FROM steps WHERE session_id = ?').get(id) as { n: number }).n;

    // alone in its transaction
    for (const f of order.slice(0, 5)) await repos.hot.commitStep(completingCommit(f));
    const mend = breakCompletionOf(conn, victim.id);
    const before = statsTables(conn);
    await expect(repos.hot.commitStep(completingCommit(victim))).rejects.toThrow(/stats_completions refused/);
    expect(statsTables(conn)).toEqual(before);
    expect(repos.hot.session(victim.id)?.status).toBe('active');
    expect(countSteps(victim.id)).toBe(0);

    // within a batch: the others commit with their aggregates, the victim with nothing
    const batch = [victim, ...order.slice(6, 12)];
    const results = await Promise.allSettled(batch.map((f) => repos.hot.commitStep(completingCommit(f))));
    expect(results.map((r) => r.status)).toEqual(['rejected', ...batch.slice(1).map(() => 'fulfilled')]);
    expect(repos.hot.session(victim.id)?.status).toBe('active');
    expect(countSteps(victim.id)).toBe(0);
    expectSameAnswers(repos, [{}, { memory: 'none' }]);
    expect(repos.sessions.completionsBetween(victim.tenant, 0, 100)).not.toContain(victim.id);

    // mended: the retry and the rest complete, each counted once
    mend();
    for (const f of [victim, ...order.slice(12)]) await repos.hot.commitStep(completingCommit(f));
    expectSameAnswers(repos, [{}, { memory: 'none' }, { mode: 'eval' }, { modelVersion: 'v2', env: 'webshop' }]);
    for (const tenant of TENANTS) {
      const ids = fixtures!.filter((f) => f.tenant === tenant).map((f) => f.id);
      const logged = repos.sessions.completionsBetween(tenant, 0, 100);
      expect([...logged].sort()).toEqual(ids.sort());
    }
    // nothing to rebuild: the aggregates count every completed session
    expect(statsAggregates(conn.sqlite).rebuildIfStale()).toBe(false);
  });

  it('a session inserted as completed whose aggregates cannot be written is not inserted', () => {
    const [fixtures] = fc.sample(statsSessions({ realistic: true, minLength: 3, maxLength: 3 }), { numRuns: 1, seed: 9 });
    const { conn, repos } = open(tmpDir('lamer-stats-atomic-'));
    repos.sessions.insert(fixtureRow(fixtures![0]!));
    const mend = breakCompletionOf(conn, fixtures![1]!.id);
    expect(() => repos.sessions.insert(fixtureRow(fixtures![1]!))).toThrow(/stats_completions refused/);
    expect(repos.hot.session(fixtures![1]!.id)).toBeUndefined();
    mend();
    repos.sessions.insert(fixtureRow(fixtures![1]!));
    repos.sessions.insert(fixtureRow(fixtures![2]!));
    expect(repos.sessions.completionSeq('t1')).toBe(3);
    expectSameAnswers(repos, [{}]);
  });
});
