/**
 * The `replays` queries of src/db/replays-repo.ts on PostgreSQL (AsyncReplays): stored replay
 * reports, and the reads of recorded sessions a replay needs, with the same filters and orders.
 */
import { and, asc, desc, eq, inArray, isNotNull, lt, sql, type SQL } from 'drizzle-orm';
import type { AsyncReplays } from '../async-repositories.js';
import { replaySessionConditions } from '../replay-filter.js';
import type { PgDb } from './connection.js';
import { reflections, replays, sessions, steps } from './schema.js';

/** AsyncReplays over a PostgreSQL store (errors unmapped: src/db/pg/repositories.ts maps them). */
export function pgReplays(db: PgDb): AsyncReplays {
  return {
    async insert(row) {
      await db.insert(replays).values(row);
    },
    async get(tenant, id) {
      const [row] = await db.select().from(replays).where(and(eq(replays.tenant, tenant), eq(replays.id, id))).limit(1);
      return row;
    },
    async has(tenant, id) {
      const rows = await db.select({ id: replays.id }).from(replays).where(and(eq(replays.tenant, tenant), eq(replays.id, id))).limit(1);
      return rows.length > 0;
    },
    list(tenant, f, limit, cursor) {
      const conds: SQL[] = [eq(replays.tenant, tenant)];
      if (f.modelVersion) conds.push(eq(replays.modelVersion, f.modelVersion));
      if (cursor) conds.push(lt(replays.id, cursor));
      return db
        .select({
          id: replays.id, tenant: replays.tenant, modelVersion: replays.modelVersion, decoding: replays.decoding,
          request: replays.request, summary: replays.summary, sessions: replays.sessions, createdAt: replays.createdAt,
        })
        .from(replays)
        .where(and(...conds))
        .orderBy(desc(replays.id))
        .limit(limit + 1);
    },
    sessions(tenant, f, limit) {
      return db
        .select()
        .from(sessions)
        .where(and(...replaySessionConditions(sessions, tenant, f)))
        .orderBy(desc(sessions.id))
        .limit(limit);
    },
    async modelCalls(sessionIds) {
      const out = new Map<string, number>();
      if (sessionIds.length === 0) return out;
      const rows = await db
        .select({ id: steps.sessionId, n: sql<number>`count(*)::int` })
        .from(steps)
        .where(and(inArray(steps.sessionId, [...sessionIds]), eq(steps.kind, 'action'), isNotNull(steps.output)))
        .groupBy(steps.sessionId);
      for (const r of rows) out.set(r.id, r.n);
      return out;
    },
    actionRows(sessionId) {
      return db
        .select({
          attempt: steps.attempt, step: steps.step, kind: steps.kind, observation: steps.observation, done: steps.done,
          success: steps.success, availableActions: steps.availableActions, output: steps.output, action: steps.action,
          promptTokenIds: steps.promptTokenIds, outputTokenIds: steps.outputTokenIds, logprobs: steps.logprobs,
          engineRecord: steps.engineRecord, turn: steps.turn, modelVersion: steps.modelVersion,
        })
        .from(steps)
        .where(and(eq(steps.sessionId, sessionId), eq(steps.kind, 'action')))
        .orderBy(asc(steps.attempt), asc(steps.step));
    },
    async reflections(sessionId) {
      const rows = await db
        .select({ attempt: reflections.attempt, text: reflections.text })
        .from(reflections)
        .where(eq(reflections.sessionId, sessionId));
      return new Map(rows.map((r) => [r.attempt, r.text] as const));
    },
  };
}
