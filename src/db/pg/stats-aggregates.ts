/**
 * The statistics aggregates of the PostgreSQL store (tables `stats_groups`, `stats_retries`,
 * `stats_tenants`, `stats_completions`; the SQLite store's are src/db/stats-aggregates.ts, which
 * says what they are for), kept in the transaction that completes a session and safe with several
 * replicas on one database:
 * - a completion locks its group's row (`SELECT ... FOR UPDATE`, after creating the row if it is
 *   missing) before it reads or writes anything of the group, so completions of one group
 *   serialise, and each reads what the one before it committed (READ COMMITTED: every statement
 *   sees the rows committed before it started);
 * - it then takes its seq by incrementing its tenant's row of `stats_tenants`, which it holds
 *   locked until it commits: a later completion of the tenant waits for it, so seqs are committed
 *   in their order, without gaps (a completion that rolls back gives its number to the next), and a
 *   reader that has seen seq n has seen every completion up to n. Locks are always taken group
 *   first, tenant second, so no two completions wait on each other in a cycle;
 * - a rebuild (at open, when the groups do not count every completed session) takes both tables in
 *   EXCLUSIVE mode first: completions that already touched them have committed, and those still to
 *   touch them wait and then add their session to the rebuilt rows (the rebuild did not see it, as
 *   it was not committed).
 */
import { and, asc, desc, eq, gt, lt, lte, sql } from 'drizzle-orm';
import {
  buildAggregates, countCompleted, emptyGroup, retryChainKey, statsGroupKey, statsMemory,
  type RetryOutcome, type StatsGroup, type StatsSession,
} from '../../shared/stats-aggregate.js';
import type { PgDb } from './connection.js';
import { sessions, statsCompletions, statsGroups, statsRetries, statsTenants } from './schema.js';

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

const retryColumns = {
  sessionId: statsRetries.sessionId,
  attempted: statsRetries.attempted,
  success: statsRetries.success,
  played: statsRetries.played,
  return: statsRetries.return,
  streak: statsRetries.streak,
};

/**
 * Count session `id`, which has just become completed, in its group, inside the caller's
 * transaction `tx` (call it once per session). No-op for an unknown id.
 */
export async function recordCompletion(tx: PgDb, id: string): Promise<void> {
  const [s] = await tx.select(sessionColumns).from(sessions).where(eq(sessions.id, id));
  if (!s) return;
  const groupKey = statsGroupKey(s);
  const memory = statsMemory(s);
  const at = and(eq(statsGroups.tenant, s.tenant), eq(statsGroups.groupKey, groupKey));
  await tx
    .insert(statsGroups)
    .values({ tenant: s.tenant, groupKey, ...emptyGroup({ ...s, memory }) })
    .onConflictDoNothing();
  const [g] = (await tx.select(groupColumns).from(statsGroups).where(at).for('update')) as StatsGroup[];
  const chainKey = retryChainKey(s);
  const inChain = and(eq(statsRetries.tenant, s.tenant), eq(statsRetries.chainKey, chainKey));
  let reads: { prev: RetryOutcome | null; tail: RetryOutcome[] } = { prev: null, tail: [] };
  if (memory === 'none') {
    const [prev] = await tx
      .select(retryColumns)
      .from(statsRetries)
      .where(and(inChain, lt(statsRetries.sessionId, s.id), eq(statsRetries.attempted, true)))
      .orderBy(desc(statsRetries.sessionId))
      .limit(1);
    const tail = await tx
      .select(retryColumns)
      .from(statsRetries)
      .where(and(inChain, gt(statsRetries.sessionId, prev?.sessionId ?? '')))
      .orderBy(asc(statsRetries.sessionId));
    reads = { prev: prev ?? null, tail };
  }
  const placed = countCompleted(g!, s as StatsSession, s.updatedAt, reads);
  await tx.update(statsGroups).set({ sessions: g!.sessions, updatedAt: g!.updatedAt, doc: g!.doc }).where(at);
  await logCompletion(tx, s.tenant, s.id);
  if (!placed) return;
  await tx.insert(statsRetries).values({ tenant: s.tenant, chainKey, ...placed.x });
  for (const c of placed.changed) {
    await tx.update(statsRetries).set({ streak: c.streak }).where(and(inChain, eq(statsRetries.sessionId, c.sessionId)));
  }
}

/** Append session `id` to the tenant's completions with the next seq (locking the tenant's counter until commit). */
async function logCompletion(tx: PgDb, tenant: string, id: string): Promise<void> {
  const [next] = await tx
    .insert(statsTenants)
    .values({ tenant, completed: 1 })
    .onConflictDoUpdate({ target: statsTenants.tenant, set: { completed: sql`${statsTenants.completed} + 1` } })
    .returning({ seq: statsTenants.completed });
  await tx.insert(statsCompletions).values({ tenant, seq: next!.seq, sessionId: id });
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
