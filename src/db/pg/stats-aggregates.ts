/**
 * The statistics aggregates of the PostgreSQL store (tables `stats_groups`, `stats_retries`,
 * `stats_tenants`, `stats_completions`; the SQLite store's are src/db/stats-aggregates.ts, which
 * says what they are for), kept in the transaction that completes a session and safe with several
 * replicas on one database:
 * - a completion locks its group's row (`INSERT ... ON CONFLICT DO UPDATE`, which creates the row
 *   when it is missing and returns it as the completion before committed it) before it reads or
 *   writes anything else of the group, so completions of one group serialise, and each reads what
 *   the one before it committed (the chain reads of single-attempt sessions in a snapshot that
 *   shows it: see lockGroup);
 * - it then takes its seq by incrementing its tenant's row of `stats_tenants`, which it holds
 *   locked until it commits: a later completion of the tenant waits for it, so seqs are committed
 *   in their order, without gaps (a completion that rolls back gives its number to the next), and a
 *   reader that has seen seq n has seen every completion up to n. Locks are always taken group
 *   first, tenant second, so no two completions wait on each other in a cycle;
 * - a rebuild (at open, when the groups do not count every completed session) takes both tables in
 *   EXCLUSIVE mode first: completions that already touched them have committed, and those still to
 *   touch them wait and then add their session to the rebuilt rows (the rebuild did not see it, as
 *   it was not committed).
 *
 * A completion's share of its commit is two statements (lockGroup, writeCompletion), each a named
 * prepared statement, in the transaction that writes the completing step (./steps-repo.ts).
 */
import type pg from 'pg';
import { and, asc, eq, gt, lte, sql } from 'drizzle-orm';
import type { PgColumn } from 'drizzle-orm/pg-core';
import {
  buildAggregates, countCompleted, emptyGroup, retryChainKey, statsGroupKey, statsMemory,
  type RetryOutcome, type StatsGroup, type StatsSession,
} from '../../shared/stats-aggregate.js';
import type { PgDb } from './connection.js';
import { sessions, statsCompletions, statsGroups, statsRetries, statsTenants, unescapeText } from './schema.js';
import { namedStatement, runNamed } from './statements.js';
import type { CompletedSession } from './step-commit.js';

const sessionColumns = {
  id: sessions.id,
  tenant: sessions.tenant,
  taskId: sessions.taskId,
  modelVersion: sessions.modelVersion,
  env: sessions.env,
  mode: sessions.mode,
  memory: sessions.memory,
  maxAttempts: sessions.maxAttempts,
  attempts: sessions.attempts,
  updatedAt: sessions.updatedAt,
};

const groupColumns = {
  modelVersion: statsGroups.modelVersion,
  env: statsGroups.env,
  mode: statsGroups.mode,
  memory: statsGroups.memory,
  sessions: statsGroups.sessions,
  updatedAt: statsGroups.updatedAt,
  doc: statsGroups.doc,
};

/** The columns of a retry outcome, as RetryOutcome names them. */
const retryColumns = {
  sessionId: statsRetries.sessionId,
  attempted: statsRetries.attempted,
  success: statsRetries.success,
  played: statsRetries.played,
  return: statsRetries.return,
  streak: statsRetries.streak,
};

/** `columns` as a select list, each under its field's name. */
const selectList = (columns: Record<string, PgColumn>) =>
  sql.join(Object.entries(columns).map(([name, c]) => sql`${sql.identifier(c.name)} AS ${sql.identifier(name)}`), sql`, `);

type GroupParam = 'tenant' | 'groupKey' | 'modelVersion' | 'env' | 'mode' | 'memory' | 'doc' | 'chain' | 'chainKey' | 'sessionId';

/**
 * The group's lock and read, with the chain reads of a single-attempt session, in one statement:
 * - `g` creates the group's row when it is missing and locks it (`ON CONFLICT DO UPDATE`, which
 *   waits for a completion that holds it and returns the row as that one committed it);
 * - `prev` and `tail` (only when `chain`) read what insertRetry needs of the task's chain;
 * - `fresh`: the group's `sessions` as the statement's snapshot sees it equals the locked row's, so
 *   no completion of the group committed between the snapshot and the lock, and the chain reads
 *   (taken in that snapshot; only completions of the group, which hold its lock, write its chains)
 *   are current. When not, the same statement run again inside the transaction is fresh.
 */
const lockGroup = namedStatement<GroupParam>('lamer_stats_lock_group_1', (param) => {
  const t = statsRetries;
  const g = statsGroups;
  const tenant = () => param('tenant', g.tenant);
  const groupKey = () => param('groupKey', g.groupKey);
  const inChain = sql`${param('chain', 'boolean')} AND ${t.tenant} = ${tenant()} AND ${t.chainKey} = ${param('chainKey', t.chainKey)}`;
  const cols = [g.tenant, g.groupKey, g.modelVersion, g.env, g.mode, g.memory, g.sessions, g.updatedAt, g.doc];
  const col = (c: PgColumn) => sql.identifier(c.name);
  return sql`WITH vis AS (SELECT ${g.sessions} FROM ${g} WHERE ${g.tenant} = ${tenant()} AND ${g.groupKey} = ${groupKey()}),
    grp AS (
      INSERT INTO ${g} (${sql.join(cols.map(col), sql`, `)})
      VALUES (${tenant()}, ${groupKey()}, ${param('modelVersion', g.modelVersion)}, ${param('env', g.env)},
        ${param('mode', g.mode)}, ${param('memory', g.memory)}, 0, 0, ${param('doc', g.doc)})
      ON CONFLICT (${col(g.tenant)}, ${col(g.groupKey)}) DO UPDATE SET ${col(g.tenant)} = excluded.${col(g.tenant)}
      RETURNING ${selectList(groupColumns)}),
    prev AS (
      SELECT ${selectList(retryColumns)} FROM ${t}
      WHERE ${inChain} AND ${t.sessionId} < ${param('sessionId', t.sessionId)} AND ${t.attempted}
      ORDER BY ${t.sessionId} DESC LIMIT 1),
    tail AS (
      SELECT ${selectList(retryColumns)} FROM ${t}
      WHERE ${inChain} AND ${t.sessionId} > coalesce((SELECT "sessionId" FROM prev), ''))
    SELECT grp.*, coalesce((SELECT vis."sessions" FROM vis), 0) = grp."sessions" AS "fresh",
      (SELECT row_to_json(prev) FROM prev) AS "prev",
      (SELECT coalesce(json_agg(tail ORDER BY tail."sessionId"), '[]'::json) FROM tail) AS "tail"
    FROM grp`;
});

type WriteParam =
  | 'tenant' | 'groupKey' | 'sessions' | 'updatedAt' | 'doc' | 'sessionId' | 'place' | 'chainKey'
  | 'attempted' | 'success' | 'played' | 'return' | 'streak' | 'movedIds' | 'movedStreaks';

/**
 * The writes of a completion in one statement, after lockGroup in the same transaction: the
 * group's update, the tenant's next seq (its counter row locked until commit) and the completion's
 * row with it, and for a single-attempt session its outcome and the streaks it moved.
 */
const writeCompletion = namedStatement<WriteParam>('lamer_stats_write_completion_1', (param) => {
  const g = statsGroups;
  const r = statsRetries;
  const tenant = () => param('tenant', g.tenant);
  const col = (c: PgColumn) => sql.identifier(c.name);
  const retryCols = [r.tenant, r.chainKey, r.sessionId, r.attempted, r.success, r.played, r.return, r.streak];
  return sql`WITH gu AS (
      UPDATE ${g} SET ${col(g.sessions)} = ${param('sessions', g.sessions)}, ${col(g.updatedAt)} = ${param('updatedAt', g.updatedAt)},
        ${col(g.doc)} = ${param('doc', g.doc)}
      WHERE ${g.tenant} = ${tenant()} AND ${g.groupKey} = ${param('groupKey', g.groupKey)} RETURNING 1),
    tn AS (
      INSERT INTO ${statsTenants} (${col(statsTenants.tenant)}, ${col(statsTenants.completed)}) VALUES (${tenant()}, 1)
      ON CONFLICT (${col(statsTenants.tenant)}) DO UPDATE SET ${col(statsTenants.completed)} = ${statsTenants.completed} + 1
      RETURNING ${statsTenants.completed} AS seq),
    co AS (
      INSERT INTO ${statsCompletions} (${col(statsCompletions.tenant)}, ${col(statsCompletions.seq)}, ${col(statsCompletions.sessionId)})
      SELECT ${tenant()}, seq, ${param('sessionId', statsCompletions.sessionId)} FROM tn RETURNING 1),
    rx AS (
      INSERT INTO ${r} (${sql.join(retryCols.map(col), sql`, `)})
      SELECT ${tenant()}, ${param('chainKey', r.chainKey)}, ${param('sessionId', r.sessionId)}, ${param('attempted', r.attempted)},
        ${param('success', r.success)}, ${param('played', r.played)}, ${param('return', r.return)}, ${param('streak', r.streak)}
      WHERE ${param('place', 'boolean')} RETURNING 1),
    rc AS (
      UPDATE ${r} SET ${col(r.streak)} = m.streak
      FROM unnest(${param('movedIds', 'text[]')}, ${param('movedStreaks', 'integer[]')}) AS m(session_id, streak)
      WHERE ${r.tenant} = ${tenant()} AND ${r.chainKey} = ${param('chainKey', r.chainKey)} AND ${r.sessionId} = m.session_id RETURNING 1)
    SELECT (SELECT count(*) FROM gu)::int AS "groups", (SELECT count(*) FROM co)::int AS "logged",
      (SELECT count(*) FROM rx)::int AS "placed", (SELECT count(*) FROM rc)::int AS "moved"`;
});

type LockedGroup = Omit<StatsGroup, 'env'> & { env: string | null; fresh: boolean; prev: RetryOutcome | null; tail: RetryOutcome[] };

/**
 * Count session `s`, which has just become completed (its fields as stored by that commit), in
 * its group, inside the caller's transaction on `client` (call it once per session): 2 statements,
 * 3 when a completion of the same group committed while this one waited for the group's lock and
 * the session is single-attempt (see lockGroup).
 * @throws Error when a write did not apply (the caller's transaction must roll back); the driver's error.
 */
export async function recordCompletion(client: pg.PoolClient, s: CompletedSession): Promise<void> {
  const groupKey = statsGroupKey(s);
  const memory = statsMemory(s);
  const chainKey = retryChainKey(s);
  const empty = emptyGroup({ ...s, memory });
  const read = { ...empty, tenant: s.tenant, groupKey, chain: memory === 'none', chainKey, sessionId: s.id };
  let [g] = await runNamed<GroupParam, LockedGroup>(client, lockGroup, read);
  if (g && !g.fresh && read.chain) [g] = await runNamed<GroupParam, LockedGroup>(client, lockGroup, read);
  if (!g || (read.chain && !g.fresh)) throw new Error(`statistics group of session '${s.id}' could not be locked and read`);
  const group: StatsGroup = { ...g, env: g.env === null ? null : unescapeText(g.env), updatedAt: Number(g.updatedAt) };
  const placed = countCompleted(group, s, s.updatedAt, { prev: g.prev, tail: g.tail });
  const x = placed?.x;
  const [w] = await runNamed<WriteParam, { groups: number; logged: number; placed: number; moved: number }>(client, writeCompletion, {
    tenant: s.tenant, groupKey, sessions: group.sessions, updatedAt: group.updatedAt, doc: group.doc, sessionId: s.id,
    place: placed !== null, chainKey, attempted: x?.attempted, success: x?.success, played: x?.played, return: x?.return, streak: x?.streak,
    movedIds: placed?.changed.map((c) => c.sessionId) ?? [], movedStreaks: placed?.changed.map((c) => c.streak) ?? [],
  });
  const want = { groups: 1, logged: 1, placed: placed ? 1 : 0, moved: placed?.changed.length ?? 0 };
  if (!w || w.groups !== want.groups || w.logged !== want.logged || w.placed !== want.placed || w.moved !== want.moved) {
    throw new Error(`statistics of session '${s.id}': wrote ${JSON.stringify(w)}, expected ${JSON.stringify(want)}`);
  }
}

/** The tenant's completions so far: the seq of its latest completion (0 before the first). */
export async function completionSeq(db: PgDb, tenant: string): Promise<number> {
  const [r] = await db.select({ n: statsTenants.completed }).from(statsTenants).where(eq(statsTenants.tenant, tenant));
  return r?.n ?? 0;
}

/** Ids of the tenant's sessions completed with a seq in (after, upTo], in completion order. */
export async function completionsBetween(db: PgDb, tenant: string, after: number, upTo: number): Promise<string[]> {
  const rows = await db
    .select({ id: statsCompletions.sessionId })
    .from(statsCompletions)
    .where(and(eq(statsCompletions.tenant, tenant), gt(statsCompletions.seq, after), lte(statsCompletions.seq, upTo)))
    .orderBy(asc(statsCompletions.seq));
  return rows.map((r) => r.id);
}

/** Every group of `tenant` (any order). */
export async function statsGroupsOf(db: PgDb, tenant: string): Promise<StatsGroup[]> {
  return (await db.select(groupColumns).from(statsGroups).where(eq(statsGroups.tenant, tenant))) as StatsGroup[];
}

/** `<completed sessions>:<latest update time among them>` of `tenant` from its groups (0:0 without any), as the SQLite store's. */
export async function statsToken(db: PgDb, tenant: string): Promise<string> {
  const [r] = await db
    .select({ n: sql<number>`coalesce(sum(${statsGroups.sessions}), 0)::int`, at: sql<string | null>`max(${statsGroups.updatedAt})::text` })
    .from(statsGroups)
    .where(eq(statsGroups.tenant, tenant));
  return `${r?.n ?? 0}:${r?.at ?? 0}`;
}

/**
 * Rebuild the groups and retry outcomes from the completed sessions, and append the completions
 * missing from `stats_completions` (in id order; those there keep their seq), when the groups or
 * the completions do not count as many sessions as are completed (checked under the tables'
 * EXCLUSIVE lock; see the top of this file).
 * @returns true when it rebuilt them.
 */
export async function rebuildStatsIfStale(db: PgDb): Promise<boolean> {
  return db.transaction(async (tx) => {
    await tx.execute(sql`LOCK TABLE ${statsGroups}, ${statsRetries}, ${statsTenants}, ${statsCompletions} IN EXCLUSIVE MODE`);
    const count = async (q: Promise<Array<{ n: number }>>) => (await q)[0]?.n ?? 0;
    const done = await count(tx.select({ n: sql<number>`count(*)::int` }).from(sessions).where(eq(sessions.status, 'completed')));
    const grouped = await count(tx.select({ n: sql<number>`coalesce(sum(${statsGroups.sessions}), 0)::int` }).from(statsGroups));
    const logged = await count(tx.select({ n: sql<number>`count(*)::int` }).from(statsCompletions));
    if (done === grouped && done === logged) return false;
    await tx.delete(statsRetries);
    await tx.delete(statsGroups);
    const rows = await tx.select(sessionColumns).from(sessions).where(eq(sessions.status, 'completed'));
    const inLog = new Set((await tx.select({ id: statsCompletions.sessionId }).from(statsCompletions)).map((r) => r.id));
    const byTenant = new Map<string, typeof rows>();
    for (const r of rows) {
      const list = byTenant.get(r.tenant) ?? [];
      list.push(r);
      byTenant.set(r.tenant, list);
    }
    for (const [tenant, list] of byTenant) {
      const { groups, retries } = buildAggregates(list as Array<StatsSession & { updatedAt: number }>);
      const groupRows = [...groups].map(([groupKey, g]) => ({ tenant, groupKey, ...g }));
      const retryRows = [...retries].flatMap(([chainKey, chain]) => chain.map((r) => ({ tenant, chainKey, ...r })));
      for (let i = 0; i < groupRows.length; i += 500) await tx.insert(statsGroups).values(groupRows.slice(i, i + 500));
      for (let i = 0; i < retryRows.length; i += 500) await tx.insert(statsRetries).values(retryRows.slice(i, i + 500));
      // the missing completions after the tenant's latest seq, in id order (numbered here: the tables are locked)
      const [counter] = await tx.select({ n: statsTenants.completed }).from(statsTenants).where(eq(statsTenants.tenant, tenant));
      let seq = counter?.n ?? 0;
      const missing = list.map((s) => s.id).filter((id) => !inLog.has(id)).sort().map((sessionId) => ({ tenant, seq: ++seq, sessionId }));
      for (let i = 0; i < missing.length; i += 1000) await tx.insert(statsCompletions).values(missing.slice(i, i + 1000));
      await tx
        .insert(statsTenants)
        .values({ tenant, completed: seq })
        .onConflictDoUpdate({ target: statsTenants.tenant, set: { completed: seq } });
    }
    return true;
  });
}
