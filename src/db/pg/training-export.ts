/**
 * Training's reads and writes (src/db/training-data.ts) and the export query (src/db/export.ts) on
 * PostgreSQL (AsyncTrainingData, AsyncExport): the same rows in the same orders.
 */
import { and, asc, eq, gte, inArray, sql, type SQL } from 'drizzle-orm';
import type { AsyncExport, AsyncTrainingData } from '../async-repositories.js';
import { EXPORT_CHUNK_ROWS, type ExportFilter, type ExportLine } from '../export.js';
import type { PgDb } from './connection.js';
import { escapeText, sessions, steps, unescapeText } from './schema.js';

/** Sessions bound in one `IN (...)` list (as the SQLite repository reads them). */
const IN_CHUNK = 500;
/** Scores written per UPDATE statement (each score is 6 array elements of one statement's parameters). */
const SCORE_CHUNK = 5000;

/** AsyncTrainingData over a PostgreSQL store (errors unmapped: src/db/pg/repositories.ts maps them). */
export function pgTrainingData(db: PgDb): AsyncTrainingData {
  return {
    async completedTrainSessions(filter) {
      const where: SQL[] = [eq(sessions.mode, 'train'), eq(sessions.status, 'completed')];
      if (filter.since !== undefined) where.push(gte(sessions.createdAt, filter.since));
      if (filter.env !== undefined) where.push(eq(sessions.env, filter.env));
      if (filter.taskIds !== undefined) {
        if (filter.taskIds.length === 0) return [];
        where.push(inArray(sessions.taskId, filter.taskIds));
      }
      if (filter.modelVersion !== undefined) where.push(eq(sessions.modelVersion, filter.modelVersion));
      return db
        .select({ id: sessions.id, taskId: sessions.taskId, createdAt: sessions.createdAt, sampling: sessions.sampling })
        .from(sessions)
        .where(and(...where));
    },
    async countCompletedTrainSessions(since) {
      const [r] = await db
        .select({ n: sql<number>`count(*)::int` })
        .from(sessions)
        .where(and(eq(sessions.mode, 'train'), eq(sessions.status, 'completed'), gte(sessions.createdAt, since)));
      return r?.n ?? 0;
    },
    async stepOutputs(sessionIds) {
      const out = [];
      for (let i = 0; i < sessionIds.length; i += IN_CHUNK) {
        out.push(
          ...(await db
            .select({
              sessionId: steps.sessionId,
              attempt: steps.attempt,
              step: steps.step,
              kind: steps.kind,
              output: steps.output,
              engineRecord: steps.engineRecord,
              turn: steps.turn,
            })
            .from(steps)
            .where(inArray(steps.sessionId, sessionIds.slice(i, i + IN_CHUNK)))),
        );
      }
      return out;
    },
    async stepRowsOf(sessionIds) {
      const out = [];
      for (let i = 0; i < sessionIds.length; i += IN_CHUNK) {
        out.push(
          ...(await db.select().from(steps).where(inArray(steps.sessionId, sessionIds.slice(i, i + IN_CHUNK)))
            .orderBy(asc(steps.sessionId), asc(steps.attempt), asc(steps.step), asc(steps.kind))),
        );
      }
      return out;
    },
    async writeStepScores(scores) {
      // One transaction; each statement joins the steps to the scores passed as parallel arrays.
      await db.transaction(async (tx) => {
        for (let i = 0; i < scores.length; i += SCORE_CHUNK) {
          const c = scores.slice(i, i + SCORE_CHUNK);
          await tx.execute(sql`
            UPDATE ${steps} SET return = v.r, advantage = v.a
            FROM unnest(${sql.param(c.map((s) => s.sessionId))}::text[], ${sql.param(c.map((s) => s.attempt))}::int[],
                        ${sql.param(c.map((s) => s.step))}::int[], ${sql.param(c.map((s) => s.kind))}::text[],
                        ${sql.param(c.map((s) => s.return))}::float8[], ${sql.param(c.map((s) => s.advantage))}::float8[])
                 AS v(session_id, attempt, step, kind, r, a)
            WHERE ${steps.sessionId} = v.session_id AND ${steps.attempt} = v.attempt
              AND ${steps.step} = v.step AND ${steps.kind} = v.kind`);
        }
      });
    },
  };
}

/** One joined steps/sessions row of the export query (JSON columns as their text). */
interface ExportRow extends Record<string, unknown> {
  session_id: string;
  tenant: string;
  task_id: string;
  env: string | null;
  mode: ExportLine['mode'];
  status: ExportLine['sessionStatus'];
  attempt: number;
  step: number;
  kind: ExportLine['kind'];
  model_version: string;
  observation: string;
  available_actions: string | null;
  prompt: string | null;
  output: string | null;
  action: string | null;
  prompt_token_ids: string | null;
  output_token_ids: string | null;
  logprobs: string | null;
  dropped_steps: number | null;
  prompt_truncated_chars: number | null;
  reward: number;
  done: boolean;
  success: boolean;
  invalid_action: boolean;
  return: number | null;
  advantage: number | null;
  created_at: string;
  engine_record: string | null;
  turn: string | null;
}

const parse = <T>(s: string | null): T | null => (s === null ? null : (JSON.parse(s) as T));

/** The export line of one row (as src/db/export.ts toLine). */
function toLine(r: ExportRow): ExportLine {
  return {
    schemaVersion: 1,
    sessionId: r.session_id,
    tenant: r.tenant,
    taskId: unescapeText(r.task_id),
    env: r.env === null ? null : unescapeText(r.env),
    mode: r.mode,
    sessionStatus: r.status,
    attempt: r.attempt,
    step: r.step,
    kind: r.kind,
    modelVersion: r.model_version,
    observation: unescapeText(r.observation),
    availableActions: parse<string[]>(r.available_actions),
    prompt: r.prompt === null ? null : unescapeText(r.prompt),
    output: r.output === null ? null : unescapeText(r.output),
    action: r.action === null ? null : unescapeText(r.action),
    promptTokenIds: parse<number[]>(r.prompt_token_ids),
    outputTokenIds: parse<number[]>(r.output_token_ids),
    logprobs: parse<number[]>(r.logprobs),
    droppedSteps: r.dropped_steps,
    promptTruncatedChars: r.prompt_truncated_chars,
    reward: r.reward,
    done: r.done,
    success: r.success,
    invalidAction: r.invalid_action,
    return: r.return,
    advantage: r.advantage,
    createdAt: new Date(Number(r.created_at)).toISOString(),
    engine: parse<Record<string, unknown>>(r.engine_record),
    turn: parse<Record<string, unknown>>(r.turn),
  };
}

/**
 * AsyncExport over a PostgreSQL store: keyset-paginated chunks on the `steps_position` order, each
 * chunk one query (as src/db/export.ts: not one snapshot against a live database).
 */
export function pgExport(db: PgDb): AsyncExport {
  return {
    async *lines(filter: ExportFilter = {}, chunkRows = EXPORT_CHUNK_ROWS) {
      const where: SQL[] = [];
      if (filter.since !== undefined) where.push(sql`s.created_at >= ${filter.since}`);
      if (filter.env !== undefined) where.push(sql`s.env = ${escapeText(filter.env)}`);
      if (filter.mode !== undefined) where.push(sql`s.mode = ${filter.mode}`);
      if (filter.modelVersion !== undefined) where.push(sql`s.model_version = ${filter.modelVersion}`);
      if (filter.tenant !== undefined) where.push(sql`s.tenant = ${filter.tenant}`);
      if (filter.completedOnly) where.push(sql`s.status = 'completed'`);
      let last: ExportRow | null = null;
      for (;;) {
        const key = last && sql`(${last.session_id}::text, ${last.attempt}::int, ${last.step}::int, ${last.kind}::text)`;
        const after = key && sql`(st.session_id, st.attempt, st.step, st.kind) > ${key}`;
        const conds: SQL[] = after ? [...where, after] : where;
        const r = await db.execute<ExportRow>(sql`
          SELECT st.session_id, s.tenant, s.task_id, s.env, s.mode, s.status, st.attempt, st.step, st.kind,
                 st.model_version, st.observation, st.available_actions::text AS available_actions, st.prompt, st.output, st.action,
                 st.prompt_token_ids::text AS prompt_token_ids, st.output_token_ids::text AS output_token_ids,
                 st.logprobs::text AS logprobs,
                 st.dropped_steps, st.prompt_truncated_chars, st.reward, st.done, st.success, st.invalid_action, st.return, st.advantage,
                 st.created_at::text AS created_at, st.engine_record::text AS engine_record, st.turn::text AS turn
            FROM ${steps} st JOIN ${sessions} s ON s.id = st.session_id
            ${conds.length > 0 ? sql`WHERE ${sql.join(conds, sql` AND `)}` : sql``}
           ORDER BY st.session_id, st.attempt, st.step, st.kind
           LIMIT ${chunkRows}`);
        for (const row of r.rows) yield toLine(row);
        if (r.rows.length < chunkRows) break;
        last = r.rows[r.rows.length - 1]!;
      }
    },
  };
}
