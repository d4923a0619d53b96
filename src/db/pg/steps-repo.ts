/**
 * The `steps` reads and the step hot path on PostgreSQL (AsyncSteps, AsyncHot): the trajectory
 * pages of src/db/steps-repo.ts and the queries and step commit of src/db/queries.ts.
 *
 * Step commits are exactly once per position: each commit is one transaction whose first insert
 * is `ON CONFLICT (session_id, attempt, step, kind) DO NOTHING` on the `steps_position` unique
 * index. Of two transactions inserting one position, PostgreSQL makes the second wait for the
 * first; if the first commits, the second inserts nothing, rolls back, and answers the row the
 * first stored (read after the first committed); if the first rolls back, the second records it.
 * The session update applies only while the session is `active` (and, given `expectedUpdatedAt`,
 * unchanged since the step read it), so a session ended or changed by another replica takes no
 * step computed from its old state. The commit that completes a session counts it in the
 * statistics aggregates in the same transaction (./stats-aggregates.ts); a commit that lost its
 * position, or whose session update matched no row, rolls back before that, so a completion is
 * counted once however many replicas race on its step.
 */
import { and, asc, eq, sql, type SQL, type SQLWrapper } from 'drizzle-orm';
import { SessionNotActiveError, type AsyncHot, type AsyncSteps, type StepCommitResult } from '../async-repositories.js';
import { StaleSessionError } from '../errors.js';
import type { StepCommit, StepInsert } from '../queries.js';
import type { StepPosition } from '../steps-repo.js';
import type { PgDb } from './connection.js';
import { reflections, sessions, steps } from './schema.js';
import { recordCompletion } from './stats-aggregates.js';

/** AsyncSteps over a PostgreSQL store: byte sizes estimated as src/db/steps-repo.ts does (text as JSON string literals, JSON as stored). */
export function pgSteps(db: PgDb): AsyncSteps {
  return {
    async page(sessionId, after, limit, maxBytes) {
      const position = sql`(${steps.attempt}, ${steps.step}, ${steps.kind})`;
      const at = (p: StepPosition) => sql`(${p.attempt}::int, ${p.step}::int, ${p.kind}::text)`;
      const afterCond: SQL | undefined = after ? sql`${position} > ${at(after)}` : undefined;
      const text = (c: SQLWrapper) => sql`coalesce(octet_length(to_json(${c})::text), 4)`;
      const json = (c: SQLWrapper) => sql`coalesce(octet_length(${c}::text), 4)`;
      const size = sql<number>`(600 + ${text(steps.observation)} + ${json(steps.availableActions)} + ${json(steps.info)}
        + ${text(steps.prompt)} + ${text(steps.output)} + ${text(steps.action)} + ${json(steps.promptTokenIds)}
        + ${json(steps.outputTokenIds)} + ${json(steps.logprobs)} + ${json(steps.engineRecord)} + ${text(steps.modelVersion)})::int`;
      const where = afterCond ? and(eq(steps.sessionId, sessionId), afterCond) : eq(steps.sessionId, sessionId);
      const order = [asc(steps.attempt), asc(steps.step), asc(steps.kind)] as const;
      const sized = await db
        .select({ attempt: steps.attempt, step: steps.step, kind: steps.kind, size })
        .from(steps)
        .where(where)
        .orderBy(...order)
        .limit(limit + 1);
      let n = 0;
      let total = 0;
      while (n < sized.length && n < limit && (n === 0 || total + sized[n]!.size <= maxBytes)) total += sized[n++]!.size;
      const last = sized[n - 1];
      if (n === 0 || !last) return { rows: [], last: null };
      const upTo = sql`${position} <= ${at(last)}`;
      const rows = await db.select().from(steps).where(and(where, upTo)).orderBy(...order);
      return { rows, last: n < sized.length ? { attempt: last.attempt, step: last.step, kind: last.kind } : null };
    },
  };
}

/** Thrown inside a step commit's transaction to roll it back when its position is already recorded. */
class PositionTaken extends Error {}

/** The values of one step row to insert: JSON columns through the schema's json type, `answer` as the JSON text it already is. */
function stepValues(r: StepInsert) {
  return {
    ...r,
    promptTruncatedChars: r.promptTruncatedChars ?? null,
    engineRecord: (r.engineRecord ?? null) as Record<string, unknown> | null,
    turn: (r.turn ?? null) as Record<string, unknown> | null,
    answer: r.answer === null ? null : sql`${r.answer}::json`,
  };
}

/** AsyncHot over a PostgreSQL store (errors unmapped: src/db/pg/repositories.ts maps them). */
export function pgHot(db: PgDb): AsyncHot {
  const stored = async (r: StepInsert): Promise<{ requestHash: string; answer: string | null } | undefined> => {
    const [row] = await db
      .select({ requestHash: steps.requestHash, answer: sql<string | null>`${steps.answer}::text` })
      .from(steps)
      .where(and(eq(steps.sessionId, r.sessionId), eq(steps.attempt, r.attempt), eq(steps.step, r.step), eq(steps.kind, r.kind)));
    return row;
  };
  return {
    async session(id) {
      const [row] = await db.select().from(sessions).where(eq(sessions.id, id)).limit(1);
      return row;
    },
    stepAtPosition(sessionId, attempt, step) {
      return stored({ sessionId, attempt, step, kind: 'action' } as StepInsert);
    },
    stepsOfAttempt(sessionId, attempt) {
      return db
        .select({ observation: steps.observation, action: steps.action })
        .from(steps)
        .where(and(eq(steps.sessionId, sessionId), eq(steps.attempt, attempt), eq(steps.kind, 'action')))
        .orderBy(asc(steps.step));
    },
    reflections(sessionId) {
      return db
        .select({
          sessionId: reflections.sessionId,
          attempt: reflections.attempt,
          text: reflections.text,
          source: reflections.source,
          updatedAt: reflections.updatedAt,
        })
        .from(reflections)
        .where(eq(reflections.sessionId, sessionId))
        .orderBy(asc(reflections.attempt));
    },
    async activeCount(tenant) {
      const [r] = await db
        .select({ n: sql<number>`count(*)::int` })
        .from(sessions)
        .where(and(eq(sessions.tenant, tenant), eq(sessions.status, 'active')));
      return r?.n ?? 0;
    },
    async commitStep(commit): Promise<StepCommitResult> {
      const first = commit.rows[0];
      if (!first) throw new TypeError('a step commit needs at least one row');
      try {
        await db.transaction((tx) => applyCommit(tx as unknown as PgDb, commit));
        return { recorded: true, requestHash: first.requestHash, answer: first.answer };
      } catch (err) {
        if (!(err instanceof PositionTaken)) throw err;
      }
      const row = await stored(first);
      if (!row) throw new Error(`step position (${first.sessionId}, ${first.attempt}, ${first.step}, ${first.kind}) taken, then gone`);
      return { recorded: false, ...row };
    },
  };
}

/**
 * The writes of one step commit inside its transaction (see the top of this file).
 * @throws PositionTaken when the first row's position is already recorded; SessionNotActiveError
 *   when the session is not active; StaleSessionError when it changed since `expectedUpdatedAt`;
 *   the driver's error otherwise (the caller's transaction rolls back).
 */
async function applyCommit(tx: PgDb, { rows, reflection, session }: StepCommit): Promise<void> {
  for (const [i, r] of rows.entries()) {
    const inserted = await tx
      .insert(steps)
      .values(stepValues(r))
      .onConflictDoNothing({ target: [steps.sessionId, steps.attempt, steps.step, steps.kind] })
      .returning({ id: steps.id });
    if (inserted.length === 0) {
      if (i === 0) throw new PositionTaken();
      throw new Error(`step position (${r.sessionId}, ${r.attempt}, ${r.step}, ${r.kind}) is already recorded`);
    }
  }
  if (reflection) {
    await tx.insert(reflections).values({ ...reflection, source: 'policy' });
  }
  const set = { attempts: session.attempts, nextAttempt: session.nextAttempt, nextStep: session.nextStep, updatedAt: session.updatedAt };
  const unchanged = and(
    eq(sessions.id, session.id),
    eq(sessions.status, 'active'),
    session.expectedUpdatedAt === undefined ? undefined : eq(sessions.updatedAt, session.expectedUpdatedAt),
  );
  const updated = await tx
    .update(sessions)
    .set(session.status === 'active' ? set : { ...set, status: session.status as (typeof sessions.$inferInsert)['status'] })
    .where(unchanged);
  if (updated.rowCount !== 1) {
    const [now] = await tx.select({ status: sessions.status }).from(sessions).where(eq(sessions.id, session.id));
    if (!now) throw new Error(`no session '${session.id}' to update`);
    throw now.status === 'active' ? new StaleSessionError(session.id) : new SessionNotActiveError(session.id);
  }
  // the update applied to an active session, so this is the session's one completion
  if (session.status === 'completed') await recordCompletion(tx, session.id);
}
