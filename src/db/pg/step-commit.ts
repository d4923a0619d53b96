/**
 * The statement that commits a step on PostgreSQL: the session's lock and check, the step row's
 * insert and the session's update in one statement (data-modifying CTEs), so that a step costs
 * one round trip to the database instead of four (BEGIN, INSERT, UPDATE, COMMIT: on loopback TCP,
 * the socket writes of those round trips were over half of a replica's CPU per step).
 *
 * ```sql
 * WITH s   AS (SELECT id FROM sessions WHERE id = $id AND status = 'active'
 *              AND ($expected IS NULL OR updated_at = $expected) FOR UPDATE),
 *      ins AS (INSERT INTO steps (...) SELECT $values... FROM s
 *              ON CONFLICT (session_id, attempt, step, kind) DO NOTHING RETURNING 1),
 *      upd AS (UPDATE sessions SET ... WHERE id = $id AND EXISTS (SELECT 1 FROM ins) RETURNING 1)
 * SELECT count(s), count(ins), count(upd)
 * ```
 *
 * - `s` locks the session row while it is active and unchanged, so step commits of one session
 *   take turns on its row (on every replica); a commit that waited re-checks the row as the one
 *   before it left it (READ COMMITTED), and finds it changed or ended.
 * - `ins` writes the step only under that lock, and nothing when its position is recorded (the
 *   `steps_position` unique index, which sees rows committed after the statement began).
 * - `upd` applies the session update only when the step row was written.
 *
 * So the statement writes either both the step and the session update, or neither: `unchanged`
 * 0 (the session ended, changed, or is missing) or `inserted` 0 (the position is recorded) mean
 * nothing was written. Outside a transaction it is its own transaction, committed when its answer
 * arrives. The text is built once from the schema and sent as a named prepared statement: each
 * pooled connection parses it once, then sends only its parameters.
 */
import type pg from 'pg';
import { is, Param, Placeholder, sql, type DriverValueEncoder, type SQL } from 'drizzle-orm';
import { PgDialect, type PgColumn } from 'drizzle-orm/pg-core';
import type { StepCommit, StepInsert } from '../queries.js';
import { sessions, steps } from './schema.js';

/** The step row's fields, in the order of the insert's columns (every StepInsert field). */
const STEP_FIELDS = [
  'sessionId', 'attempt', 'step', 'kind', 'observation', 'reward', 'done', 'success', 'invalidAction', 'availableActions', 'info',
  'prompt', 'output', 'action', 'promptTokenIds', 'outputTokenIds', 'logprobs', 'droppedSteps', 'promptTruncatedChars',
  'engineRecord', 'turn', 'modelVersion', 'requestHash', 'answer', 'createdAt',
] as const satisfies ReadonlyArray<keyof StepInsert & keyof typeof steps>;

/** The session fields of a commit, prefixed so that they do not meet a step field's name. */
type SessionParams = {
  sId: string;
  sExpectedUpdatedAt: number | null;
  sStatus: string;
  sAttempts: unknown;
  sNextAttempt: number;
  sNextStep: number;
  sUpdatedAt: number;
};

/** Every parameter of the statement by name: one step row and the session's update. */
export type StepCommitParams = { [K in (typeof STEP_FIELDS)[number]]: StepInsert[K] | null } & SessionParams;

/** `answer` is JSON text already: sent as it is and cast, not serialised again by the column's encoder. */
const asIs: DriverValueEncoder<unknown, unknown> = { mapToDriverValue: (v) => v };

/** A parameter `value` (a value, or a placeholder) cast to `column`'s type and encoded as the column encodes it. */
function typed(value: unknown, column: PgColumn, encoder: DriverValueEncoder<unknown, unknown> = column): SQL {
  return sql`${sql.param(value, encoder)}::${sql.raw(column.getSQLType())}`;
}

/**
 * The statement (see the top of this file) with `param(name, column)` for each parameter.
 * Result row: `unchanged`, `inserted`, `updated` (0 or 1 each).
 */
function statement(param: (name: keyof StepCommitParams, column: PgColumn, encoder?: DriverValueEncoder<unknown, unknown>) => SQL): SQL {
  const expected = param('sExpectedUpdatedAt', sessions.updatedAt);
  const columns = sql.join(STEP_FIELDS.map((f) => sql.identifier(steps[f].name)), sql`, `);
  const values = sql.join(STEP_FIELDS.map((f) => param(f, steps[f], f === 'answer' ? asIs : undefined)), sql`, `);
  const position = sql.join([steps.sessionId, steps.attempt, steps.step, steps.kind].map((c) => sql.identifier(c.name)), sql`, `);
  const set = (column: PgColumn, name: keyof StepCommitParams) => sql`${sql.identifier(column.name)} = ${param(name, column)}`;
  return sql`WITH s AS (
      SELECT ${sessions.id} FROM ${sessions}
      WHERE ${sessions.id} = ${param('sId', sessions.id)} AND ${sessions.status} = 'active'
        AND (${expected} IS NULL OR ${sessions.updatedAt} = ${param('sExpectedUpdatedAt', sessions.updatedAt)})
      FOR UPDATE),
    ins AS (
      INSERT INTO ${steps} (${columns}) SELECT ${values} FROM s
      ON CONFLICT (${position}) DO NOTHING
      RETURNING 1),
    upd AS (
      UPDATE ${sessions} SET ${sql.join(
        [
          set(sessions.status, 'sStatus'), set(sessions.attempts, 'sAttempts'), set(sessions.nextAttempt, 'sNextAttempt'),
          set(sessions.nextStep, 'sNextStep'), set(sessions.updatedAt, 'sUpdatedAt'),
        ],
        sql`, `,
      )}
      WHERE ${sessions.id} = ${param('sId', sessions.id)} AND EXISTS (SELECT 1 FROM ins)
      RETURNING 1)
    SELECT (SELECT count(*) FROM s)::int AS "unchanged", (SELECT count(*) FROM ins)::int AS "inserted",
      (SELECT count(*) FROM upd)::int AS "updated"`;
}

/** What the statement did: see the top of this file. */
export interface StepCommitOutcome {
  /** 1 when the session was active and unchanged (and is now locked until the statement's transaction ends), else 0. */
  unchanged: number;
  /** 1 when the step row was written, 0 when its position was recorded already (or `unchanged` is 0). */
  inserted: number;
  /** 1 when the session update was applied (exactly when `inserted` is 1). */
  updated: number;
}

/** The parameters of the statement for `commit`'s first row and its session update. */
export function stepCommitParams(commit: StepCommit): StepCommitParams {
  const r = commit.rows[0];
  if (!r) throw new TypeError('a step commit needs at least one row');
  const s = commit.session;
  const step = Object.fromEntries(STEP_FIELDS.map((f) => [f, r[f] ?? null])) as StepCommitParams;
  return Object.assign(step, {
    sId: s.id,
    sExpectedUpdatedAt: s.expectedUpdatedAt ?? null,
    sStatus: s.status,
    sAttempts: s.attempts,
    sNextAttempt: s.nextAttempt,
    sNextStep: s.nextStep,
    sUpdatedAt: s.updatedAt,
  });
}

/** The statement with `params` bound, for a drizzle transaction's `execute`. */
export function stepCommitSql(params: StepCommitParams): SQL {
  // null is sent as SQL NULL, as drizzle's inserts do (a json column's encoder would write JSON null)
  return statement((name, column, encoder) => typed(params[name], column, encoder));
}

/** The statement's text, built once, with each parameter's name and encoder in the order of `$1..$n`. */
const prepared = (() => {
  const q = new PgDialect().sqlToQuery(statement((name, column, encoder) => typed(sql.placeholder(name), column, encoder)));
  const slots = q.params.map((p) => {
    if (!is(p, Param) || !is(p.value, Placeholder)) throw new Error('step commit statement: a parameter is not a placeholder');
    return { name: p.value.name as keyof StepCommitParams, encoder: p.encoder as DriverValueEncoder<unknown, unknown> };
  });
  return { text: q.sql, slots };
})();

/** Name of the prepared statement on each connection; a change of its text needs a new name. */
const STATEMENT_NAME = 'lamer_step_commit_1';

/**
 * Run the statement on `client` (a pool: its own transaction; a checked-out client: inside the
 * caller's transaction) as a named prepared statement.
 * @throws the driver's error (nothing written).
 */
export async function runStepCommit(client: pg.Pool | pg.PoolClient, params: StepCommitParams): Promise<StepCommitOutcome> {
  const values = prepared.slots.map(({ name, encoder }) => {
    const v = params[name];
    return v === null || v === undefined ? null : encoder.mapToDriverValue(v);
  });
  const r = await client.query<StepCommitOutcome>({ name: STATEMENT_NAME, text: prepared.text, values });
  const row = r.rows[0];
  if (!row) throw new Error('step commit statement returned no row');
  return row;
}
