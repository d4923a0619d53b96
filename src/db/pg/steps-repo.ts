/**
 * The `steps` reads and the step hot path on PostgreSQL (AsyncSteps, AsyncHot): the trajectory
 * pages of src/db/steps-repo.ts and the queries and step commit of src/db/queries.ts.
 *
 * Step commits are exactly once per position. Each starts with one statement (./step-commit.ts)
 * that locks the session row while the session is `active` (and, given `expectedUpdatedAt`,
 * unchanged since the step read it), inserts the step row `ON CONFLICT (session_id, attempt,
 * step, kind) DO NOTHING` on the `steps_position` unique index, and applies the session update
 * only when the row was inserted. Commits of one session take turns on its row lock: of two
 * replicas committing one position, the second waits for the first; if the first commits, the
 * second finds the session changed (or the position recorded) and writes nothing, then answers
 * the row the first stored; if the first rolls back, the second records it. A commit that
 * completes nothing (one row, or an attempt's end with its reflection and the reflection's record)
 * is that statement alone: one round trip. A commit that completes the session, which is counted
 * in the statistics aggregates (./stats-aggregates.ts), runs the statement inside a transaction
 * with the two statements of the statistics: BEGIN, 3 statements, COMMIT. A commit whose
 * statement wrote nothing writes nothing more, so a completion is counted once however many
 * replicas race on its step.
 */
import type pg from 'pg';
import { and, asc, eq, sql, type SQL, type SQLWrapper } from 'drizzle-orm';
import { SessionNotActiveError, type AsyncHot, type AsyncSteps, type StepCommitResult } from '../async-repositories.js';
import { StaleSessionError } from '../errors.js';
import type { StepInsert } from '../queries.js';
import type { StepPosition } from '../steps-repo.js';
import type { PgDb } from './connection.js';
import { reflections, sessions, steps } from './schema.js';
import { recordCompletion } from './stats-aggregates.js';
import { inTransaction } from './statements.js';
import { runStepCommit } from './step-commit.js';

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

/**
 * AsyncHot over a PostgreSQL store (errors unmapped: src/db/pg/repositories.ts maps them); `pool`
 * is the pool `db` runs on, for the step commit's prepared statement.
 */
export function pgHot(db: PgDb, pool: pg.Pool): AsyncHot {
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
      // A commit that completes nothing is the one statement, in its own transaction; one that
      // completes the session runs it in a transaction with the completion's statistics.
      const outcome =
        commit.session.status !== 'completed'
          ? await runStepCommit(pool, commit)
          : await inTransaction(pool, async (client) => {
              const o = await runStepCommit(client, commit);
              // the session was active when the statement locked it: this is its one completion
              if (o.completed) await recordCompletion(client, o.completed);
              return o;
            });
      if (outcome.inserted === 1) {
        if (outcome.updated !== 1) throw new Error(`step commit of session '${commit.session.id}' wrote the step but not the session`);
        return { recorded: true, requestHash: first.requestHash, answer: first.answer };
      }
      // Nothing was written: the position is recorded (by another replica, or a retry), else the session ended or changed.
      const row = await stored(first);
      if (row) return { recorded: false, ...row };
      if (outcome.unchanged === 1) {
        throw new Error(`step position (${first.sessionId}, ${first.attempt}, ${first.step}, ${first.kind}) taken, then gone`);
      }
      const [now] = await db.select({ status: sessions.status }).from(sessions).where(eq(sessions.id, commit.session.id));
      if (!now) throw new Error(`no session '${commit.session.id}' to update`);
      throw now.status === 'active' ? new StaleSessionError(commit.session.id) : new SessionNotActiveError(commit.session.id);
    },
  };
}
