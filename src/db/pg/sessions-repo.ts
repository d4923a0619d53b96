/**
 * The `sessions` and `reflections` queries of src/db/sessions-repo.ts on PostgreSQL (AsyncSessions):
 * the same filters, orders and answers. Session ids are lowercase ASCII (`ses_...`), so ordering
 * them gives the same order under any collation as SQLite's bytewise one.
 */
import type pg from 'pg';
import { and, desc, eq, gt, inArray, lt, sql, type SQL } from 'drizzle-orm';
import type { AsyncSessions } from '../async-repositories.js';
import type { SessionRow } from '../schema.js';
import type { AttemptTrajectory, SessionFilters } from '../sessions-repo.js';
import type { PgDb } from './connection.js';
import { reflections, sessions, steps, unescapeText } from './schema.js';
import { insertSessionRow, insertSessionUnderCap } from './session-create.js';
import { inTransaction } from './statements.js';
import { completionSeq, completionsBetween, recordCompletion, statsGroupsOf, statsToken } from './stats-aggregates.js';

/** Conditions of `f` on the sessions table, after `first` (as src/db/sessions-repo.ts filterConds). */
function filterConds(first: SQL[], f: SessionFilters): SQL[] {
  const conds = [...first];
  if (f.status) conds.push(eq(sessions.status, f.status));
  if (f.taskId) conds.push(eq(sessions.taskId, f.taskId));
  if (f.env) conds.push(eq(sessions.env, f.env));
  if (f.mode) conds.push(eq(sessions.mode, f.mode));
  if (f.modelVersion) conds.push(eq(sessions.modelVersion, f.modelVersion));
  if (f.memory === 'none') conds.push(eq(sessions.maxAttempts, 1));
  else if (f.memory) conds.push(eq(sessions.memory, f.memory), gt(sessions.maxAttempts, 1));
  return conds;
}

/**
 * AsyncSessions over a PostgreSQL store (errors unmapped: src/db/pg/repositories.ts maps them);
 * `pool` is the pool `db` runs on, for the inserts' prepared statements.
 */
export function pgSessions(db: PgDb, pool: pg.Pool): AsyncSessions {
  return {
    insert: async (row) => void (await insertSession(pool, row)),
    insertUnderCap: (row, cap) => insertSession(pool, row, cap),
    list(tenant, f, limit, cursor) {
      const conds = filterConds([eq(sessions.tenant, tenant)], f);
      if (cursor) conds.push(lt(sessions.id, cursor));
      return db.select().from(sessions).where(and(...conds)).orderBy(desc(sessions.id)).limit(limit + 1);
    },
    async abandon(id, attempts, now) {
      await db.update(sessions).set({ status: 'abandoned', attempts, updatedAt: now }).where(eq(sessions.id, id));
    },
    editReflection(sessionId, attempt, text, now) {
      // as src/db/sessions-repo.ts: the session's updatedAt moves on with the edit
      return db.transaction(async (tx) => {
        const r = await tx
          .update(reflections)
          .set({ text, source: 'human', updatedAt: now })
          .where(and(eq(reflections.sessionId, sessionId), eq(reflections.attempt, attempt)));
        const changes = r.rowCount ?? 0;
        if (changes > 0) {
          const updatedAt = sql`greatest(${now}::bigint, ${sessions.updatedAt} + 1)`;
          await tx.update(sessions).set({ updatedAt }).where(eq(sessions.id, sessionId));
        }
        return changes;
      });
    },
    async idleIds(cutoff) {
      const rows = await db
        .select({ id: sessions.id })
        .from(sessions)
        .where(and(eq(sessions.status, 'active'), lt(sessions.updatedAt, cutoff)));
      return rows.map((r) => r.id);
    },
    async expire(id, attempts, cutoff, now) {
      const r = await db
        .update(sessions)
        .set({ status: 'expired', attempts, updatedAt: now })
        .where(and(eq(sessions.id, id), eq(sessions.status, 'active'), lt(sessions.updatedAt, cutoff)));
      return r.rowCount === 1;
    },
    async activeCount(tenant) {
      const where = tenant === undefined ? eq(sessions.status, 'active') : and(eq(sessions.tenant, tenant), eq(sessions.status, 'active'));
      const [r] = await db.select({ n: sql<number>`count(*)::int` }).from(sessions).where(where);
      return r?.n ?? 0;
    },
    completed(tenant, f) {
      const conds = filterConds([eq(sessions.tenant, tenant), eq(sessions.status, 'completed')], f);
      return db
        .select({
          id: sessions.id,
          taskId: sessions.taskId,
          attempts: sessions.attempts,
          maxAttempts: sessions.maxAttempts,
          modelVersion: sessions.modelVersion,
          env: sessions.env,
          mode: sessions.mode,
          memory: sessions.memory,
        })
        .from(sessions)
        .where(and(...conds))
        .orderBy(sessions.id);
    },
    completedToken: (tenant) => statsToken(db, tenant),
    statsGroups: (tenant) => statsGroupsOf(db, tenant),
    attemptTrajectories: (tenant, f, maxSessions) => {
      const where = and(...filterConds([eq(sessions.tenant, tenant), eq(sessions.status, 'completed')], f));
      return trajectories(db, sql`WHERE ${where} ORDER BY ${sessions.id} DESC LIMIT ${maxSessions}`);
    },
    trajectoriesOf: (tenant, f, ids) => trajectoriesOf(db, tenant, f, ids),
    completionSeq: (tenant) => completionSeq(db, tenant),
    completionsBetween: (tenant, after, upTo) => completionsBetween(db, tenant, after, upTo),
  };
}

/**
 * AsyncSessions.insert and insertUnderCap (`cap` > 0: under the tenant's open-session cap,
 * ./session-create.ts): one statement; a session inserted as completed is counted in the
 * statistics aggregates in the same transaction.
 */
async function insertSession(pool: pg.Pool, row: SessionRow, cap = 0): Promise<{ inserted: boolean; open: number }> {
  const insert = async (client: pg.Pool | pg.PoolClient) => {
    if (cap > 0) return insertSessionUnderCap(client, row, cap);
    await insertSessionRow(client, row);
    return { inserted: true, open: 0 };
  };
  if (row.status !== 'completed') return insert(pool);
  return inTransaction(pool, async (client) => {
    const done = await insert(client);
    if (done.inserted) await recordCompletion(client, row);
    return done;
  });
}

/** AsyncSessions.trajectoriesOf: src/db/sessions-repo.ts trajectoriesOf. */
async function trajectoriesOf(
  db: PgDb,
  tenant: string,
  f: Omit<SessionFilters, 'status'>,
  ids: readonly string[],
): Promise<AttemptTrajectory[]> {
  const out: AttemptTrajectory[] = [];
  for (let i = 0; i < ids.length; i += 5000) {
    const chunk = ids.slice(i, i + 5000);
    const where = and(...filterConds([eq(sessions.tenant, tenant), eq(sessions.status, 'completed'), inArray(sessions.id, chunk)], f));
    out.push(...(await trajectories(db, sql`WHERE ${where}`)));
  }
  return out.sort((a, b) => (a.sessionId < b.sessionId ? -1 : a.sessionId > b.sessionId ? 1 : 0));
}

/**
 * The trajectory rows of the sessions that `chosen` (a WHERE clause, with ORDER and LIMIT if any)
 * selects: src/db/sessions-repo.ts `trajectories`, with `string_agg` for `group_concat`.
 */
async function trajectories(db: PgDb, chosen: SQL): Promise<AttemptTrajectory[]> {
  const r = await db.execute<AttemptTrajectory & Record<string, unknown>>(sql`
    WITH s AS (SELECT ${sessions.id} AS id, ${sessions.modelVersion} AS mv, ${sessions.env} AS env, ${sessions.taskId} AS task,
                      CASE WHEN ${sessions.maxAttempts} = 1 THEN 'none' ELSE ${sessions.memory} END AS memory
               FROM ${sessions} ${chosen})
    SELECT s.id AS "sessionId", s.mv AS "modelVersion", s.env AS env, s.task AS "taskId", s.memory AS memory,
           string_agg(coalesce(st.action, ''), E'\\n' ORDER BY st.step) AS trajectory
    FROM s LEFT JOIN ${steps} st ON st.session_id = s.id AND st.kind = 'action' AND st.action IS NOT NULL
    GROUP BY s.id, s.mv, s.env, s.task, s.memory, st.attempt
    ORDER BY s.id, st.attempt`);
  // read as stored: the free text of the schema's escape (./schema.ts escapeText)
  const text = (v: string | null) => (v === null ? null : unescapeText(v));
  return r.rows.map((t) => ({ ...t, taskId: unescapeText(t.taskId), env: text(t.env), trajectory: text(t.trajectory) }));
}
